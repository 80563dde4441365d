/* schedule: GPT-2's block, written once (gen/schedule.h). The plan decides here what runs: the step kind's
   attention (a training step's or a forward's, with the prefill's cache append, or a decode step's against the
   cache), the GELU path (in the fc matmul's epilogue, our kernel beside it, or our fused matmuls), what
   recompute makes again in the backward, and the backward's second stream: each layer's weight-gradient
   matmuls, bias gradients and GELU recompute, which nothing in the input-gradient chain reads, go on a side
   stream between a fork and a mark; the compute stream waits for a mark before it overwrites what the side
   reads (dresidual, dfch, dqkv). At recompute=2 the LayerNorm outputs the side's dW matmuls read are made again
   by the LayerNorm backward, so their side piece follows it. */
#include "gen/schedule.h"
#include "gen/plan.h"
#include "kernel_ids.h"
#include <stdlib.h>

#define BUF(id, at) ((SchedRef){REF_BUF, (id), (at)})
#define PAR(id, at) ((SchedRef){REF_PARAM, (id), (at)})
#define GRD(id, at) ((SchedRef){REF_GRAD, (id), (at)})
#define NONE ((SchedRef){REF_NONE, 0, 0})
#define ARGS(...) (const SchedRef[]){__VA_ARGS__}, (int)(sizeof((const SchedRef[]){__VA_ARGS__}) / sizeof(SchedRef))

static SchedOp *add(SchedList *list, int kind, int when, const char *name, int mm, const SchedRef *args, int n) {
    if (list->n == SCHED_MAX_OPS || n > SCHED_MAX_ARGS) {   /* the block below is fixed: this is a bug, not input */
        fprintf(stderr, "gen/schedule.c: more than %d ops in a list, or %d arguments\n", SCHED_MAX_OPS, n);
        abort();
    }
    SchedOp *op = &list->ops[list->n++];
    *op = (SchedOp){(uint8_t)kind, (uint8_t)when, SCHED_NO_MARK, (int8_t)mm, -1, NULL, 0, name, {{0}}};
    for (int i = 0; i < n; i++) op->arg[i] = args[i];
    return op;
}

/* an OP_KERNEL op: kernel id on the arguments, n its scalar parameter */
static void add_kernel(SchedList *list, int when, const char *name, int id, long long n, const SchedRef *args, int na) {
    SchedOp *op = add(list, OP_KERNEL, when, name, -1, args, na);
    op->kernel_id = (int16_t)id;
    op->kernel = kernel_decl(id, NULL);
    op->n = n;
}

/* ---- the architecture's choices (docs/model.md, "Architectures"; GPT-2 where the shape says nothing else) -- */
static int rms(const Plan *p) { return p->model.norm == NORM_RMSNORM; }
/* r where the model has the tensor (a linear layer's bias, a LayerNorm's), else none */
static SchedRef bias_of(const Plan *p, int id, int at) { return p->model.no_bias ? NONE : PAR(id, at); }
static SchedRef dbias_of(const Plan *p, int id) { return p->model.no_bias ? NONE : GRD(id, AT_L); }
static SchedRef lnb_of(const Plan *p, int id, int at) { return rms(p) ? NONE : PAR(id, at); }
static SchedRef dlnb_of(const Plan *p, int id, int at) { return rms(p) ? NONE : GRD(id, at); }

/* out = norm(inp): LayerNorm keeping mean and rstd, or RMSNorm keeping rstd */
static void norm_forward(SchedList *b, const Plan *p, int when, SchedRef out, SchedRef mean, SchedRef rstd, SchedRef inp,
                         SchedRef w, SchedRef bias) {
    if (rms(p)) add(b, OP_RMSNORM, when, "rmsnorm forward", -1, ARGS(out, rstd, inp, w));
    else add(b, OP_LAYERNORM, when, "layernorm forward", -1, ARGS(out, mean, rstd, inp, w, bias));
}

/* res = x1 + x2, out = norm(res) */
static void residual_norm_forward(SchedList *b, const Plan *p, int when, SchedRef res, SchedRef out, SchedRef mean,
                                  SchedRef rstd, SchedRef x1, SchedRef x2, SchedRef w, SchedRef bias) {
    if (rms(p)) add(b, OP_RESIDUAL_RMSNORM, when, "rmsnorm forward", -1, ARGS(res, out, rstd, x1, x2, w));
    else add(b, OP_RESIDUAL_LAYERNORM, when, "layernorm forward", -1, ARGS(res, out, mean, rstd, x1, x2, w, bias));
}

/* the positions of a step's rows: a decode step's and a prefill's start at the cache's position, others' at 0 */
static SchedRef positions(const Plan *p) {
    return p->step.kind == STEP_DECODE || p->step.fills_cache ? BUF(BUF_DECODE_POS, AT_0) : NONE;
}

/* where qkv's matmul writes: qkv_pre where a QK-norm op follows, else qkv (a decode step's attention applies QK-norm
   and RoPE itself: templates/decode.cu, ATT_PREP) */
static SchedRef qkv_out(const Plan *p) {
    return p->model.qk_norm && p->step.kind != STEP_DECODE ? BUF(BUF_QKV_PRE, AT_L) : BUF(BUF_QKV, AT_L);
}
/* the qkv matmul's output (qkv_pre with QK-norm) to the attention's qkv */
static void after_qkv(SchedList *b, const Plan *p) {
    if (p->step.kind == STEP_DECODE) return;
    SchedRef qkv = BUF(BUF_QKV, AT_L), pre = BUF(BUF_QKV_PRE, AT_L);
    int fused = gpt2_qk_norm_rotates(&p->model);
    if (p->model.qk_norm)
        add(b, OP_QK_NORM, ON_EVERY, fused ? "qk norm+rope" : "qk norm", -1,
            ARGS(qkv, BUF(BUF_QK_RSTD, AT_L), pre, PAR(P_QNORMW, AT_L), PAR(P_KNORMW, AT_L), fused ? positions(p) : NONE));
    if (p->model.position == POS_ROPE && !fused) add(b, OP_ROPE, ON_EVERY, "rope", -1, ARGS(qkv, positions(p)));
}

/* qkv = ln1 @ qkvw^T + qkvb, then with qk_norm each head's q and k RMS-normed, with RoPE q and k rotated: by the
   QK-norm op itself where it can (gpt2_qk_norm_rotates), else by a rope op of its own */
static void forward_qkv(SchedList *b, const Plan *p) {
    add(b, OP_MATMUL, ON_EVERY, "matmul qkv", MM_QKV,
        ARGS(qkv_out(p), BUF(BUF_LN1, AT_L), PAR(P_QKVW, AT_L), bias_of(p, P_QKVB, AT_L), NONE));
    after_qkv(b, p);
}

/* ---- the forward ---------------------------------------------------------------------------------------- */
static void forward_attention(SchedList *b, const Plan *p) {
    if (p->step.kind == STEP_DECODE) {   /* each row's query against its cached positions; the combine appends */
        SchedRef qnw = p->model.qk_norm ? PAR(P_QNORMW, AT_L) : NONE, knw = p->model.qk_norm ? PAR(P_KNORMW, AT_L) : NONE;
        add(b, OP_DECODE_ATTENTION, ON_EVERY, "decode attention", -1,
            ARGS(BUF(BUF_ATTY, AT_L), BUF(BUF_KCACHE, AT_L), BUF(BUF_VCACHE, AT_L), BUF(BUF_QKV, AT_L),
                 BUF(BUF_DECODE_POS, AT_0), BUF(BUF_ATT_PARTIAL, AT_0), qnw, knw));
        return;
    }
    if (p->step.fills_cache)             /* a prefill: the keys and values into the decode plan's cache */
        add(b, OP_KV_APPEND, ON_EVERY, "kv append", -1,
            ARGS(BUF(BUF_KCACHE, AT_L), BUF(BUF_VCACHE, AT_L), BUF(BUF_QKV, AT_L), BUF(BUF_DECODE_POS, AT_0)));
    add(b, OP_ATTENTION, ON_EVERY, "attention forward", -1,
        ARGS(BUF(BUF_ATTY, AT_L), BUF(BUF_ATT_STATS, AT_L), BUF(BUF_QKV, AT_L)));
}

/* fch = ln2 @ fcw^T + fcb, fchg = GELU(fch): one cuBLASLt call with the GELU epilogue, or (train.gelu kernel or
   split) the bias epilogue and our kernel, or (fused) our matmul with both */
static void forward_fc(SchedList *b, const Plan *p) {
    SchedRef fch = BUF(BUF_FCH, AT_L), fchg = BUF(BUF_FCH_GELU, AT_L), ln2 = BUF(BUF_LN2, AT_L);
    SchedRef w = PAR(P_FCW, AT_L), bias = bias_of(p, P_FCB, AT_L), fcg = BUF(BUF_FCG, AT_L);
    if (p->model.mlp == MLP_RELU2 && gelu_fused(p->gelu)) {   /* ReLU^2 in fc_gemm's epilogue */
        add(b, OP_FC_GELU, ON_EVERY, "matmul fc+relu2", -1, ARGS(fch, fchg, ln2, w, bias));
        return;
    }
    if (p->model.mlp != MLP_GELU) {   /* ReLU^2 of fc, or SwiGLU: silu(gate) * fc (the up projection) */
        add(b, OP_MATMUL, ON_EVERY, "matmul fc", MM_FC, ARGS(fch, ln2, w, bias, NONE));
        if (p->model.mlp == MLP_RELU2) {
            add(b, OP_RELU2, ON_EVERY, "relu2 forward", -1, ARGS(fchg, fch));
            return;
        }
        add(b, OP_MATMUL, ON_EVERY, "matmul fc gate", MM_FC, ARGS(fcg, ln2, PAR(P_FCGW, AT_L), bias_of(p, P_FCGB, AT_L), NONE));
        add(b, OP_SWIGLU, ON_EVERY, "swiglu forward", -1, ARGS(fchg, fch, fcg));
        return;
    }
    if (gelu_fused(p->gelu)) {
        add(b, OP_FC_GELU, ON_EVERY, "matmul fc+gelu", -1, ARGS(fch, fchg, ln2, w, bias));
    } else if (gelu_forward_in_kernel(p->gelu)) {
        add(b, OP_MATMUL, ON_EVERY, "matmul fc", MM_FC, ARGS(fch, ln2, w, bias, NONE));
        add_kernel(b, ON_EVERY, "gelu forward", K_GELU_FORWARD, (long long)p->step.B * p->step.T * gpt2_ffn(&p->model),
                   ARGS(fchg, fch));
    } else {
        add(b, OP_MATMUL, ON_EVERY, "matmul fc+gelu", MM_FC, ARGS(fchg, ln2, w, bias, fch));
    }
}

/* a decode step's layer of few rows (Plan.decode_linear): each norm inside the matmul after it, each residual add
   inside the matmul before it, the MLP's activation (SwiGLU: its gate's matmul too) inside its up projection, and a
   relative's QK-norm and RoPE inside the attention, so the layer is its four linears and the attention; the last
   layer's final norm is inside the classifier */
static void decode_block(SchedList *b, const Plan *p) {
    SchedRef res2 = BUF(BUF_RESIDUAL2, AT_L), res3 = BUF(BUF_RESIDUAL3, AT_L), fchg = BUF(BUF_FCH_GELU, AT_L);
    SchedRef qkv = qkv_out(p);
    static const char *const names[2][5] = {   /* by the norm: qkv, fc with each MLP, the classifier */
        {"layernorm+matmul qkv", "layernorm+matmul fc+gelu", "layernorm+matmul fc+relu2", "layernorm+matmul fc+swiglu",
         "layernorm+matmul classifier"},
        {"rmsnorm+matmul qkv", "rmsnorm+matmul fc+gelu", "rmsnorm+matmul fc+relu2", "rmsnorm+matmul fc+swiglu",
         "rmsnorm+matmul classifier"}};
    const char *const *nm = names[rms(p)], *name[3] = {nm[0], nm[1 + p->model.mlp], nm[4]};
    for (int first = 1; first >= 0; first--) {   /* the residual stream entering the layer: the embedding, or residual3 */
        SchedRef in = first ? BUF(BUF_ENCODED, AT_0) : BUF(BUF_RESIDUAL3, AT_PREV);
        add(b, OP_LN_MATMUL, first ? ON_FIRST : ON_LATER, name[0], MM_QKV,
            ARGS(qkv, in, PAR(P_LN1W, AT_L), lnb_of(p, P_LN1B, AT_L), PAR(P_QKVW, AT_L), bias_of(p, P_QKVB, AT_L)));
    }
    forward_attention(b, p);
    for (int first = 1; first >= 0; first--)
        add(b, OP_MATMUL_RESIDUAL, first ? ON_FIRST : ON_LATER, "matmul attproj+residual", MM_ATTPROJ,
            ARGS(res2, BUF(BUF_ATTY, AT_L), PAR(P_ATTPROJW, AT_L), bias_of(p, P_ATTPROJB, AT_L),
                 first ? BUF(BUF_ENCODED, AT_0) : BUF(BUF_RESIDUAL3, AT_PREV)));
    int swiglu = p->model.mlp == MLP_SWIGLU;
    add(b, OP_LN_MATMUL, ON_EVERY, name[1], MM_FC,
        ARGS(fchg, res2, PAR(P_LN2W, AT_L), lnb_of(p, P_LN2B, AT_L), PAR(P_FCW, AT_L), bias_of(p, P_FCB, AT_L),
             swiglu ? PAR(P_FCGW, AT_L) : NONE, swiglu ? bias_of(p, P_FCGB, AT_L) : NONE));
    add(b, OP_MATMUL_RESIDUAL, ON_EVERY, "matmul fcproj+residual", MM_FCPROJ,
        ARGS(res3, fchg, PAR(P_FCPROJW, AT_L), bias_of(p, P_FCPROJB, AT_L), res2));
    add(b, OP_LN_MATMUL, ON_LAST, name[2], MM_CLASSIFIER,
        ARGS(BUF(BUF_LOGITS, AT_0), res3, PAR(P_LNFW, AT_0), lnb_of(p, P_LNFB, AT_0),
             p->model.untied ? PAR(P_LMHEAD, AT_0) : PAR(P_WTE, AT_0), NONE));
}

/* a layer: ln1 (the first layer's: the others' is the previous layer's last op), attention, ln2 with the residual
   add, the MLP, then the residual add with the next LayerNorm (the next layer's ln1, or the final one) */
static void forward_block(SchedList *b, const Plan *p) {
    SchedRef tmp = BUF(BUF_TMP, AT_0), res2 = BUF(BUF_RESIDUAL2, AT_L);
    norm_forward(b, p, ON_FIRST, BUF(BUF_LN1, AT_L), BUF(BUF_LN1_MEAN, AT_L), BUF(BUF_LN1_RSTD, AT_L), BUF(BUF_ENCODED, AT_0),
                 PAR(P_LN1W, AT_L), lnb_of(p, P_LN1B, AT_L));
    forward_qkv(b, p);
    forward_attention(b, p);
    add(b, OP_MATMUL, ON_EVERY, "matmul attproj", MM_ATTPROJ,
        ARGS(tmp, BUF(BUF_ATTY, AT_L), PAR(P_ATTPROJW, AT_L), bias_of(p, P_ATTPROJB, AT_L), NONE));
    for (int first = 1; first >= 0; first--)   /* the residual stream entering the layer: the encoder's, or residual3 */
        residual_norm_forward(b, p, first ? ON_FIRST : ON_LATER, res2, BUF(BUF_LN2, AT_L), BUF(BUF_LN2_MEAN, AT_L),
                              BUF(BUF_LN2_RSTD, AT_L), first ? BUF(BUF_ENCODED, AT_0) : BUF(BUF_RESIDUAL3, AT_PREV), tmp,
                              PAR(P_LN2W, AT_L), lnb_of(p, P_LN2B, AT_L));
    forward_fc(b, p);
    add(b, OP_MATMUL, ON_EVERY, "matmul fcproj", MM_FCPROJ,
        ARGS(tmp, BUF(BUF_FCH_GELU, AT_L), PAR(P_FCPROJW, AT_L), bias_of(p, P_FCPROJB, AT_L), NONE));
    residual_norm_forward(b, p, ON_BELOW_LAST, BUF(BUF_RESIDUAL3, AT_L), BUF(BUF_LN1, AT_NEXT), BUF(BUF_LN1_MEAN, AT_NEXT),
                          BUF(BUF_LN1_RSTD, AT_NEXT), res2, tmp, PAR(P_LN1W, AT_NEXT), lnb_of(p, P_LN1B, AT_NEXT));
    residual_norm_forward(b, p, ON_LAST, BUF(BUF_RESIDUAL3, AT_L), BUF(BUF_LNF, AT_0), BUF(BUF_LNF_MEAN, AT_0),
                          BUF(BUF_LNF_RSTD, AT_0), res2, tmp, PAR(P_LNFW, AT_0), lnb_of(p, P_LNFB, AT_0));
}

static void forward_make(SchedPhase *ph, const Plan *p) {
    SchedRef enc = BUF(BUF_ENCODED, AT_0), in = BUF(BUF_INPUTS, AT_0), wte = PAR(P_WTE, AT_0);
    SchedRef wpe = p->model.position == POS_LEARNED ? PAR(P_WPE, AT_0) : NONE;
    SchedRef head = p->model.untied ? PAR(P_LMHEAD, AT_0) : wte;
    if (p->step.kind == STEP_DECODE)
        add(&ph->head, OP_DECODE_EMBED, ON_EVERY, "decode embed", -1, ARGS(enc, in, wte, wpe, BUF(BUF_DECODE_POS, AT_0)));
    else
        add(&ph->head, OP_ENCODER, ON_EVERY, "encoder forward", -1, ARGS(enc, in, wte, wpe));
    if (p->decode_linear) decode_block(&ph->block, p);
    else forward_block(&ph->block, p);
    if (p->step.kind != STEP_DECODE) return;
    if (!p->decode_linear)   /* the rows' logits, for the draw */
        add(&ph->tail, OP_MATMUL, ON_EVERY, "matmul classifier", MM_CLASSIFIER,
            ARGS(BUF(BUF_LOGITS, AT_0), BUF(BUF_LNF, AT_0), head, NONE, NONE));
    if (p->model.logit_softcap > 0 && !p->decode_linear)   /* the decode linears' classifier caps itself */
        add(&ph->tail, OP_SOFTCAP, ON_EVERY, "logit softcap", -1, ARGS(BUF(BUF_LOGITS, AT_0)))->n =
            (long long)p->step.B * p->model.padded_vocab_size;
}

/* ---- the backward --------------------------------------------------------------------------------------- */
typedef struct {
    SchedList *b;
    const Plan *p;
    int side;          /* the plan has the side stream: fork, mark and wait ops */
} Bwd;

static void fork_side(Bwd *k) {
    if (k->side) add(k->b, OP_FORK, ON_EVERY, "fork", -1, NULL, 0);
}
static void mark_side(SchedList *b, int side, SideMark m) {
    if (side) add(b, OP_MARK, ON_EVERY, "mark", -1, NULL, 0)->mark = (uint8_t)m;
}
static void wait_side(SchedList *b, int side, SideMark m) {
    if (side) add(b, OP_WAIT, ON_EVERY, "wait", -1, NULL, 0)->mark = (uint8_t)m;
}

/* A linear layer's weight and bias gradients (db NONE: summed elsewhere) on the side stream, then its mark */
static void weight_grads(Bwd *k, const char *name, int dw_id, SchedRef dW, SchedRef db, SchedRef dout, SchedRef inp,
                         int OC, SideMark mark) {
    fork_side(k);
    add(k->b, OP_MATMUL_DW, ON_EVERY, name, dw_id, ARGS(dW, dout, inp));
    if (db.space != REF_NONE) add(k->b, OP_BIAS_BACKWARD, ON_EVERY, "bias backward", -1, ARGS(db, dout))->n = OC;
    mark_side(k->b, k->side, mark);
}

/* The backward of a linear layer that reads a LayerNorm's output, then of that LayerNorm */
typedef struct {
    const char *name;
    int dinp_id, dw_id, out;   /* out: the layer's output features (its bias gradient's columns) */
    SchedRef dW, db, dout, W, ln, inp, inp_first, lnw, lnb, dlnw, dlnb, mean, rstd;   /* inp_first: the first layer's */
    SideMark mark;     /* the side's mark of dout's readers */
    SchedRef dW2, db2, dout2, W2;   /* a second linear layer reading ln (SwiGLU's gate), or none */
} LinearLn;

/* dln = dout @ W, dW += dout^T ln, db; dresidual += LN'(dln). At recompute=2 ln is not kept: the LayerNorm backward
   makes it again (from inp and the saved mean and rstd) and the dW matmul runs after it; else first. */
static void linear_layernorm_backward(Bwd *k, const LinearLn *x) {
    int OC = x->out, rms_norm = rms(k->p), rec2 = k->p->step.recompute >= 2 && !rms_norm, two_mm = x->W2.space != REF_NONE;
    SchedRef dres = BUF(BUF_DRESIDUAL, AT_0), dln = BUF(BUF_DLN, AT_0);
    if (!rec2) weight_grads(k, x->name, x->dw_id, x->dW, x->db, x->dout, x->ln, OC, x->mark);
    if (two_mm) weight_grads(k, x->name, x->dw_id, x->dW2, x->db2, x->dout2, x->ln, OC, x->mark);
    add(k->b, OP_MATMUL_DINP, ON_EVERY, x->name, x->dinp_id, ARGS(dln, x->dout, x->W, NONE));
    if (two_mm) add(k->b, OP_MATMUL_DINP_ACC, ON_EVERY, x->name, x->dinp_id, ARGS(dln, x->dout2, x->W2));
    wait_side(k->b, k->side, MARK_DRES);
    int two = x->inp_first.space != REF_NONE;
    for (int v = two; v >= 0; v--) {   /* v 1: the first layer's input (two: a version for each) */
        int when = two ? (v ? ON_FIRST : ON_LATER) : ON_EVERY;
        if (rms_norm)
            add(k->b, OP_RMSNORM_BACKWARD, when, "rmsnorm backward", -1,
                ARGS(dres, x->dlnw, dln, v ? x->inp_first : x->inp, x->lnw, x->rstd));
        else
            add(k->b, OP_LAYERNORM_BACKWARD, when, "layernorm backward", -1,
                ARGS(dres, x->dlnw, x->dlnb, dln, v ? x->inp_first : x->inp, x->lnw, x->mean, x->rstd,
                     rec2 ? x->ln : NONE, rec2 ? x->lnb : NONE));
    }
    if (rec2) weight_grads(k, x->name, x->dw_id, x->dW, x->db, x->dout, x->ln, OC, x->mark);
}

/* ReLU^2's or SwiGLU's backward: dfch holds d(activation); the side's part (fcproj dW, db) first */
static void backward_mlp_act(Bwd *k) {
    const Plan *p = k->p;
    SchedRef fch = BUF(BUF_FCH, AT_L), dres = BUF(BUF_DRESIDUAL, AT_0), dfch = BUF(BUF_DFCH, AT_0);
    weight_grads(k, "matmul bwd fcproj", MM_FCPROJ_DW, GRD(P_FCPROJW, AT_L), dbias_of(p, P_FCPROJB), dres,
                 BUF(BUF_FCH_GELU, AT_L), p->model.n_embd, MARK_DRES);
    wait_side(k->b, k->side, MARK_DFCH);
    if (p->model.mlp == MLP_RELU2 && gelu_fused(p->gelu)) {   /* dfch = (dres @ fcprojw) * 2 relu(fch), one kernel */
        add(k->b, OP_FCPROJ_DGELU, ON_EVERY, "matmul bwd fcproj+drelu2", -1, ARGS(dfch, dres, PAR(P_FCPROJW, AT_L), fch));
        if (!p->model.no_bias)
            add(k->b, OP_FC_BIAS_REDUCE, ON_EVERY, "bias backward", -1, ARGS(GRD(P_FCB, AT_L), dfch));
        return;
    }
    add(k->b, OP_MATMUL_DINP, ON_EVERY, "matmul bwd fcproj", MM_FCPROJ_DINP, ARGS(dfch, dres, PAR(P_FCPROJW, AT_L), NONE));
    if (p->model.mlp == MLP_RELU2) add(k->b, OP_RELU2_BACKWARD, ON_EVERY, "relu2 backward", -1, ARGS(dfch, fch));
    else add(k->b, OP_SWIGLU_BACKWARD, ON_EVERY, "swiglu backward", -1, ARGS(dfch, BUF(BUF_DFCG, AT_0), fch, BUF(BUF_FCG, AT_L)));
}

/* the MLP's backward down to dfch: the side's part first (GELU output again, fcproj dW and db), then
   dfch = (dresidual @ fcprojw) * GELU'(fch): the DGELU epilogue, or (train.gelu kernel) the matmul, then our
   kernel, which also sums the fc bias gradient, or (fused) our matmul with both; dfch is free once the layer
   above's fc gradients are in */
static void backward_mlp(Bwd *k) {
    if (k->p->model.mlp != MLP_GELU) {
        backward_mlp_act(k);
        return;
    }
    SchedRef fch = BUF(BUF_FCH, AT_L), fchg = BUF(BUF_FCH_GELU, AT_L), dres = BUF(BUF_DRESIDUAL, AT_0);
    SchedRef dfch = BUF(BUF_DFCH, AT_0), w = PAR(P_FCPROJW, AT_L);
    int gelu_kernel = gelu_backward_in_kernel(k->p->gelu), fused = gelu_fused(k->p->gelu);
    const char *name = gelu_kernel ? "matmul bwd fcproj" : "matmul bwd fcproj+dgelu";
    fork_side(k);
    if (k->p->step.recompute >= 1)
        add_kernel(k->b, ON_EVERY, "gelu recompute", K_GELU_FORWARD, (long long)k->p->step.B * k->p->step.T * gpt2_ffn(&k->p->model),
                   ARGS(fchg, fch));
    add(k->b, OP_MATMUL_DW, ON_EVERY, name, MM_FCPROJ_DW, ARGS(GRD(P_FCPROJW, AT_L), dres, fchg));
    if (!k->p->model.no_bias)
        add(k->b, OP_BIAS_BACKWARD, ON_EVERY, "bias backward", -1, ARGS(GRD(P_FCPROJB, AT_L), dres))->n = k->p->model.n_embd;
    mark_side(k->b, k->side, MARK_DRES);
    wait_side(k->b, k->side, MARK_DFCH);
    if (fused) {
        add(k->b, OP_FCPROJ_DGELU, ON_EVERY, name, -1, ARGS(dfch, dres, w, fch));
        add(k->b, OP_FC_BIAS_REDUCE, ON_EVERY, "bias backward", -1, ARGS(GRD(P_FCB, AT_L), dfch));
        return;
    }
    add(k->b, OP_MATMUL_DINP, ON_EVERY, name, MM_FCPROJ_DINP, ARGS(dfch, dres, w, gelu_kernel ? NONE : fch));
    if (gelu_kernel) add(k->b, OP_GELU_BACKWARD_BIAS, ON_EVERY, "gelu backward", -1, ARGS(dfch, fch, GRD(P_FCB, AT_L)));
}

/* the attention's input gradient back through RoPE and QK-norm, in place in dqkv */
static void backward_qkv_post(Bwd *k) {
    const Plan *p = k->p;
    SchedRef dqkv = BUF(BUF_DQKV, AT_0);
    int fused = gpt2_qk_norm_rotates(&p->model);
    if (p->model.position == POS_ROPE && !fused)
        add(k->b, OP_ROPE_BACKWARD, ON_EVERY, "rope backward", -1, ARGS(dqkv, positions(p)));
    if (p->model.qk_norm)
        add(k->b, OP_QK_NORM_BACKWARD, ON_EVERY, fused ? "rope+qk norm backward" : "qk norm backward", -1,
            ARGS(dqkv, BUF(BUF_QKV_PRE, AT_L), PAR(P_QNORMW, AT_L), PAR(P_KNORMW, AT_L), BUF(BUF_QK_RSTD, AT_L),
                 GRD(P_QNORMW, AT_L), GRD(P_KNORMW, AT_L), fused ? positions(p) : NONE));
}

static void backward_block(Bwd *k) {
    const Plan *p = k->p;
    int folded = p->model.mlp == MLP_GELU && (gelu_backward_in_kernel(p->gelu) || gelu_fused(p->gelu));   /* fcb's is in */
    int swiglu = p->model.mlp == MLP_SWIGLU;
    SchedRef dres = BUF(BUF_DRESIDUAL, AT_0);
    backward_mlp(k);
    linear_layernorm_backward(k, &(LinearLn){"matmul bwd fc", MM_FC_DINP, MM_FC_DW, gpt2_ffn(&p->model), GRD(P_FCW, AT_L),
        folded ? NONE : dbias_of(p, P_FCB), BUF(BUF_DFCH, AT_0), PAR(P_FCW, AT_L), BUF(BUF_LN2, AT_L),
        BUF(BUF_RESIDUAL2, AT_L), NONE, PAR(P_LN2W, AT_L), lnb_of(p, P_LN2B, AT_L), GRD(P_LN2W, AT_L), dlnb_of(p, P_LN2B, AT_L),
        BUF(BUF_LN2_MEAN, AT_L), BUF(BUF_LN2_RSTD, AT_L), MARK_DFCH,
        swiglu ? GRD(P_FCGW, AT_L) : NONE, swiglu ? dbias_of(p, P_FCGB) : NONE, swiglu ? BUF(BUF_DFCG, AT_0) : NONE,
        swiglu ? PAR(P_FCGW, AT_L) : NONE});
    weight_grads(k, "matmul bwd attproj", MM_ATTPROJ_DW, GRD(P_ATTPROJW, AT_L), dbias_of(p, P_ATTPROJB), dres,
                 BUF(BUF_ATTY, AT_L), p->model.n_embd, MARK_DRES);
    add(k->b, OP_MATMUL_DINP, ON_EVERY, "matmul bwd attproj", MM_ATTPROJ_DINP,
        ARGS(BUF(BUF_DATTY, AT_0), dres, PAR(P_ATTPROJW, AT_L), NONE));
    wait_side(k->b, k->side, MARK_DQKV);   /* dqkv is free once the layer above's qkv gradients are in */
    add(k->b, OP_ATTENTION_BACKWARD, ON_EVERY, "attention backward", -1,
        ARGS(BUF(BUF_DQKV, AT_0), BUF(BUF_QKV, AT_L), BUF(BUF_ATTY, AT_L), BUF(BUF_DATTY, AT_0),
             BUF(BUF_ATT_STATS, AT_L), BUF(BUF_ATT_DDOT, AT_0)));
    backward_qkv_post(k);
    linear_layernorm_backward(k, &(LinearLn){"matmul bwd qkv", MM_QKV_DINP, MM_QKV_DW, gpt2_qkv_width(&p->model),
        GRD(P_QKVW, AT_L), dbias_of(p, P_QKVB), BUF(BUF_DQKV, AT_0), PAR(P_QKVW, AT_L), BUF(BUF_LN1, AT_L),
        BUF(BUF_RESIDUAL3, AT_PREV), BUF(BUF_ENCODED, AT_0), PAR(P_LN1W, AT_L), lnb_of(p, P_LN1B, AT_L), GRD(P_LN1W, AT_L),
        dlnb_of(p, P_LN1B, AT_L), BUF(BUF_LN1_MEAN, AT_L), BUF(BUF_LN1_RSTD, AT_L), MARK_DQKV, NONE, NONE, NONE, NONE});
    /* layer l's gradients are all in once the compute stream has the side's last mark of the layer */
    add(k->b, OP_GRAD_READY, ON_EVERY, "grad ready", -1, NULL, 0)->mark = MARK_DQKV;
}

static void backward_make(OpSchedule *s, const Plan *p) {
    SchedPhase *ph = &s->backward;
    SchedRef dres = BUF(BUF_DRESIDUAL, AT_0);
    int side = p->streams >= 2;
    ph->reverse = 1;
    add(&ph->head, OP_ZERO, ON_EVERY, "zero dresidual", -1, ARGS(dres))->n =
        (long long)p->step.B * p->step.T * p->model.n_embd;
    if (rms(p))
        add(&ph->head, OP_RMSNORM_BACKWARD, ON_EVERY, "rmsnorm backward", -1,
            ARGS(dres, GRD(P_LNFW, AT_0), BUF(BUF_DLN, AT_0), BUF(BUF_RESIDUAL3, AT_LAST), PAR(P_LNFW, AT_0),
                 BUF(BUF_LNF_RSTD, AT_0)));
    else
        add(&ph->head, OP_LAYERNORM_BACKWARD, ON_EVERY, "layernorm backward", -1,
            ARGS(dres, GRD(P_LNFW, AT_0), GRD(P_LNFB, AT_0), BUF(BUF_DLN, AT_0), BUF(BUF_RESIDUAL3, AT_LAST),
                 PAR(P_LNFW, AT_0), BUF(BUF_LNF_MEAN, AT_0), BUF(BUF_LNF_RSTD, AT_0), NONE, NONE));
    backward_block(&(Bwd){&ph->block, p, side});
    /* the side's work all in before anything after (the encoder backward, the optimizer, the next forward) */
    mark_side(&ph->tail, side, MARK_DONE);
    wait_side(&ph->tail, side, MARK_DONE);
    add(&s->embed_backward, OP_ENCODER_BACKWARD, ON_EVERY, "encoder backward", -1,
        ARGS(GRD(P_WTE, AT_0), p->model.position == POS_LEARNED ? GRD(P_WPE, AT_0) : NONE, dres, BUF(BUF_INPUTS, AT_0)));
    add(&s->embed_backward, OP_GRAD_READY, ON_EVERY, "grad ready", -1, NULL, 0);
}

void schedule_make(OpSchedule *s, const Plan *p) {
    *s = (OpSchedule){0};
    forward_make(&s->forward, p);
    if (p->step.kind == STEP_TRAIN) backward_make(s, p);
}
