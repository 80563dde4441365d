/* measure: how `gpt2gen tune` (tune/engine.c) times things on the GPU: a workload after flushing L2, warm-up
   runs, then the median of enough repetitions; and whole training steps through the CUDA backend. */
#ifndef GPT2GEN_TUNE_MEASURE_H
#define GPT2GEN_TUNE_MEASURE_H
#include "tune/workloads.h"
#include "runtime/cuda/tune_api.h"

/* the buffer written before each timed run so that no run finds its inputs in L2 (twice the L2's size) */
typedef struct { dptr p; size_t bytes; CUevent e[2]; } MeasureFlush;
int  measure_flush_open(MeasureFlush *f, Harness *g, Err *err);
void measure_flush_close(MeasureFlush *f);

/* one timed thing: run(ctx) on g's stream */
typedef int (*MeasureRun)(void *ctx, Err *err);
/* median microseconds of run, each repetition after an L2 flush, after 2 warm-up runs; at least 5 repetitions
   and until 0.1 s of runs (at most 50) */
int  measure_median(Harness *g, MeasureFlush *f, MeasureRun run, void *ctx, double *us, Err *err);

/* mean ms of a training step (gradients zeroed, the fused forward and backward, norm, AdamW) of plan's CUDA backend over steps steps
   after 2 warm-up steps, from the same initial weights and batch every time; losses[0..2] the first three losses;
   env: the GPT2GEN_* settings (NULL: the defaults) */
int  measure_step_time(const Plan *plan, const Env *env, int steps, double *ms, float losses[3], Err *err);

/* Whether two plans' first three losses (step_time's, from the same weights and batch) agree: the same step computed
   another way (tuned kernels and matmuls, the other GELU path). *worst is their largest relative difference, *tol the
   precision's tolerance: 1e-4 in fp32, 2e-3 in 16 bits (on the H200 such steps differ by under 1e-5). */
int  measure_steps_agree(Precision p, const float a[3], const float b[3], double *worst, double *tol);
#endif
