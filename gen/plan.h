/* plan: everything derived from a Config (and the tuning database): the kernel modules to generate, each
   one's constants and tunables, every kernel's launch geometry, and the buffer sizes of one training step.
   Written to build/<name>/plan.txt for people; used in-process by the runtime. */
#ifndef GPT2GEN_PLAN_H
#define GPT2GEN_PLAN_H
#include "gen/config.h"

#define PLAN_MAX_MODULES 32
#define PLAN_MAX_KERNELS 16
#define PLAN_MAX_TUNABLES 8
#define PLAN_MAX_BUFFERS 64

typedef struct {
    char name[64];          /* the extern "C" __global__ function in the module */
    unsigned grid[3], block[3];
    unsigned smem;          /* dynamic shared memory, bytes */
} PlanKernel;

typedef struct {
    char name[32];
    int value;              /* the value used: config's tune table, else the tuning database, else the template's default */
    int n_candidates;       /* candidates for `gpt2gen tune`: the config's list, else the template's */
    int candidates[16];
    char origin[16];        /* "default", "config" or "tuned" */
} PlanTunable;

typedef struct {
    char family[32];        /* e.g. "layernorm" */
    char template_path[128];/* e.g. "templates/layernorm.cu" */
    int n_tunables;
    PlanTunable tunables[PLAN_MAX_TUNABLES];
    int n_kernels;
    PlanKernel kernels[PLAN_MAX_KERNELS];
    char source_path[1100]; /* build/<name>/kernels/<family>.cu */
    char cubin_path[1100];  /* build/<name>/kernels/<family>.cubin */
} PlanModule;

typedef struct { char name[32]; size_t elems; size_t bytes; } PlanBuffer;

typedef struct Plan {
    const Config *cfg;
    char build_dir[256];    /* build/<name> */
    char arch[16];          /* sm_XX the CUBINs are for */
    int n_modules;
    PlanModule modules[PLAN_MAX_MODULES];
    /* memory of one training step on the GPU, by buffer, and totals */
    int n_buffers;
    PlanBuffer buffers[PLAN_MAX_BUFFERS];
    size_t param_bytes, grad_bytes, opt_bytes, act_bytes, total_bytes;
} Plan;

/* Builds the plan for cfg, for arch (e.g. "sm_90"). Reads tunables from each template's header, the
   config's tune table and the tuning database. */
int  plan_make(Plan *plan, const Config *cfg, const char *arch, Err *err);
/* Writes build/<name>/plan.txt. */
int  plan_write(const Plan *plan, Err *err);
/* Lookups for the runtime. NULL when absent. */
const PlanModule *plan_module(const Plan *plan, const char *family);
const PlanKernel *plan_kernel(const Plan *plan, const char *kernel_name, const PlanModule **module);
int  plan_tunable(const PlanModule *m, const char *name);   /* the value; aborts if the template lacks it */

/* Used by the family table (gen/kernels.c) to describe a module's kernels. */
void plan_add_kernel(PlanModule *m, const char *name, unsigned gx, unsigned gy, unsigned gz,
                     unsigned block, unsigned smem);
static inline unsigned plan_ceil_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }
#endif
