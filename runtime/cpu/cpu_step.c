/* cpu_step: the plan's schedule (gen/schedule.h) on the CPU: each op by its kind, through the fp32 reference ops
   of cpu_ops.c, on the backend's own fp32 arrays (cpu_internal.h: every layer's activations are kept, whatever
   the plan's recompute). Where the GPU fuses, the CPU does the same math in steps: a residual add then the
   LayerNorm; a matmul then the GELU; a matmul then the GELU backward. The GPU's streams are no-ops here. */
#include "runtime/cpu/cpu_internal.h"
#include <stdlib.h>
#include <string.h>

/* buffer id of layer l in the backend's arrays; NULL for what the CPU keeps elsewhere (the tokens and the position
   are host state: c->inputs, c->pos) or keeps no copy of (the GPU's scratch) */
static float *buffer(Backend *be, int id, int l) {
    Cpu *c = impl(be);
    Acts *a = &c->a;
    Grads *d = &c->d;
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, T = be->plan->step.T;
    size_t N = (size_t)B * T, nc = N * s->n_embd, att = (size_t)B * s->n_head * T * T;
    size_t nqkv = N * gpt2_qkv_width(s), nf = N * gpt2_ffn(s);
    size_t cache = (size_t)B * be->plan->step.cache_T * gpt2_kv_heads(s) * gpt2_head_size(s);   /* a layer's; as the decode plan's */
    Cpu *owner = c->cache_of ? impl(c->cache_of) : c;   /* a prefill fills its decode backend's cache */
    switch (id) {
    case BUF_ENCODED: return a->encoded;
    case BUF_LN1: return a->ln1 + l * nc;
    case BUF_LN1_MEAN: return a->ln1_mean + l * N;
    case BUF_LN1_RSTD: return a->ln1_rstd + l * N;
    case BUF_QKV: return a->qkv + l * nqkv;
    case BUF_QKV_PRE: return a->qkv_pre + l * nqkv;
    case BUF_QK_RSTD: return a->qk_rstd + l * N * (s->n_head + gpt2_kv_heads(s));
    case BUF_ATTY: return a->atty + l * nc;
    case BUF_ATT_STATS: return a->att + l * att;   /* the CPU's attention keeps the probabilities */
    case BUF_RESIDUAL2: return a->residual2 + l * nc;
    case BUF_LN2: return a->ln2 + l * nc;
    case BUF_LN2_MEAN: return a->ln2_mean + l * N;
    case BUF_LN2_RSTD: return a->ln2_rstd + l * N;
    case BUF_FCH: return a->fch + l * nf;
    case BUF_FCH_GELU: return a->fch_gelu + l * nf;
    case BUF_FCG: return a->fcg + l * nf;
    case BUF_DFCG: return d->dfcg;
    case BUF_RESIDUAL3: return a->residual3 + l * nc;
    case BUF_LNF: return a->lnf;
    case BUF_LNF_MEAN: return a->lnf_mean;
    case BUF_LNF_RSTD: return a->lnf_rstd;
    case BUF_LOGITS: return a->logits;
    case BUF_TMP: return a->tmp;
    case BUF_DRESIDUAL: return d->dres;
    case BUF_DLN: return d->dln;
    case BUF_DFCH: return d->dfch;
    case BUF_DATTY: return d->datty;
    case BUF_DQKV: return d->dqkv;
    case BUF_KCACHE: return owner->kcache + l * cache;
    case BUF_VCACHE: return owner->vcache + l * cache;
    default: return NULL;
    }
}

static float *ref(Backend *be, const SchedRef *r, int l) {
    int at = schedule_layer(r, l, be->plan->model.n_layer);
    if (r->space == REF_BUF) return buffer(be, r->id, at);
    if (r->space == REF_NONE) return NULL;
    float *t = (r->space == REF_PARAM ? impl(be)->p : impl(be)->g)[r->id];
    return gpt2_param_per_layer(r->id) ? t + (size_t)at * (impl(be)->sizes[r->id] / be->plan->model.n_layer) : t;
}

/* matmul mm's (and its backward's) input and output features */
static void mm_features(int mm, const GPT2Shape *s, int *in, int *out) {
    int C = s->n_embd, F = gpt2_ffn(s);
    switch (mm) {
    case MM_QKV: case MM_QKV_DINP: case MM_QKV_DW: *in = C; *out = gpt2_qkv_width(s); return;
    case MM_FC: case MM_FC_DINP: case MM_FC_DW: *in = C; *out = F; return;
    case MM_FCPROJ: case MM_FCPROJ_DINP: case MM_FCPROJ_DW: *in = F; *out = C; return;
    case MM_CLASSIFIER: case MM_CLASSIFIER_DINP: case MM_CLASSIFIER_DW: *in = C; *out = s->padded_vocab_size; return;
    default: *in = *out = C; return;   /* attproj */
    }
}

static void zero(float *p, size_t n) { memset(p, 0, n * sizeof(float)); }

/* dinp = (dout @ W) * GELU'(pre): the product into scratch first, as the GELU backward accumulates */
static void dinp_dgelu(Cpu *c, float *dinp, const float *dout, const float *W, const float *pre, int N, int IC, int OC) {
    zero(c->d.dfch_gelu, (size_t)N * IC);
    cpu_matmul_backward_dinp(c->d.dfch_gelu, dout, W, N, IC, OC);
    zero(dinp, (size_t)N * IC);
    cpu_gelu_backward(dinp, pre, c->d.dfch_gelu, (size_t)N * IC);
}

/* OP_LN_MATMUL: out = norm(inp) @ W^T + bias, the MLP's activation on fc, the logit soft-cap on a capped model's
   classifier (out, inp, lnw, lnb, W, bias, gate, gate bias: SwiGLU's up projection takes silu(inp @ gate^T + gate
   bias) too); a decode step's, of few rows */
static void ln_matmul(Backend *be, const SchedOp *op, float *const *a, int N) {
    const GPT2Shape *s = &be->plan->model;
    int IC, OC;
    mm_features(op->mm, s, &IC, &OC);
    size_t n = (size_t)N * OC;
    float *ln = xmalloc((size_t)N * IC * sizeof(float)), *stats = xmalloc(2 * (size_t)N * sizeof(float));
    if (s->norm == NORM_RMSNORM) cpu_rmsnorm_forward(ln, stats, a[1], a[2], N, IC, gpt2_norm_eps(s));
    else cpu_layernorm_forward_eps(ln, stats, stats + N, a[1], a[2], a[3], N, IC, gpt2_norm_eps(s));
    cpu_matmul_forward(a[0], ln, a[4], a[5], N, IC, OC);
    if (op->mm == MM_FC && s->mlp == MLP_SWIGLU) {
        float *g = xmalloc(n * sizeof(float));
        cpu_matmul_forward(g, ln, a[6], a[7], N, IC, OC);
        cpu_swiglu_forward(a[0], a[0], g, n);
        free(g);
    } else if (op->mm == MM_FC && s->mlp == MLP_RELU2) {
        cpu_relu2_forward(a[0], a[0], n);
    } else if (op->mm == MM_FC) {
        cpu_gelu_forward(a[0], a[0], n);
    } else if (op->mm == MM_CLASSIFIER && s->logit_softcap > 0) {
        cpu_softcap_forward(a[0], n, (float)s->logit_softcap);
    }
    free(ln);
    free(stats);
}

/* the ops of GPT-2's relatives (gen/schedule.h); 0 where op is none of them */
static int arch_op(Backend *be, const SchedOp *op, float *const *a) {
    Cpu *c = impl(be);
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, T = be->plan->step.T, C = s->n_embd, N = B * T;
    size_t nf = (size_t)N * gpt2_ffn(s);
    CpuHeads g = cpu_heads(s, B, T);
    float eps = gpt2_norm_eps(s);
    /* RoPE's positions: the cache's (host state) where the op names them, else 0..; in OP_ROPE's argument 1, the
       QK-norm ops' 5 and 7 (where they rotate: gpt2_qk_norm_rotates) */
    int pos_arg = op->kind == OP_QK_NORM ? 5 : op->kind == OP_QK_NORM_BACKWARD ? 7 : 1;
    int pos = op->arg[pos_arg].space == REF_BUF ? c->pos : 0, rotates = gpt2_qk_norm_rotates(s);
    double theta = gpt2_rope_theta(s);
    switch (op->kind) {
    case OP_RMSNORM: cpu_rmsnorm_forward(a[0], a[1], a[2], a[3], N, C, eps); return 1;
    case OP_RESIDUAL_RMSNORM:
        cpu_residual_forward(a[0], a[3], a[4], (size_t)N * C);
        cpu_rmsnorm_forward(a[1], a[2], a[0], a[5], N, C, eps);
        return 1;
    case OP_RMSNORM_BACKWARD: cpu_rmsnorm_backward(a[0], a[1], a[2], a[3], a[4], a[5], N, C); return 1;
    case OP_QK_NORM:
        cpu_qk_norm_forward(a[0], a[1], a[2], a[3], a[4], N, g, eps);
        if (rotates) cpu_rope(a[0], pos, g, theta, 1);
        return 1;
    case OP_QK_NORM_BACKWARD:
        if (rotates) cpu_rope(a[0], pos, g, theta, -1);
        cpu_qk_norm_backward(a[0], a[1], a[2], a[3], a[4], a[5], a[6], N, g);
        return 1;
    case OP_ROPE: cpu_rope(a[0], pos, g, theta, 1); return 1;
    case OP_ROPE_BACKWARD: cpu_rope(a[0], pos, g, theta, -1); return 1;
    case OP_RELU2: cpu_relu2_forward(a[0], a[1], nf); return 1;
    case OP_RELU2_BACKWARD: cpu_relu2_backward(a[0], a[1], nf); return 1;
    case OP_SWIGLU: cpu_swiglu_forward(a[0], a[1], a[2], nf); return 1;
    case OP_SWIGLU_BACKWARD: cpu_swiglu_backward(a[0], a[1], a[2], a[3], nf); return 1;
    case OP_SOFTCAP: cpu_softcap_forward(a[0], (size_t)op->n, (float)s->logit_softcap); return 1;
    default: return 0;
    }
}

static void forward_op(Backend *be, const SchedOp *op, float *const *a) {
    Cpu *c = impl(be);
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, T = be->plan->step.T, C = s->n_embd, N = B * T, IC, OC;
    CpuHeads g = cpu_heads(s, B, T);
    if (arch_op(be, op, a)) return;
    switch (op->kind) {
    case OP_ENCODER: cpu_encoder_forward(a[0], c->inputs, a[2], a[3], B, T, C); return;
    case OP_DECODE_EMBED:   /* the rows' tokens at the position c->pos */
        for (int b = 0; b < B; b++)
            for (int i = 0; i < C; i++)
                a[0][(size_t)b * C + i] = a[2][(size_t)c->inputs[b] * C + i] + (a[3] ? a[3][(size_t)c->pos * C + i] : 0.0f);
        return;
    case OP_LAYERNORM: cpu_layernorm_forward_eps(a[0], a[1], a[2], a[3], a[4], a[5], N, C, gpt2_norm_eps(s)); return;
    case OP_RESIDUAL_LAYERNORM:
        cpu_residual_forward(a[0], a[4], a[5], (size_t)N * C);
        cpu_layernorm_forward_eps(a[1], a[2], a[3], a[0], a[6], a[7], N, C, gpt2_norm_eps(s));
        return;
    case OP_MATMUL:   /* with aux: the pre-activation there, its GELU in out */
        mm_features(op->mm, s, &IC, &OC);
        cpu_matmul_forward(a[4] ? a[4] : a[0], a[1], a[2], a[3], N, IC, OC);
        if (a[4]) cpu_gelu_forward(a[0], a[4], (size_t)N * OC);
        return;
    case OP_FC_GELU:   /* the GELU, or a relative's ReLU^2 */
        cpu_matmul_forward(a[0], a[2], a[3], a[4], N, C, 4 * C);
        if (s->mlp == MLP_RELU2) cpu_relu2_forward(a[1], a[0], (size_t)N * 4 * C);
        else cpu_gelu_forward(a[1], a[0], (size_t)N * 4 * C);
        return;
    case OP_KERNEL: cpu_kernel_find(op->kernel->name)(a, op->n); return;   /* found: cpu_run_op */
    case OP_KV_APPEND: cpu_kv_append_gqa(a[0], a[1], a[2], c->pos, g, be->plan->step.cache_T); return;
    case OP_ATTENTION: cpu_attention_forward_gqa(a[0], c->a.preatt, a[1], a[2], g); return;
    case OP_DECODE_ATTENTION:   /* out, kcache, vcache, qkv, pos, partial, QK-norm's weights-: the rows' query and new
                                   key QK-normed and rotated (gen/schedule.c), their one position appended, then
                                   attended over */
        if (s->qk_norm) cpu_qk_norm_forward(a[3], NULL, a[3], a[6], a[7], N, g, gpt2_norm_eps(s));
        if (s->position == POS_ROPE) cpu_rope(a[3], c->pos, g, gpt2_rope_theta(s), 1);
        cpu_kv_append_gqa(a[1], a[2], a[3], c->pos, g, be->plan->step.cache_T);
        cpu_attention_cached_gqa(a[0], a[3], a[1], a[2], c->pos, g, be->plan->step.cache_T);
        return;
    case OP_LN_MATMUL: ln_matmul(be, op, a, N); return;
    case OP_MATMUL_RESIDUAL: {   /* out, inp, W, bias, res */
        mm_features(op->mm, s, &IC, &OC);
        float *y = xmalloc((size_t)N * OC * sizeof(float));
        cpu_matmul_forward(y, a[1], a[2], a[3], N, IC, OC);
        cpu_residual_forward(a[0], a[4], y, (size_t)N * OC);
        free(y);
        return;
    }
    default: return;   /* the GPU's streams */
    }
}

static void backward_op(Backend *be, const SchedOp *op, float *const *a) {
    Cpu *c = impl(be);
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, T = be->plan->step.T, C = s->n_embd, N = B * T, IC, OC;
    mm_features(op->mm, s, &IC, &OC);
    switch (op->kind) {
    case OP_ZERO: zero(a[0], (size_t)op->n); return;
    case OP_LAYERNORM_BACKWARD:   /* the output the GPU makes again at recompute=2 is kept here */
        cpu_layernorm_backward(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], N, C);
        return;
    case OP_MATMUL_DINP:
        if (a[3]) { dinp_dgelu(c, a[0], a[1], a[2], a[3], N, IC, OC); return; }
        zero(a[0], (size_t)N * IC);
        cpu_matmul_backward_dinp(a[0], a[1], a[2], N, IC, OC);
        return;
    case OP_MATMUL_DINP_ACC: cpu_matmul_backward_dinp(a[0], a[1], a[2], N, IC, OC); return;
    case OP_MATMUL_DW: cpu_matmul_backward_dw(a[0], a[1], a[2], N, IC, OC); return;
    case OP_BIAS_BACKWARD: cpu_bias_backward(a[0], a[1], N, (int)op->n); return;
    case OP_GELU_BACKWARD_BIAS:   /* dinout *= GELU'(pre), through scratch; db += its column sums */
        memcpy(c->d.dfch_gelu, a[0], (size_t)N * 4 * C * sizeof(float));
        zero(a[0], (size_t)N * 4 * C);
        cpu_gelu_backward(a[0], a[1], c->d.dfch_gelu, (size_t)N * 4 * C);
        cpu_bias_backward(a[2], a[0], N, 4 * C);
        return;
    case OP_FCPROJ_DGELU:   /* the GELU's, or a relative's ReLU^2's */
        if (s->mlp != MLP_RELU2) { dinp_dgelu(c, a[0], a[1], a[2], a[3], N, 4 * C, C); return; }
        zero(a[0], (size_t)N * 4 * C);
        cpu_matmul_backward_dinp(a[0], a[1], a[2], N, 4 * C, C);
        cpu_relu2_backward(a[0], a[3], (size_t)N * 4 * C);
        return;
    case OP_FC_BIAS_REDUCE: cpu_bias_backward(a[0], a[1], N, 4 * C); return;
    case OP_ATTENTION_BACKWARD:   /* dqkv, qkv, out, dout, stats (the probabilities) */
        zero(a[0], (size_t)N * gpt2_qkv_width(s));
        cpu_attention_backward_gqa(a[0], c->d.dpreatt, c->d.datt, a[3], a[1], a[4], cpu_heads(s, B, T));
        return;
    case OP_ENCODER_BACKWARD: cpu_encoder_backward(a[0], a[1], a[2], c->inputs, B, T, C); return;
    default: forward_op(be, op, a); return;
    }
}

int cpu_run_op(void *ctx, const SchedOp *op, int l, Err *err) {
    const CpuRun *run = ctx;
    Backend *be = run->be;
    if (op->kind >= OP_KINDS) return err_set(err, "cpu backend: no op of kind %d", op->kind);
    if (op->kind == OP_KERNEL && !cpu_kernel_find(op->kernel->name))
        return err_set(err, "cpu backend: %s: no CPU op for kernel %s (runtime/cpu/cpu_ops.c, cpu_kernels)", op->name,
                       op->kernel->name);
    if (op->kind == OP_GRAD_READY)   /* part l: the block's layer, or (-1) the rest */
        return run->run && run->run->grad_ready ? run->run->grad_ready(run->run->grad_ready_ctx, l, err) : 0;
    float *a[SCHED_MAX_ARGS];
    for (int i = 0; i < SCHED_MAX_ARGS; i++) a[i] = ref(be, &op->arg[i], l);
    backward_op(be, op, a);
    return 0;
}

int cpu_run_phase(Backend *be, const BackendRun *run, const SchedPhase *ph, Err *err) {
    return schedule_run_phase(ph, be->plan->model.n_layer, cpu_run_op, &(CpuRun){be, run}, err);
}

int cpu_run_list(Backend *be, const BackendRun *run, const SchedList *list, Err *err) {
    return schedule_run_list(list, -1, be->plan->model.n_layer, cpu_run_op, &(CpuRun){be, run}, err);
}
