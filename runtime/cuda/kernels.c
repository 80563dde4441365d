/* kernels: loading the plan's modules and launching by id (see kernels.h). */
#include "runtime/cuda/kernels.h"
#include "common/files.h"
#include "gen/emit.h"
#include "gen/nvrtc.h"
#include "kernel_ids.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(K_COUNT <= PLAN_MAX_KERNELS, "more kernels declared than a plan holds");

/* Every module's CUBIN by content: its source made again from the plan (gen/emit.h) and compiled, which the kernel
   cache keyed by that content answers without NVRTC after a build (gen/nvrtc.h). Nothing is read by file name, so
   a build of the same name swapping its folder in meanwhile (gen/build.c) cannot mix two builds' kernels. */
static int compile_images(const Plan *plan, const Env *env, CompileJob *jobs, Err *err) {
    int n = plan->n_families, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const PlanFamily *m = &plan->families[i];
        char *src = emit_family(plan, m, env_or_defaults(env)->templates, err);
        if (!src) rc = -1;
        jobs[i] = (CompileJob){.name = m->decl->family, .source = src, .source_path = m->source_path, .arch = plan->arch};
    }
    if (rc == 0) rc = nvrtc_compile_all(jobs, n, env, (int)sysconf(_SC_NPROCESSORS_ONLN), err);
    for (int i = 0; i < n; i++) free((char *)jobs[i].source);
    return rc;
}

static int load_module(Kernels *ks, int i, const char *img, const CudaDevice *dev, const char *have, Err *err) {
    const PlanFamily *m = &ks->plan->families[i];
    char eb[256];
    CUresult r = cu.cuModuleLoadData(&ks->modules[i], img);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE)
        return err_set(err, "%s: not loadable on GPU %d (%s, %s): %s; rebuild with --arch %s", m->cubin_path,
                       dev->ordinal, dev->name, have, cuda_err_string(r, eb, sizeof eb), have);
    if (r != CUDA_SUCCESS) return err_set(err, "%s: cuModuleLoadData: %s", m->cubin_path, cuda_err_string(r, eb, sizeof eb));
    ks->n_families = i + 1;
    return 0;
}

int kernels_load(Kernels *ks, const Plan *plan, const CudaDevice *dev, const Env *env, Err *err) {
    CompileJob jobs[PLAN_MAX_FAMILIES];
    char *img[PLAN_MAX_FAMILIES] = {0};
    memset(jobs, 0, sizeof jobs);
    int rc = compile_images(plan, env, jobs, err);
    for (int i = 0; i < plan->n_families; i++) img[i] = jobs[i].cubin;
    if (rc == 0) rc = kernels_load_images(ks, plan, dev, img, err);
    for (int i = 0; i < plan->n_families; i++) free(jobs[i].cubin);
    return rc;
}

int kernels_load_images(Kernels *ks, const Plan *plan, const CudaDevice *dev, char *const *img, Err *err) {
    memset(ks, 0, sizeof *ks);
    ks->plan = plan;
    if (plan->n_kernels != K_COUNT)
        return err_set(err, "the plan in %s has %d kernels, this gpt2gen declares %d: rebuild", plan->build_dir,
                       plan->n_kernels, K_COUNT);
    char have[16];
    snprintf(have, sizeof have, "sm_%d%d", dev->cc_major, dev->cc_minor);
    if (strcmp(have, plan->arch))
        return err_set(err, "arch mismatch: the kernels in %s were built for %s, but GPU %d (%s) is %s: rebuild with --arch %s",
                       plan->build_dir, plan->arch, dev->ordinal, dev->name, have, have);
    int rc = 0;
    for (int i = 0; i < plan->n_families && rc == 0; i++) rc = load_module(ks, i, img[i], dev, have, err);
    if (rc) { kernels_unload(ks); return -1; }
    char eb[256];
    for (int id = 0; id < plan->n_kernels; id++) {
        const PlanKernel *k = &plan->kernels[id];
        if (k->family < 0) continue;   /* not this plan's: launching it is an error */
        CUresult r = cu.cuModuleGetFunction(&ks->fn[id], ks->modules[k->family], k->decl->name);
        if (r != CUDA_SUCCESS) {
            kernels_unload(ks);
            return err_set(err, "%s: no kernel %s: %s", plan->families[k->family].cubin_path, k->decl->name,
                           cuda_err_string(r, eb, sizeof eb));
        }
        /* more than 48 KiB of dynamic shared memory must be asked for */
        if (k->dims.smem > 48 * 1024 &&
            (r = cu.cuFuncSetAttribute(ks->fn[id], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)k->dims.smem)) != CUDA_SUCCESS) {
            kernels_unload(ks);
            return err_set(err, "kernel %s: %u bytes of shared memory refused: %s", k->decl->name, k->dims.smem,
                           cuda_err_string(r, eb, sizeof eb));
        }
    }
    return 0;
}

void kernels_unload(Kernels *ks) {
    for (int i = 0; i < ks->n_families; i++)
        if (ks->modules[i]) cu.cuModuleUnload(ks->modules[i]);
    ks->n_families = 0;
}

/* The launch as the kernel's family says (FamilyDecl.launch): programmatic dependent launch where the plan overlaps
   (the kernel waits for the grid before it itself), cooperative (every block resident at once, or the launch fails
   with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), else plain. */
static CUresult launch_as_declared(const Kernels *ks, int id, const LaunchDims *d, CUstream stream, void **args) {
    int how = ks->plan->families[ks->plan->kernels[id].family].decl->launch;
    if (how == LAUNCH_PLAIN || (how == LAUNCH_OVERLAP && !ks->plan->overlap))
        return cu.cuLaunchKernel(ks->fn[id], d->grid[0], d->grid[1], d->grid[2], d->block, 1, 1, d->smem, stream, args, NULL);
    CUlaunchAttribute at = {.id = how == LAUNCH_OVERLAP ? CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                                                        : CU_LAUNCH_ATTRIBUTE_COOPERATIVE};
    if (how == LAUNCH_OVERLAP) at.value.programmaticStreamSerializationAllowed = 1;
    else at.value.cooperative = 1;
    CUlaunchConfig lc = {.gridDimX = d->grid[0], .gridDimY = d->grid[1], .gridDimZ = d->grid[2], .blockDimX = d->block,
                         .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = d->smem, .hStream = stream, .attrs = &at,
                         .numAttrs = 1};
    return cu.cuLaunchKernelEx(&lc, ks->fn[id], args, NULL);
}

int kernels_launch(Kernels *ks, int id, CUstream stream, long long size, void **args, Err *err) {
    const char *name = ks->plan->kernels[id].decl->name;
    if (ks->plan->kernels[id].family < 0)
        return err_set(err, "kernel %s is not in plan \"%s\": its family is not one its step calls (gen/kernels.c, steps)",
                       name, ks->plan->name);
    LaunchDims d = plan_launch_dims(ks->plan, id, size);
    const char *bad = kernel_dims_valid(&d);
    if (bad) return err_set(err, "kernel %s cannot be launched for size %lld: %s", name, size, bad);
    char eb[256];
    CUresult r = launch_as_declared(ks, id, &d, stream, args);
    if (r != CUDA_SUCCESS)
        return err_set(err, "launching kernel %s (grid %u,%u,%u block %u): %s", name, d.grid[0], d.grid[1], d.grid[2],
                       d.block, cuda_err_string(r, eb, sizeof eb));
    ks->launches[id]++;
    if (ks->sync_each && (r = cu.cuStreamSynchronize(stream)) != CUDA_SUCCESS)
        return err_set(err, "kernel %s failed: %s", name, cuda_err_string(r, eb, sizeof eb));
    return 0;
}
