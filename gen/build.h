/* build: config -> plan -> sources -> CUBINs, written to build/<name>/. */
#ifndef GPT2GEN_BUILD_H
#define GPT2GEN_BUILD_H
#include "gen/plan.h"

typedef struct { int modules, compiled, cached; double seconds; } BuildStats;

#define BUILD_MAX_PLANS 4

/* Writes build/<name>/config.lua, plan.txt (a section per plan) and kernels/ (sources and CUBINs: the training
   plan's in kernels/, another plan's in kernels/<plan>/), and fills the kernel cache the runtime loads them from.
   The plans are one config's (plans[0]'s build folder and config). Prints one summary line unless quiet.
   threads <= 0: one per core. Holds build/<name>/.lock while it runs (waiting for another build of the name, see
   gen/build.c) and replaces build/<name>/ in one step, only when everything succeeded. */
int  build_plans(const Plan *const *plans, int n, int threads, int quiet, BuildStats *st, Err *err);
/* build_plans of one plan */
int  build_run(const Plan *plan, int threads, int quiet, BuildStats *st, Err *err);
#endif
