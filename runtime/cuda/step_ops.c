/* step_ops: one op of the plan's schedule (gen/schedule.h) on the GPU, by its kind, through the op families of
   ops.h, on the stream c->s; and the backward's side stream (step.c says how it is used). */
#include "runtime/cuda/ops.h"

/* the memory of r for block layer l: a buffer of the arena (the key/value cache: the decode backend's, which a
   prefill fills), or a parameter tensor in the parameters or the gradients */
static dptr ref(const Cuda *c, const SchedRef *r, int l) {
    int at = schedule_layer(r, l, c->L);
    switch (r->space) {
    case REF_BUF:
        if (r->id == BUF_KCACHE) return c->kcache + at * c->cache_layer_bytes;
        if (r->id == BUF_VCACHE) return c->vcache + at * c->cache_layer_bytes;
        return buf(c, r->id, at);
    case REF_PARAM: return tensor_at(c, BUF_PARAMS, r->id, at);
    case REF_GRAD: return tensor_at(c, BUF_GRADS, r->id, at);
    default: return 0;
    }
}

void cu_use_stream(Cuda *c, int side) {
    c->s = side ? c->side : c->dev.compute;
    c->mm.workspace = buf(c, side ? BUF_CUBLASLT_WORKSPACE_SIDE : BUF_CUBLASLT_WORKSPACE, 0);
    c->bias_scratch = buf(c, side ? BUF_BIAS_SCRATCH_SIDE : BUF_BIAS_SCRATCH, 0);
}
static int side_begin(Cuda *c, Err *err) {
    if (!c->side) return 0;
    if (cuda_check(cu.cuEventRecord(c->ev_fork, c->dev.compute), "recording the side stream's fork", err) ||
        cuda_check(cu.cuStreamWaitEvent(c->side, c->ev_fork, 0), "the side stream's fork", err))
        return -1;
    cu_use_stream(c, 1);
    return 0;
}
static int side_end(Cuda *c, SideMark mark, Err *err) {
    if (!c->side) return 0;
    cu_use_stream(c, 0);
    c->marked[mark] = 1;
    return cuda_check(cu.cuEventRecord(c->ev_mark[mark], c->side), "recording a side stream mark", err);
}
static int wait_side(Cuda *c, SideMark mark, Err *err) {
    if (!c->side || !c->marked[mark]) return 0;
    return cuda_check(cu.cuStreamWaitEvent(c->dev.compute, c->ev_mark[mark], 0), "waiting for the side stream", err);
}

/* OP_KERNEL: the kernel as its declaration says, as its generated launcher (kernel_launch.h) would: each pointer
   parameter from the next argument, the scalar one from n, and the grid by the size parameter */
static int launch_declared(Cuda *c, const SchedOp *op, const dptr *a, Err *err) {
    const KernelDecl *k = op->kernel;
    void *args[KERNEL_MAX_PARAMS];
    dptr ptr[KERNEL_MAX_PARAMS];
    long long n = op->n;
    int n32 = (int)op->n, used = 0;
    for (int i = 0; i < KERNEL_MAX_PARAMS && k->params[i].name; i++) {
        KernelParamType t = k->params[i].type;
        if (t == KP_INT) args[i] = &n32;
        else if (t == KP_I64) args[i] = &n;
        else if (t == KP_FLOAT || t == KP_TMAP || used == SCHED_MAX_ARGS)
            return err_set(err, "%s: kernel %s's parameter %s cannot come from the schedule", op->name, k->name,
                           k->params[i].name);
        else { ptr[i] = a[used++]; args[i] = &ptr[i]; }
    }
    return kernels_launch(&c->ks, op->kernel_id, c->s, k->size_param >= 0 ? n : 0, args, err);
}

/* the ops of the forward and of the embeddings' backward */
static int forward_op(Cuda *c, const SchedOp *op, const dptr *a, Err *err) {
    const char *name = op->name;
    AttExpand gqa;
    int rc;
    switch (op->kind) {
    case OP_ENCODER: OP(name, op_encoder_forward(c, err)); return 0;
    case OP_DECODE_EMBED:   /* out, tokens, wte, wpe (none with RoPE: zeros), pos */
        OP(name, launch_decode_embed(&c->ks, c->s, a[0], a[1], a[2], a[3] ? a[3] : cu_wpe(c), a[4], err));
        return 0;
    case OP_LAYERNORM: OP(name, op_layernorm(c, a[0], a[1], a[2], a[3], a[4], a[5], err)); return 0;
    case OP_RESIDUAL_LAYERNORM:
        OP(name, op_residual_layernorm(c, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], err));
        return 0;
    case OP_MATMUL: OP(name, op_linear(c, op->mm, a[0], a[1], a[2], a[3], a[4], err)); return 0;
    case OP_FC_GELU: OP(name, fc_gemm_forward(&c->ks, c->s, a[0], a[1], a[2], a[3], a[4], err)); return 0;
    case OP_KERNEL: OP(name, launch_declared(c, op, a, err)); return 0;
    /* the cache's kernels and our attention template read qkv's NKV key/value heads as they are (templates/decode.cu,
       attention.cu); cuDNN's attention, with grouped-query attention, on qkv expanded to every query head */
    case OP_KV_APPEND: OP(name, launch_kv_append(&c->ks, c->s, a[0], a[1], a[2], a[3], err)); return 0;
    case OP_ATTENTION:
        gqa = op_attention_expand(c);
        OP(name, attention_forward(&c->ks, c->cudnn, c->cudnn_workspace, c->s, a[0], a[1], a[2], &gqa, err));
        return 0;
    case OP_DECODE_ATTENTION:   /* out, kcache, vcache, qkv, pos, partial, QK-norm's weights- */
        OP(name, launch_decode_attention(&c->ks, c->s, a[0], a[1], a[2], a[5], a[3], a[4], a[6], a[7], err));
        return 0;
    case OP_LN_MATMUL:   /* out, inp, lnw, lnb, W, bias, gate, gate bias; the MLP's activation on fc (act 1), the
                            logit soft-cap on a capped model's classifier (act 2); a greedy step's classifier folds
                            each row's logits into its key (Cuda.decode_best) */
        OP(name, launch_decode_ln_linear(&c->ks, c->s, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                                         c->plan->matmuls[op->mm].m, op->mm == MM_FC ? 1 :
                                         op->mm == MM_CLASSIFIER && c->plan->model.logit_softcap > 0 ? 2 : 0,
                                         op->mm == MM_CLASSIFIER ? c->decode_best : 0, err));
        return 0;
    case OP_MATMUL_RESIDUAL:   /* out, inp, W, bias, res */
        OP(name, launch_decode_linear_residual(&c->ks, c->s, a[0], a[1], a[2], a[3], a[4], c->plan->matmuls[op->mm].m,
                                               c->plan->matmuls[op->mm].k, err));
        return 0;
    case OP_ENCODER_BACKWARD: OP(name, op_encoder_backward(c, err)); return 0;
    default:
        if ((rc = op_arch(c, op, a, err)) <= 0) return rc;   /* GPT-2's relatives' */
        return err_set(err, "the GPU has no op of kind %d (%s)", op->kind, schedule_kind_name(op->kind));
    }
}

/* the ops of the layers' backward */
static int backward_op(Cuda *c, const SchedOp *op, const dptr *a, Err *err) {
    const char *name = op->name;
    AttExpand gqa;
    switch (op->kind) {
    case OP_ZERO: return cuda_check(cu.cuMemsetD8Async(a[0], 0, (size_t)op->n * c->xs, c->s), name, err);
    case OP_LAYERNORM_BACKWARD:
        OP(name, op_layernorm_backward(c, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], err));
        return 0;
    case OP_MATMUL_DINP: OP(name, op_linear_backward_dinp(c, op->mm, a[0], a[1], a[2], 1.0f, a[3], err)); return 0;
    case OP_MATMUL_DW: OP(name, op_linear_backward_dw(c, op->mm, a[0], a[1], a[2], 1.0f, err)); return 0;
    case OP_BIAS_BACKWARD: OP(name, op_bias_backward(c, a[0], a[1], (int)op->n, err)); return 0;
    case OP_GELU_BACKWARD_BIAS: OP(name, op_gelu_backward_bias(c, a[0], a[1], a[2], err)); return 0;
    case OP_FCPROJ_DGELU: OP(name, op_fcproj_dgelu_backward(c, a[0], a[1], a[2], a[3], err)); return 0;
    case OP_FC_BIAS_REDUCE: OP(name, op_fc_bias_reduce(c, a[0], err)); return 0;
    case OP_ATTENTION_BACKWARD:   /* dqkv, qkv, out, dout, stats, ddot */
        gqa = op_attention_expand(c);
        OP(name, attention_backward(&c->ks, c->cudnn, c->cudnn_workspace, c->s, a[0], a[1], a[2], a[3], a[4], a[5], &gqa, err));
        return 0;
    case OP_FORK: return side_begin(c, err);
    case OP_MARK: return side_end(c, op->mark, err);
    case OP_WAIT: return wait_side(c, op->mark, err);
    default: return forward_op(c, op, a, err);
    }
}

int cu_run_op(void *ctx, const SchedOp *op, int l, Err *err) {
    CuRun *run = ctx;
    Cuda *c = run->c;
    if (op->kind == OP_GRAD_READY) {   /* part l: the block's layer, or (-1) the rest */
        const BackendRun *r = run->run;
        if (!r || !r->grad_ready) return 0;
        if (op->mark != SCHED_NO_MARK && wait_side(c, op->mark, err)) return -1;
        return r->grad_ready(r->grad_ready_ctx, l, err);
    }
    dptr a[SCHED_MAX_ARGS];
    for (int i = 0; i < SCHED_MAX_ARGS; i++) a[i] = ref(c, &op->arg[i], l);
    return backward_op(c, op, a, err);
}

int cu_run_phase(Cuda *c, const BackendRun *run, const SchedPhase *ph, Err *err) {
    return schedule_run_phase(ph, c->L, cu_run_op, &(CuRun){c, run}, err);
}

int cu_run_list(Cuda *c, const BackendRun *run, const SchedList *list, Err *err) {
    return schedule_run_list(list, -1, c->L, cu_run_op, &(CuRun){c, run}, err);
}
