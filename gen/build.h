/* build: config -> plan -> sources -> CUBINs, written to build/<name>/. */
#ifndef GPT2GEN_BUILD_H
#define GPT2GEN_BUILD_H
#include "common/env.h"
#include "gen/plan.h"

typedef struct { int families, compiled, cached; double seconds; } BuildStats;   /* families: of every plan */

#define BUILD_MAX_PLANS 4

/* Writes build/<name>/config.lua, plan.txt (a section per plan) and kernels/ (sources and CUBINs: the training
   plan's in kernels/, another plan's in kernels/<plan>/), and fills the kernel cache the runtime loads them from.
   The plans are one config's (plans[0]'s build folder and config). Prints one summary line unless quiet.
   threads <= 0: one per core. Holds build/<name>/.lock while it runs (waiting for another build of the name, at
   most env's GPT2GEN_LOCK_TIMEOUT seconds, see gen/build.c) and replaces build/<name>/ in one step, only when
   everything succeeded. env (common/env.h; NULL: the defaults) also gives the kernel cache and CUDA_HOME.
   Returns 0, -1 with err, or BUILD_NO_NVRTC where NVRTC or the CUDA headers are missing (nvrtc_ready): the
   sources, plan.txt and config.lua are written without CUBINs, and err says "generated the sources in
   build/<name>/ but cannot compile them: ...". */
#define BUILD_NO_NVRTC 1
int  build_plans(const Plan *const *plans, int n, int threads, int quiet, const Env *env, BuildStats *st, Err *err);
/* build_plans of one plan */
int  build_run(const Plan *plan, int threads, int quiet, const Env *env, BuildStats *st, Err *err);
#endif
