/* arena: one allocation for the whole step (see arena.h). */
#include "runtime/cuda/arena.h"
#include <string.h>

static double gib(size_t b) { return b / (1024.0 * 1024.0 * 1024.0); }

int arena_alloc(Arena *a, const Plan *plan, const CudaDevice *dev, Err *err) {
    memset(a, 0, sizeof *a);
    const PlanMemory *mem = &plan->memory;
    const char *hint = plan->step.master_weights ? ", or train.master_weights=false" : "";
    size_t need = mem->arena_bytes, free_b = 0, total_b = 0;
    size_t state = mem->category_bytes[MEM_PARAMS] + mem->category_bytes[MEM_GRADS] + mem->category_bytes[MEM_OPTIMIZER];
    cu.cuMemGetInfo(&free_b, &total_b);
    if (need > free_b)
        return err_set(err, "out of GPU memory: the plan \"%s\" for %s needs %.2f GiB (parameters, gradients and AdamW state "
                       "%.2f GiB, activations and scratch %.2f GiB), but GPU %d (%s) has %.2f GiB free of %.2f GiB; lower "
                       "train.batch_size, or set train.recompute=2 (recompute GELU and LayerNorm)%s",
                       plan->name, plan->config_name, gib(need), gib(state), gib(need - state), dev->ordinal, dev->name, gib(free_b),
                       gib(total_b), hint);
    CUresult r = cu.cuMemAlloc(&a->base, need);
    if (r != CUDA_SUCCESS) {
        char eb[256];
        a->base = 0;
        return err_set(err, "out of GPU memory: allocating %.2f GiB for %s failed (%s); lower train.batch_size or set "
                       "train.recompute=2%s", gib(need), plan->config_name, cuda_err_string(r, eb, sizeof eb), hint);
    }
    a->bytes = need;
    for (int i = 0; i < BUF_COUNT; i++)
        a->buf[i] = mem->buffers[i].bytes ? a->base + mem->buffers[i].offset : 0;
    if (cuda_check(cu.cuMemsetD8Async(a->base, 0, need, dev->compute), "clearing GPU memory", err) ||
        cuda_device_sync(dev, "clearing GPU memory", err)) {
        arena_free(a);
        return -1;
    }
    return 0;
}

void arena_free(Arena *a) {
    if (a->base) cu.cuMemFree(a->base);
    memset(a, 0, sizeof *a);
}
