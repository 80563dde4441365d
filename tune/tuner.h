/* tuner: what the parts of the tuning engine share (internal to tune/; the command line uses tune/tune.h).
   tune/engine.c runs a tune, one plan after another: for each, the matmuls (tune/sweep_matmuls.c) and the kernel
   families (tune/sweep_kernels.c); for the training step also the attention path (tune/attention_path.c), the GELU
   path (tune/gelu_path.c), then the step before and after. Each measurement becomes a record of the tuning database
   as it is made, and a line of the report. */
#ifndef GPT2GEN_TUNER_H
#define GPT2GEN_TUNER_H
#include "tune/tune.h"
#include "tune/measure.h"
#include "gen/nvrtc.h"
#include "gen/tune_db.h"
#include "runtime/gpu.h"
#include <stdio.h>

/* a module's variants to sweep and their CUBINs (the default first) */
typedef struct {
    int n;
    TuneVariant v[TUNE_MAX_VARIANTS];
    CompileJob *jobs;                    /* one per variant */
    char **sources;
    int refused;
} FamilyVariants;

typedef struct {
    TuneOptions o;
    const Config *cfg;                   /* the config the plans were made from */
    const TuneTargets *targets;          /* the plans to tune, in order */
    Plan plan;                           /* the one being tuned, untuned: the baseline (t->g runs its shapes) */
    Plan *scratch;                       /* a copy for one variant */
    TuneEnv env;
    char cublaslt[32];
    CudaFacts facts;                     /* GPU 0's, for the plans the database's choices are applied to */
    TuneDb db;
    double t0;
    int done, total, over_budget, failed;
    char lost[600];                      /* what broke the GPU's context (an error every later call returns), or "" */
    Harness g;
    MeasureFlush flush;
    FamilyVariants fv[PLAN_MAX_FAMILIES];
    char *img[PLAN_MAX_FAMILIES];         /* the default variant's CUBIN of each module */
    FILE *rep;                           /* the report */
} Tuner;

/* 1 when name matches the --kernels globs (or there are none) */
int  tuner_matches(const Tuner *t, const char *name);
/* 0 once the budget is spent (said once) */
int  tuner_budget_left(Tuner *t);
/* the progress line of one measurement (reused: it came from the database) */
void tuner_progress(Tuner *t, const char *what, const char *variant, const TuneRecord *r, int reused);
/* the measure record of (what, name, variant) with key: from the database, else NULL */
const TuneRecord *tuner_measured(Tuner *t, const char *what, const char *name, const char *variant, const TuneKey *key);
/* r as record rec ("measure" or "best") into the database; a measure record is appended to its file at once */
void tuner_record(Tuner *t, TuneRecord *r, const char *rec, const char *what, const char *name, const char *variant,
                  const char *status, double us, double default_us, const TuneKey *key);
/* relerr of a against ref, and how many of a are not finite */
double tuner_rel_diff(const float *a, const float *ref, size_t n, size_t *nonfinite);

/* a workload's run as a MeasureRun */
typedef struct { Workload *w; Harness *g; Kernels *ks; } WlRun;
int  tuner_run_workload(void *ctx, Err *err);

/* tune/sweep_kernels.c: how many variants plan's sweep has (those of the families the globs match: families.h,
   tune_sweep_variants; else the default alone); t->plan's variants listed; their compilation (-1 and err when a
   default variant does not compile); the sweep of every family, fewest variants first; and freeing them */
int  sweep_kernels_count(Tuner *t, const Plan *plan);
void sweep_kernels_list(Tuner *t);
int  sweep_kernels_compile(Tuner *t, Err *err);
void sweep_kernels(Tuner *t);
void sweep_kernels_free(Tuner *t);
/* tune/sweep_matmuls.c: the algorithms plan's sweep times (--algos for each matmul the globs match that the step
   runs); cuBLASLt's candidates of each of t->plan's timed */
int  sweep_matmuls_count(const Tuner *t, const Plan *plan);
void sweep_matmuls(Tuner *t);
/* tune/attention_path.c: for attention = "auto" in bf16/fp16, cuDNN against the template with tuned's tiles; the
   choice applied to tuned (as the database's best records are) */
void attention_path_sweep(Tuner *t, Plan *tuned, TuneApplied *ap);
/* tune/gelu_path.c: for train.gelu = "auto", whole steps with the GELU in the epilogues, in our kernels and split; the
   fastest (whose losses agree) becomes the database's choice, applied to tuned */
void gelu_path_sweep(Tuner *t, Plan *tuned, TuneApplied *ap);
#endif
