/* optimizer: gradients to zero, their sum of squares for the global gradient norm (templates/grad_norm.cu) and the
   AdamW update of every parameter tensor (templates/adamw.cu), as Backend.run's phases (backend.h). */
#include "runtime/cuda/ops.h"
#include <math.h>

/* the whole buffer, padding included (several ranks: the collectives read the padding too) */
int cu_zero_grad(Backend *be, Err *err) {
    Cuda *c = cuda_of(be);
    return cuda_check(cu.cuMemsetD8Async(buf(c, BUF_GRADS, 0), 0, c->plan->memory.buffers[BUF_GRADS].bytes, c->s),
                      "zeroing gradients", err);
}

/* The sum of squares of gradients [offset, offset+n): the kernel's partials, added in order on the host (the same
   bits on every run). offset must keep the 16-byte alignment of the kernel's vector loads (ranks_shard's does). */
int cu_grad_sumsq(Backend *be, size_t offset, size_t n, double *sumsq, Err *err) {
    Cuda *c = cuda_of(be);
    dptr partials = buf(c, BUF_NORM_PARTIALS, 0);
    unsigned g = c->plan->kernels[K_GLOBAL_NORM_SQUARED].dims.grid[0];
    OP("grad norm", launch_global_norm_squared(&c->ks, c->s, partials, buf(c, BUF_GRADS, 0) + offset * c->xs, (long long)n, err));
    if (cuda_check(cu.cuMemcpyDtoHAsync(c->h_partials, partials, g * 4, c->s), "gradient norm", err) ||
        cuda_device_sync(&c->dev, "gradient norm", err))
        return -1;
    double s = 0;
    for (unsigned i = 0; i < g; i++) s += c->h_partials[i];
    *sumsq = s;
    return 0;
}

/* The parameters [opt_offset, opt_offset+opt_count) (all, or this rank's ZeRO-1 shard), one launch per tensor's
   part in that range: m, v and the master weights hold that range only. */
int cu_update(Backend *be, const BackendRun *r, Err *err) {
    Cuda *c = cuda_of(be);
    const BackendAdamW *h = &r->adamw;
    float bc1 = (float)(1.0 - pow(h->beta1, r->step)), bc2 = (float)(1.0 - pow(h->beta2, r->step));
    dptr master = buf(c, BUF_MASTER, 0);
    size_t lo = be->opt_offset, hi = be->opt_offset + be->opt_count;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t a = c->poff[i] > lo ? c->poff[i] : lo, e = c->poff[i] + c->psz[i] < hi ? c->poff[i] + c->psz[i] : hi;
        if (a >= e) continue;
        size_t o = a - lo;   /* the optimizer state's index */
        float wd = gpt2_param_decays(i) ? h->weight_decay : 0.0f;
        OP("adamw", launch_adamw_update(&c->ks, c->s, buf(c, BUF_PARAMS, 0) + a * c->xs, master ? master + o * 4 : 0,
                                        buf(c, BUF_GRADS, 0) + a * c->xs, buf(c, BUF_ADAM_M, 0) + o * 4,
                                        buf(c, BUF_ADAM_V, 0) + o * 4, (long long)(e - a), (long long)(a - c->poff[i]),
                                        h->lr, h->beta1, h->beta2, bc1, bc2, h->eps, wd, r->grad_scale, err));
    }
    return cuda_device_sync(&c->dev, "AdamW update", err);
}
