/* train_run: the state of one training run (runtime/train/train.c) as the files that implement it share it; not an
   interface for anyone else. train_open.c opens and closes it, train.c runs the loop and the step, train_checkpoint.c saves checkpoints and
   resumes from them. */
#ifndef GPT2GEN_TRAIN_RUN_H
#define GPT2GEN_TRAIN_RUN_H
#include "runtime/train/train.h"
#include "runtime/data/dataloader.h"
#include "runtime/train/loss_scale.h"
#include "runtime/train/metrics.h"
#include "runtime/train/rundir.h"
#include "runtime/data/tokenizer.h"
#include "runtime/sample/sampler.h"
#include "runtime/eval/evaluate.h"

/* One rank's part of a run: its backend, its rows of the data, its batch. */
typedef struct {
    Backend *be;
    DataLoader train, val;
    int32_t *inputs, *targets;           /* the training batch (kept across steps in overfit_batch mode) */
    double loss_sum;                     /* this step's (or this validation's) losses */
} RankRun;

typedef struct {
    const RunSpec *run;
    const PlanSet *plans;
    const Plan *plan;                    /* plans->train: the model, its step, the config's name for messages */
    int world;                           /* train.num_gpus ranks (ranks.h) */
    int first, local;                    /* this process drives ranks first .. first+local-1: all of them (one
                                            process, the CPU emulation) or one (a process per GPU) */
    int lead;                            /* this process drives rank 0, which prints, samples, logs and writes the
                                            model file and the checkpoint's marker */
    RankRun *rk;                         /* local of them, rk[k] being rank first + k */
    Comm *comm;
    Backend *be;                         /* rk[0].be */
    Sampler *sampler;                    /* rank 0's, on be's weights; or NULL */
    Evaluator *evaluator;                /* eval.hellaswag: rank 0's, on be's weights; or NULL */
    EvalSet evalset;
    DataLoader *train;                   /* &rk[0].train: the data position every rank shares */
    int has_val;
    Tokenizer tok;
    int has_tok;
    int32_t *eval_inputs, *eval_targets; /* validation batches and sampling */
    int opened;                          /* ranks whose loaders are open */
    uint64_t sample_rng;
    RunDir dir;
    Metrics metrics;
    int plot_warned;                     /* plot.svg could not be written, and a warning said so (once) */
    int quiet;
    int stdout_gone;                     /* standard output failed (a closed pipe): it is /dev/null now */
    size_t num_params;
    LossScaler scaler;                   /* fp16: dynamic loss scaling; otherwise scale 1, never skips */
    const char *overflow_hook;           /* GPT2GEN_TEST_OVERFLOW (loss_scale.h), or NULL */
    int overlap;                         /* the gradients' averaging overlaps the backward (a process per rank;
                                            GPT2GEN_COMM_OVERLAP=0 turns it off) */
    int overlapped;                      /* this step's averaging was started by the backward */
} Run;

/* Everything a run checks before its first step: the run directory (rundir_open, by rank 0's process), every
   shard's header, the tokenizer, the metrics log (rank 0); then the backends, and the ranks joined. On an error,
   what was opened is still for run_close. */
int run_open(Run *r, const RunSpec *c, const PlanSet *plans, const TrainOptions *opt, Err *err);
void run_close(Run *r);
/* Every rank's word: *any = 1 when any rank's flag is set. Also a barrier: it returns when every rank has asked. */
int run_agree(Run *r, int flag, int *any, Err *err);
/* Saves the checkpoint of step (every rank calls it at the same step). */
int run_save_checkpoint(Run *r, int step, Err *err);
/* Parameters at the start: a resume state, else checkpoint.init, else fresh init. Returns the first step, or -1. */
int run_initial_state(Run *r, Err *err);
#endif
