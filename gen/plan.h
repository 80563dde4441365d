/* plan: everything derived from a Config: the kernel modules to generate (one per family of
   gen/kernels.c), each one's tunables, every kernel's launch geometry, the matmuls, and the buffer layout of
   one training step. Written to build/<name>/plan.txt for people; used in-process by the runtime. */
#ifndef GPT2GEN_PLAN_H
#define GPT2GEN_PLAN_H
#include "gen/config.h"
#include "gen/kernels.h"
#include "gen/matmuls.h"
#include "gen/memory.h"

#define PLAN_MAX_MODULES 16
#define PLAN_MAX_KERNELS 64

typedef struct {
    int value;              /* the config's tune value, else the declaration's default */
    int n_candidates;       /* candidates for sweeps: the config's list, else the declaration's */
    int candidates[16];
    const char *origin;     /* "default" or "config" */
} PlanTunable;

typedef struct {
    const FamilyDecl *decl;
    PlanTunable tunables[FAMILY_MAX_TUNABLES];
    int n_tunables;
    KernelEnv env;          /* shape, tunable values and derived constants, for geometry rules */
    char source_path[1100]; /* build/<name>/kernels/<family>.cu */
    char cubin_path[1100];  /* build/<name>/kernels/<family>.<arch>.cubin */
} PlanModule;

typedef struct {
    const KernelDecl *decl;
    int module;             /* index into Plan.modules */
    LaunchDims dims;        /* the launch; for a kernel with a size parameter, at size 1 (the rule is per call) */
} PlanKernel;

typedef struct Plan {
    const Config *cfg;
    char build_dir[256];    /* build/<name> */
    char arch[16];          /* sm_XX the CUBINs are for */
    int n_modules;
    PlanModule modules[PLAN_MAX_MODULES];
    int n_kernels;          /* every declared kernel, indexed by its id (K_* of kernel_ids.h) */
    PlanKernel kernels[PLAN_MAX_KERNELS];
    PlanMatmul matmuls[MM_COUNT];
    PlanMemory memory;
} Plan;

/* Builds the plan for cfg, for arch (e.g. "sm_90"). Tunables come from the declarations and the config's
   tune table; a value outside its declared constraints is an error naming the key and the allowed values. */
int  plan_make(Plan *plan, const Config *cfg, const char *arch, Err *err);
/* Gives module its tunable values (declaration order), marking changed ones with origin (when not NULL), and
   recomputes its derived constants and launches. A combination the family's check or the launch limits refuse is
   an error, and the module stays as it was. */
int  plan_set_tunables(Plan *plan, int module, const int *values, const char *origin, Err *err);
/* Writes build/<name>/plan.txt. */
int  plan_write(const Plan *plan, Err *err);
/* The launch of kernel id for a call whose size parameter is size. */
LaunchDims plan_launch_dims(const Plan *plan, int id, long long size);
#endif
