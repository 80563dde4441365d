/* linear: the linear layers on the GPU: cuBLASLt matmuls (the plan's entries) with their bias and GELU
   epilogues (a decode step's: decode_linear), the bias gradients (templates/bias.cu) and the elementwise GELU (templates/gelu.cu). */
#include "runtime/cuda/ops.h"

/* A decode step of few rows goes through templates/decode.cu's decode_linear where the plan says so (Plan.
   decode_linear: it reads each weight once, and needs no pre-activation, as no backward follows); every other step
   through the plan's cuBLASLt matmul. */
int op_linear(Cuda *c, int id, dptr out, dptr inp, dptr W, dptr bias, dptr aux, Err *err) {
    const PlanMatmul *m = &c->plan->matmuls[id];
    if (c->plan->decode_linear)
        return launch_decode_linear(&c->ks, c->s, out, inp, W, bias, m->m, m->k, m->epilogue == EPI_GELU_AUX, err);
    return matmul_run(&c->mm, id, c->s, out, W, inp, bias, aux, 1.0f, err);
}

int op_bias_backward(Cuda *c, dptr db, dptr dout, int OC, Err *err) {
    dptr scratch = c->bias_scratch;
    return launch_bias_backward_partial(&c->ks, c->s, scratch, dout, OC, err) ||
           launch_bias_backward_reduce(&c->ks, c->s, db, scratch, OC, err) ? -1 : 0;
}

int op_linear_backward_dinp(Cuda *c, int dinp_id, dptr dinp, dptr dout, dptr W, float alpha, dptr pre, Err *err) {
    return matmul_run(&c->mm, dinp_id, c->s, dinp, W, dout, 0, pre, alpha, err);
}

int op_linear_backward_dw(Cuda *c, int dw_id, dptr dW, dptr dout, dptr inp, float alpha, Err *err) {
    return matmul_run(&c->mm, dw_id, c->s, dW, inp, dout, 0, 0, alpha, err);
}

int op_linear_backward(Cuda *c, int dinp_id, int dw_id, dptr dinp, dptr dW, dptr dout, dptr inp, dptr W, float alpha,
                       dptr pre, Err *err) {
    return op_linear_backward_dinp(c, dinp_id, dinp, dout, W, alpha, pre, err) ||
           op_linear_backward_dw(c, dw_id, dW, dout, inp, alpha, err) ? -1 : 0;
}

int op_gelu_backward_bias(Cuda *c, dptr dinout, dptr pre, dptr db, Err *err) {
    int OC = 4 * c->C;
    dptr scratch = c->bias_scratch;
    return launch_gelu_backward_bias_partial(&c->ks, c->s, scratch, dinout, pre, OC, err) ||
           launch_bias_backward_reduce(&c->ks, c->s, db, scratch, OC, err) ? -1 : 0;
}

int op_fcproj_dgelu_backward(Cuda *c, dptr dpre, dptr dout, dptr W, dptr pre, Err *err) {
    dptr wt = buf(c, BUF_FCPROJ_WT, 0);
    return launch_transpose_fcproj(&c->ks, c->s, wt, W, err) ||
           launch_fcproj_dgelu_backward(&c->ks, c->s, dpre, buf(c, BUF_FC_PARTIALS, 0), dout, wt, pre, err) ? -1 : 0;
}

int op_fc_bias_reduce(Cuda *c, dptr db, Err *err) {
    return launch_fc_bias_reduce(&c->ks, c->s, db, buf(c, BUF_FC_PARTIALS, 0), err);
}

int op_gelu_forward(Cuda *c, dptr out, dptr inp, Err *err) {
    return launch_gelu_forward(&c->ks, c->s, out, inp, (long long)c->plan->step.B * c->plan->step.T * 4 * c->C, err);
}
