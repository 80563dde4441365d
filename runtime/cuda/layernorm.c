/* layernorm: LayerNorm on the GPU (templates/layernorm.cu); the backward reduces its per-block partials of
   dweight and dbias in a second kernel, in a fixed order. */
#include "runtime/cuda/ops.h"

int op_layernorm(Cuda *c, dptr out, dptr mean, dptr rstd, dptr inp, dptr w, dptr b, Err *err) {
    return launch_layernorm_forward(&c->ks, c->s, out, mean, rstd, inp, w, b, err);
}

int op_residual_layernorm(Cuda *c, dptr res, dptr out, dptr mean, dptr rstd, dptr x1, dptr x2, dptr w, dptr b, Err *err) {
    return launch_fused_residual_layernorm_forward(&c->ks, c->s, res, out, mean, rstd, x1, x2, w, b, err);
}

int op_layernorm_backward(Cuda *c, dptr dinp, dptr dw, dptr db, dptr dout, dptr inp, dptr w, dptr mean, dptr rstd,
                          dptr out, dptr b, Err *err) {
    dptr scratch = buf(c, BUF_LN_SCRATCH, 0);
    return launch_layernorm_backward(&c->ks, c->s, dinp, scratch, out, dout, inp, w, b, mean, rstd, err) ||
           launch_layernorm_backward_reduce(&c->ks, c->s, dw, db, scratch, err) ? -1 : 0;
}
