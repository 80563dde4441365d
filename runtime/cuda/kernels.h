/* kernels: the plan's CUBINs loaded as modules on one device, and launches by kernel id with the geometry
   the declaration's rule gives (gen/kernels.c). The runtime calls the typed launchers of the generated
   build/gen/kernel_launch.h, which call kernels_launch. A launch error names the kernel; with sync_each
   (GPT2GEN_SYNC=1, and in the GPU tests) every launch is followed by a synchronize, so that a fault is
   reported against the kernel that caused it. */
#ifndef GPT2GEN_RUNTIME_KERNELS_H
#define GPT2GEN_RUNTIME_KERNELS_H
#include "runtime/cuda/device.h"
#include "gen/plan.h"
#include "common/env.h"

typedef struct {
    const Plan *plan;
    int n_families;
    CUmodule modules[PLAN_MAX_FAMILIES];
    CUfunction fn[PLAN_MAX_KERNELS];   /* by kernel id */
    int sync_each;
    int launches[PLAN_MAX_KERNELS];    /* launches per kernel id, for the tests' coverage check */
} Kernels;

/* Checks the arch, loads every module of the plan and resolves every kernel, on dev (current context). The CUBINs
   come by content: from the kernel cache the build filled (env's, NULL: the default one), else compiled here. */
int  kernels_load(Kernels *ks, const Plan *plan, const CudaDevice *dev, const Env *env, Err *err);
/* The same from CUBIN images in memory, one per module (`gpt2gen tune` loads its variants this way). */
int  kernels_load_images(Kernels *ks, const Plan *plan, const CudaDevice *dev, char *const *img, Err *err);
void kernels_unload(Kernels *ks);
/* Launches kernel id on stream with the geometry for size (the kernel's size parameter, else 0). */
int  kernels_launch(Kernels *ks, int id, CUstream stream, long long size, void **args, Err *err);
#endif
