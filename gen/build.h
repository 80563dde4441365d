/* build: config -> plan -> sources -> CUBINs, written to build/<name>/. */
#ifndef GPT2GEN_BUILD_H
#define GPT2GEN_BUILD_H
#include "gen/plan.h"

typedef struct { int modules, compiled, cached; double seconds; } BuildStats;

/* The arch to build for: the explicit one if given, else the config's, else the GPU's, else sm_90.
   *note says where it came from ("--arch", "config", "GPU 0", "default: no GPU found"). */
void build_pick_arch(const Config *cfg, const char *explicit_arch, char arch[16], const char **note);
/* Writes build/<name>/config.lua, plan.txt and kernels/ (sources and CUBINs). Prints one summary line
   unless quiet. threads <= 0: one per core. */
int  build_run(const Plan *plan, int threads, int quiet, BuildStats *st, Err *err);
#endif
