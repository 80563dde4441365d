/* evaluate: multiple-choice evaluation (HellaSwag style) of a model on an evaluation set (runtime/eval/evalset.h).
 * Every completion of every example is one row: its context and the completion's tokens, from position 0. The row's
 * score is the mean loss over the completion's tokens alone (the loss at position p predicts token p+1, so
 * positions ctx_len-1 .. ctx_len+len-2); the completion of the lowest score is the example's choice (the first such
 * on a tie), and it is correct when it is the label (docs/model.md, "Evaluation").
 * Rows run R at a time through a plan set's forward plan "eval" of R rows and T positions (gen/planset.h), the
 * bucket the longest row rounds up to; positions past a row's end are padding, which
 * the causal attention keeps from the row's own positions. Used by `gpt2gen eval` (cli/eval.c) and by training's
 * eval.hellaswag (runtime/train/train.c). */
#ifndef GPT2GEN_EVALUATE_H
#define GPT2GEN_EVALUATE_H
#include "gen/planset.h"
#include "runtime/backend.h"
#include "runtime/eval/evalset.h"

typedef struct {
    int examples, correct;
    double accuracy;
    int *choices;        /* examples: the chosen completion of each, in file order */
    double *scores;      /* rows: each completion's mean loss, example by example */
} EvalResult;

/* Called after each forward with the rows done so far; non-zero stops the evaluation (an error). */
typedef int (*EvalProgress)(void *ctx, int rows_done, int rows);

typedef struct {
    const Plan *plan;    /* the plan set's eval plan for the set's longest row */
    Backend *be;
    int rows, T;
} Evaluator;

/* An evaluator for set (checked against the model: evalset_check_model) with the eval plans of plans (their rows
   per forward; shared weights exactly when weights is given), on the backend kind which ("cpu", "cuda", "auto"),
   running on the weights of backend weights (same kind and model), or holding its own when weights is NULL (load
   them with evaluator_backend(e)->write(..., BACKEND_PARAMS, ...)). plans must outlive the evaluator. */
int  evaluator_open(Evaluator *e, const PlanSet *plans, const EvalSet *set, Backend *weights, const char *which,
                    int device, const Env *env, Err *err);
Backend *evaluator_backend(Evaluator *e);
/* Scores every row of set and fills r (evalresult_free frees it). */
int  evaluator_run(Evaluator *e, const EvalSet *set, EvalResult *r, EvalProgress progress, void *ctx, Err *err);
void evaluator_close(Evaluator *e);
void evalresult_free(EvalResult *r);
#endif
