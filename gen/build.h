/* build: config -> plan -> sources -> CUBINs, written to build/<name>/. */
#ifndef GPT2GEN_BUILD_H
#define GPT2GEN_BUILD_H
#include "gen/plan.h"

typedef struct { int modules, compiled, cached; double seconds; } BuildStats;

/* Writes build/<name>/config.lua, plan.txt and kernels/ (sources and CUBINs). Prints one summary line
   unless quiet. threads <= 0: one per core. Holds build/<name>/.lock while it runs (waiting for another build
   of the name, see gen/build.c) and replaces build/<name>/ in one step, only when everything succeeded. */
int  build_run(const Plan *plan, int threads, int quiet, BuildStats *st, Err *err);
#endif
