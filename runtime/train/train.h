/* train: the training loop, written once over the Backend interface (runtime/backend.h).
 * Gradient accumulation, LR schedule, clipping, validation, sampling, checkpoints, exact resume, a progress
 * line per step and a metrics log (one JSON object per line) in the run folder (checkpoint.dir).
 * Before the first step a run holds the run folder's lock and has checked the folder (runtime/train/rundir.h),
 * every shard's header, the tokenizer and the resume pair (runtime/train/resume.h); a save writes a model+state
 * pair that resume takes only whole. */
#ifndef GPT2GEN_TRAIN_H
#define GPT2GEN_TRAIN_H
#include "gen/planset.h"
#include "runtime/backend.h"
#include "runtime/ranks/ranks.h"

/* train.num_gpus > 1 runs that many ranks in this process on the CPU backend (data parallel, ZeRO-0 or 1 by
   train.zero_stage; runtime/ranks/ranks.h); each is a whole CPU backend, hence a cap. */
enum { TRAIN_MAX_EMULATED_RANKS = 64 };
enum { TRAIN_EVAL_ROWS = 32 };   /* eval.hellaswag's completions per forward */

typedef struct {
    const char *backend;     /* "cpu", "cuda", or "auto" (cuda where there is a GPU, else cpu) */
    int quiet;               /* no per-step lines (tests) */
    /* One of procs processes, one per GPU (runtime/ranks/launch.h), joined with comm_id (NCCL's id; on the CPU backend,
       runtime/ranks/comm_socket.h's): this one is rank `rank` on GPU `device`. procs 0 or 1: this process is the whole
       run (train.num_gpus > 1 is then the CPU emulation). Only rank 0 prints progress, samples, and writes the
       metrics and the model file. */
    int rank, procs, device;
    const void *comm_id;     /* joined by the backend's make_comm (runtime/backend.h) */
    /* GPT2GEN_TEST_OVERFLOW, GPT2GEN_COMM_OVERLAP, GPT2GEN_NCCL_TIMEOUT and the backend's (common/env.h); NULL: defaults */
    const Env *env;
    /* rank 0 of ranks that mpirun or srun started: the id file (runtime/ranks/launch.h) it removes as soon as the
       ranks have joined, so that no exit, not even an _exit, leaves it behind; NULL: none */
    const char *id_file;
    /* start over (gpt2gen train --fresh): rank 0 removes the earlier run's checkpoints and logs from checkpoint.dir
       first (runtime/train/rundir.h, RUNDIR_FRESH); 0: a folder that holds checkpoints is refused without resume */
    int fresh;
} TrainOptions;

/* The plans a run of run needs (gen/planset.h): the training step, the one-row decode plan that samples
   (eval.sample_every) through a key/value cache on rank 0's weights, and eval.hellaswag's eval plans. */
PlanRequest train_plan_request(const RunSpec *run);
/* Runs the whole job with plans (made as train_plan_request asks).
   Returns an exit code: 0, 1 (a failure, printed), 130 (stopped by SIGINT after saving a checkpoint). */
int train_run(const RunSpec *run, const PlanSet *plans, const TrainOptions *opt);

/* Pieces the tests use. */
/* Rank ri's backend of the training plan: under ZeRO-1 with several ranks, it keeps the AdamW state of its shard
   only; env: the GPT2GEN_* settings (NULL: the defaults). */
Backend *train_make_rank_backend(const Plan *plan, const char *which, RankInfo ri, const Env *env, Err *err);
/* train.num_gpus > 1: in one process (procs <= 1) only with backend "cpu" (named: auto is CUDA on a GPU machine),
   and at most TRAIN_MAX_EMULATED_RANKS; as procs processes with num_gpus = procs. err says what to do otherwise. */
int train_check_ranks(const RunSpec *run, const char *config_path, const char *backend, int procs, Err *err);
/* The tokenizer samples print through (data.tokenizer) is there, or named "none", or not needed (no samples);
   err names the config, the path and what to do otherwise. Before building: the start of a run checks it again. */
int train_check_tokenizer(const RunSpec *run, const char *config_path, Err *err);
#endif
