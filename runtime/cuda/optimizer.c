/* optimizer: gradients to zero, the global gradient norm (templates/norm.cu) and the AdamW update of every
   parameter tensor (templates/adamw.cu), as Backend methods. */
#include "runtime/cuda/ops.h"
#include <math.h>

int cu_zero_grad(Backend *be, Err *err) {
    Cuda *c = cuda_of(be);
    return cuda_check(cu.cuMemsetD8Async(buf(c, BUF_GRADS, 0), 0, c->np * c->xs, c->s), "zeroing gradients", err);
}

int cu_grad_norm(Backend *be, float *norm, Err *err) {
    Cuda *c = cuda_of(be);
    dptr partials = buf(c, BUF_NORM_PARTIALS, 0);
    unsigned g = c->plan->kernels[K_GLOBAL_NORM_SQUARED].dims.grid[0];
    OP("grad norm", launch_global_norm_squared(&c->ks, c->s, partials, buf(c, BUF_GRADS, 0), (long long)c->np, err));
    if (cuda_check(cu.cuMemcpyDtoHAsync(c->h_partials, partials, g * 4, c->s), "gradient norm", err) ||
        cuda_device_sync(&c->dev, "gradient norm", err))
        return -1;
    double s = 0;
    for (unsigned i = 0; i < g; i++) s += c->h_partials[i];   /* in order: the same bits on every run */
    *norm = (float)sqrt(s);
    return 0;
}

int cu_update(Backend *be, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
              int step, Err *err) {
    Cuda *c = cuda_of(be);
    float bc1 = (float)(1.0 - pow(beta1, step)), bc2 = (float)(1.0 - pow(beta2, step));
    dptr master = buf(c, BUF_MASTER, 0);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t off = c->poff[i];
        float wd = gpt2_param_decays(i) ? weight_decay : 0.0f;
        OP("adamw", launch_adamw_update(&c->ks, c->s, buf(c, BUF_PARAMS, 0) + off * c->xs, master ? master + off * 4 : 0,
                                        buf(c, BUF_GRADS, 0) + off * c->xs, buf(c, BUF_ADAM_M, 0) + off * 4,
                                        buf(c, BUF_ADAM_V, 0) + off * 4, (long long)c->psz[i], lr, beta1, beta2, bc1, bc2,
                                        eps, wd, grad_scale, err));
    }
    return cuda_device_sync(&c->dev, "AdamW update", err);
}
