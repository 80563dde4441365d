#include "runtime/cuda/cuda_kernels.h"
#include "common/files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kernels_load(Kernels *ks, const Plan *plan, const CudaDevice *dev, Err *err) {
    memset(ks, 0, sizeof *ks);
    ks->plan = plan;
    const char *s = getenv("GPT2GEN_SYNC");
    ks->sync_each = s && *s && strcmp(s, "0");
    char have[16];
    snprintf(have, sizeof have, "sm_%d%d", dev->cc_major, dev->cc_minor);
    if (strcmp(have, plan->arch))
        return err_set(err, "arch mismatch: the kernels in %s were built for %s, but GPU 0 (%s) is %s: rebuild with --arch %s",
                       plan->build_dir, plan->arch, dev->name, have, have);
    char eb[256];
    for (int i = 0; i < plan->n_modules; i++) {
        const PlanModule *m = &plan->modules[i];
        size_t len;
        char *img = read_file(m->cubin_path, &len, err);
        if (!img) {
            char why[sizeof err->msg];   /* err_set must not read the buffer it writes */
            snprintf(why, sizeof why, "%s", err->msg);
            kernels_unload(ks);
            return err_set(err, "%s (run `gpt2gen build` first)", why);
        }
        CUresult r = cu.cuModuleLoadData(&ks->modules[i], img);
        free(img);
        if (r != CUDA_SUCCESS) {
            kernels_unload(ks);
            if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE)
                return err_set(err, "%s: not loadable on GPU 0 (%s, %s): %s; rebuild with --arch %s", m->cubin_path,
                               dev->name, have, cuda_err_string(r, eb, sizeof eb), have);
            return err_set(err, "%s: cuModuleLoadData: %s", m->cubin_path, cuda_err_string(r, eb, sizeof eb));
        }
        ks->n_modules = i + 1;
        for (int k = 0; k < m->n_kernels; k++) {
            Kernel *kk = &ks->kernels[ks->n_kernels];
            kk->pk = &m->kernels[k];
            r = cu.cuModuleGetFunction(&kk->fn, ks->modules[i], m->kernels[k].name);
            if (r != CUDA_SUCCESS) {
                kernels_unload(ks);
                return err_set(err, "%s: no kernel %s: %s", m->cubin_path, m->kernels[k].name, cuda_err_string(r, eb, sizeof eb));
            }
            ks->n_kernels++;
        }
    }
    return 0;
}

void kernels_unload(Kernels *ks) {
    for (int i = 0; i < ks->n_modules; i++)
        if (ks->modules[i]) cu.cuModuleUnload(ks->modules[i]);
    ks->n_modules = 0;
    ks->n_kernels = 0;
}

const Kernel *kernels_get(const Kernels *ks, const char *name, Err *err) {
    for (int i = 0; i < ks->n_kernels; i++)
        if (!strcmp(ks->kernels[i].pk->name, name)) return &ks->kernels[i];
    err_set(err, "the plan in %s has no kernel %s (rebuild with this gpt2gen)", ks->plan->build_dir, name);
    return NULL;
}

int kernels_launch(const Kernels *ks, const Kernel *k, unsigned gx, unsigned gy, void **args, Err *err) {
    const PlanKernel *p = k->pk;
    unsigned g0 = gx ? gx : p->grid[0], g1 = gy ? gy : p->grid[1];
    char eb[256];
    CUresult r = cu.cuLaunchKernel(k->fn, g0, g1, p->grid[2], p->block[0], p->block[1], p->block[2], p->smem, NULL, args, NULL);
    if (r != CUDA_SUCCESS)
        return err_set(err, "launching kernel %s (grid %u,%u,%u block %u): %s", p->name, g0, g1, p->grid[2], p->block[0],
                       cuda_err_string(r, eb, sizeof eb));
    if (ks->sync_each && (r = cu.cuCtxSynchronize()) != CUDA_SUCCESS)
        return err_set(err, "kernel %s failed: %s", p->name, cuda_err_string(r, eb, sizeof eb));
    return 0;
}
