/* tune: the GPU self-test module as the command line sees it (cli/tune.c, cli/test.c): the tuning engine of
   `gpt2gen tune` and the per-kernel tests of `gpt2gen test`. The rest of tune/ is internal to it (the harness, the
   families' workloads and tests, the timing); only this header is for cli/. */
#ifndef GPT2GEN_TUNE_H
#define GPT2GEN_TUNE_H
#include "gen/config.h"
#include "gen/plan.h"
#include "gen/planset.h"
#include "common/env.h"
#include "common/err.h"
#include <stddef.h>

#define TUNE_DEFAULT_ALGOS 16
#define TUNE_MAX_ALGOS 32        /* cuBLASLt candidates a matmul may try (runtime/cuda/matmul.h) */
#define TUNE_MAX_ROWS 8          /* --decode-rows counts at the most */

/* what `gpt2gen tune`'s options ask for */
typedef struct {
    const char *pattern;   /* --kernels: comma-separated globs on family names, matmul names, "attention-path" or "gelu-path";
                              NULL: everything */
    double budget;         /* --budget: seconds after which no new variant is measured; 0: no limit */
    int algos;             /* --algos: cuBLASLt heuristic algorithms per matmul, 1 to TUNE_MAX_ALGOS */
    int jobs;              /* -j: parallel compiles; 0: one per core */
    const Env *env;        /* the GPT2GEN_* settings (common/env.h; NULL: the defaults): the kernel cache, the
                              tuning database, the test hook GPT2GEN_TUNE_ENV, cuDNN */
    /* which plans (tune/targets.c): the training step, the decode plans, the eval plans (TUNE_PLAN_* bits: --only),
       the decode plans' rows (--decode-rows), the eval plans' rows (--eval-rows) and their positions (--eval-T: each
       rounded up to its bucket of gen/planset.h) */
    unsigned plans;
    int n_decode_rows, decode_rows[TUNE_MAX_ROWS];
    int eval_rows;
    int n_eval_T, eval_T[PLANSET_MAX_BUCKETS];
} TuneOptions;

/* ---- the plans a tune sweeps (tune/targets.c; no GPU needed) ---- */
enum { TUNE_PLAN_TRAIN = 1, TUNE_PLAN_DECODE = 2, TUNE_PLAN_EVAL = 4 };
/* The defaults: every plan the commands run by default: the training step; the decode plan of one row (`gpt2gen
   sample`'s --batch default, and training's samples); the eval plans of TUNE_DEFAULT_EVAL_ROWS rows (`gpt2gen
   eval`'s --rows default, and training's eval.hellaswag) in the buckets up to TUNE_DEFAULT_EVAL_T positions (where
   multiple-choice sets of HellaSwag's lengths fall); cuBLASLt's first TUNE_DEFAULT_ALGOS algorithms. */
#define TUNE_DEFAULT_EVAL_ROWS 32
#define TUNE_DEFAULT_EVAL_T 256
void tune_options_defaults(TuneOptions *o);
/* One option of the plans (--only, --decode-rows, --eval-rows, --eval-T) and its value into o: 0; 1 when opt is
   none of these; -1 and why (naming the option, what it expects and what it got) when value is not what it takes. */
int  tune_plan_option(TuneOptions *o, const char *opt, const char *value, char *why, size_t n);
/* The plan requests whose plan sets hold the plans o selects, into req (TUNE_MAX_ROWS at the most): the first has
   the training step, the first decode rows and the eval plans, each later one another count of decode rows.
   Returns how many. */
int  tune_plan_requests(const TuneOptions *o, PlanRequest *req);
/* The plans a tune sweeps, in the order it sweeps them: the training step, each decode plan, each eval plan. */
#define TUNE_MAX_PLANS (1 + TUNE_MAX_ROWS + PLANSET_MAX_BUCKETS)
typedef struct { int n; const Plan *plan[TUNE_MAX_PLANS]; } TuneTargets;
/* The plans o selects of sets (made from tune_plan_requests' requests, in their order): the training step, the
   decode plan of each set, the eval plan of each bucket that o->eval_T falls in (a bucket once; T past maxT: the
   last). Returns their count. */
int  tune_targets(const TuneOptions *o, const PlanSet *sets, int n_sets, TuneTargets *out);
/* A plan as the report and the progress name it: "train (B=8 T=64)", "decode (1 row)", "eval (32 rows, T=128)" */
void tune_plan_label(const Plan *plan, char *out, size_t n);

/* the report of a tune: per kernel family and matmul the default and the chosen variant, the attention path, the
   step before and after */
typedef struct {
    char *text;            /* NULL when the tune did not start (no GPU) */
    size_t len;
    int failed;            /* checks in it that failed: a default variant that does not run, a tuned step whose
                              losses do not match the untuned one's */
} TuneReport;

/* Tunes the plans of targets (made from cfg without the tuning database: their cfg is cfg), one after another, on
   this GPU. Each plan's kernel families (their variants at its shape: a plan without a backward varies only the
   tunables of the kernels it runs) and matmuls (cuBLASLt's algorithms) are timed and checked, every measurement
   appended to the tuning database, and the best written as "best" records keyed by that plan's shapes, so that the
   commands whose plan sets have that plan take them (gen/planset.h). The database's choices go into copies of the plans, whose attention path is
   decided again with this GPU's facts (gen/plan_attention.c). The training step also gets the attention
   and GELU paths, build/<name>/ rebuilt with its choices and its step timed before and after; the others are not
   timed as whole steps. Progress goes to stderr. Returns 0, or -1 and err when the tune could not run or stopped
   (no GPU, a build or a step that fails); rep holds what was reported either way (free it with
   tune_report_free). */
int  tune_run(const Config *cfg, const TuneTargets *targets, const TuneOptions *opt, TuneReport *rep, Err *err);
void tune_report_free(TuneReport *rep);

/* `gpt2gen test`: every generated kernel of plan (its CUBINs built) against the CPU reference on the GPU, then a
   whole training step against the CPU backend; then, where decode is not NULL, every kernel of that decode plan
   (the decode family's); one line per test, then "RESULT <passed> <failed> <skipped>". Without a GPU, a skip line.
   env: the GPT2GEN_* settings (NULL: the defaults). Returns 0, or -1 when a test failed. */
int  tune_test(const Config *cfg, const Plan *plan, const Plan *decode, const Env *env);
#endif
