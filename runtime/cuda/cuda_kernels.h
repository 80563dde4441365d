/* cuda_kernels: the plan's CUBINs loaded as modules, and launches by kernel name with the plan's geometry.
   A launch error names the kernel; with sync_each (GPT2GEN_SYNC=1, and in tests) every launch is followed by
   a synchronize, so that a fault is reported against the kernel that caused it. */
#ifndef GPT2GEN_CUDA_KERNELS_H
#define GPT2GEN_CUDA_KERNELS_H
#include "runtime/cuda/cuda_api.h"
#include "gen/plan.h"

typedef struct {
    const PlanKernel *pk;
    CUfunction fn;
} Kernel;

typedef struct {
    const Plan *plan;
    int n_modules;
    CUmodule modules[PLAN_MAX_MODULES];
    int n_kernels;
    Kernel kernels[PLAN_MAX_MODULES * PLAN_MAX_KERNELS];
    int sync_each;
} Kernels;

/* Checks the arch, loads every module of the plan and resolves every kernel. */
int  kernels_load(Kernels *ks, const Plan *plan, const CudaDevice *dev, Err *err);
void kernels_unload(Kernels *ks);
/* NULL + err when the plan has no such kernel */
const Kernel *kernels_get(const Kernels *ks, const char *name, Err *err);
/* Launches with the plan's geometry, except where gx/gy are > 0 (sizes that depend on the call). */
int  kernels_launch(const Kernels *ks, const Kernel *k, unsigned gx, unsigned gy, void **args, Err *err);
#endif
