/* arch: the ops of GPT-2's relatives on the GPU (docs/model.md, "Architectures"; gen/schedule.h says what each op
   computes): RMSNorm and QK-norm (templates/rmsnorm.cu), RoPE and grouped-query attention's expanded keys and values
   (templates/rope.cu), ReLU^2, SwiGLU and the decode step's soft-cap (templates/activation.cu), and SwiGLU's second fc
   dinp, which accumulates. The norms' backward partials go through BUF_LN_SCRATCH, on the compute stream as
   LayerNorm's do. */
#include "runtime/cuda/ops.h"

int op_rmsnorm_backward(Cuda *c, dptr dinp, dptr dw, dptr dout, dptr inp, dptr w, dptr rstd, Err *err) {
    dptr scratch = buf(c, BUF_LN_SCRATCH, 0);
    return launch_rmsnorm_backward(&c->ks, c->s, dinp, scratch, dout, inp, w, rstd, err) ||
           launch_rmsnorm_backward_reduce(&c->ks, c->s, dw, scratch, err) ? -1 : 0;
}

int op_qk_norm_backward(Cuda *c, dptr dinout, dptr inp, dptr qw, dptr kw, dptr rstd, dptr dqw, dptr dkw, dptr pos,
                        Err *err) {
    dptr scratch = buf(c, BUF_LN_SCRATCH, 0);
    return launch_qk_norm_backward(&c->ks, c->s, dinout, scratch, inp, qw, kw, rstd, pos, err) ||
           launch_qk_norm_backward_reduce(&c->ks, c->s, dqw, dkw, scratch, err) ? -1 : 0;
}

/* grouped-query attention's expanded qkv and its gradient where the plan runs it on cuDNN (Plan.kv_expand), else none */
AttExpand op_attention_expand(const Cuda *c) {
    if (!c->plan->kv_expand) return (AttExpand){0, 0};
    return (AttExpand){buf(c, BUF_QKV_X, 0), c->plan->step.kind == STEP_TRAIN ? buf(c, BUF_DQKV_X, 0) : 0};
}

/* the MLP's elements: B*T rows of F */
static long long ffn_elements(const Cuda *c) { return (long long)c->plan->step.B * c->plan->step.T * gpt2_ffn(&c->plan->model); }

int op_arch(Cuda *c, const SchedOp *op, const dptr *a, Err *err) {
    const char *name = op->name;
    switch (op->kind) {
    case OP_RMSNORM: OP(name, launch_rmsnorm_forward(&c->ks, c->s, a[0], a[1], a[2], a[3], err)); return 0;
    case OP_RESIDUAL_RMSNORM:
        OP(name, launch_fused_residual_rmsnorm_forward(&c->ks, c->s, a[0], a[1], a[2], a[3], a[4], a[5], err));
        return 0;
    case OP_RMSNORM_BACKWARD: OP(name, op_rmsnorm_backward(c, a[0], a[1], a[2], a[3], a[4], a[5], err)); return 0;
    case OP_QK_NORM: OP(name, launch_qk_norm_forward(&c->ks, c->s, a[0], a[1], a[2], a[3], a[4], a[5], err)); return 0;
    case OP_QK_NORM_BACKWARD:
        OP(name, op_qk_norm_backward(c, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], err));
        return 0;
    case OP_ROPE: OP(name, launch_rope_forward(&c->ks, c->s, a[0], a[1], err)); return 0;
    case OP_ROPE_BACKWARD: OP(name, launch_rope_backward(&c->ks, c->s, a[0], a[1], err)); return 0;
    case OP_RELU2: OP(name, launch_relu2_forward(&c->ks, c->s, a[0], a[1], ffn_elements(c), err)); return 0;
    case OP_RELU2_BACKWARD: OP(name, launch_relu2_backward(&c->ks, c->s, a[0], a[1], ffn_elements(c), err)); return 0;
    case OP_SWIGLU: OP(name, launch_swiglu_forward(&c->ks, c->s, a[0], a[1], a[2], ffn_elements(c), err)); return 0;
    case OP_SWIGLU_BACKWARD:
        OP(name, launch_swiglu_backward(&c->ks, c->s, a[0], a[1], a[2], a[3], ffn_elements(c), err));
        return 0;
    case OP_MATMUL_DINP_ACC: OP(name, matmul_run_acc(&c->mm, op->mm, c->s, a[0], a[2], a[1], 1.0f, err)); return 0;
    case OP_SOFTCAP: OP(name, launch_softcap_forward(&c->ks, c->s, a[0], op->n, err)); return 0;
    default: return 1;
    }
}
