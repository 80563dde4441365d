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

/* ---- the forward ---------------------------------------------------------------------------------------- */
static void forward_attention(SchedList *b, const Plan *p) {
    if (p->step.kind == STEP_DECODE) {   /* each row's query against its cached positions; the combine appends */
        add(b, OP_DECODE_ATTENTION, ON_EVERY, "decode attention", -1,
            ARGS(BUF(BUF_ATTY, AT_L), BUF(BUF_KCACHE, AT_L), BUF(BUF_VCACHE, AT_L), BUF(BUF_QKV, AT_L),
                 BUF(BUF_DECODE_POS, AT_0), BUF(BUF_ATT_PARTIAL, AT_0)));
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
    SchedRef w = PAR(P_FCW, AT_L), bias = PAR(P_FCB, AT_L);
    if (gelu_fused(p->gelu)) {
        add(b, OP_FC_GELU, ON_EVERY, "matmul fc+gelu", -1, ARGS(fch, fchg, ln2, w, bias));
    } else if (gelu_forward_in_kernel(p->gelu)) {
        add(b, OP_MATMUL, ON_EVERY, "matmul fc", MM_FC, ARGS(fch, ln2, w, bias, NONE));
        add_kernel(b, ON_EVERY, "gelu forward", K_GELU_FORWARD, 4LL * p->step.B * p->step.T * p->model.n_embd, ARGS(fchg, fch));
    } else {
        add(b, OP_MATMUL, ON_EVERY, "matmul fc+gelu", MM_FC, ARGS(fchg, ln2, w, bias, fch));
    }
}

/* a decode step's layer of few rows (Plan.decode_linear): each LayerNorm inside the matmul after it, each residual
   add inside the matmul before it, so the layer is its four linears and the attention; the last layer's final
   LayerNorm is inside the classifier */
static void decode_block(SchedList *b, const Plan *p) {
    SchedRef res2 = BUF(BUF_RESIDUAL2, AT_L), res3 = BUF(BUF_RESIDUAL3, AT_L), fchg = BUF(BUF_FCH_GELU, AT_L);
    for (int first = 1; first >= 0; first--) {   /* the residual stream entering the layer: the embedding, or residual3 */
        SchedRef in = first ? BUF(BUF_ENCODED, AT_0) : BUF(BUF_RESIDUAL3, AT_PREV);
        add(b, OP_LN_MATMUL, first ? ON_FIRST : ON_LATER, "layernorm+matmul qkv", MM_QKV,
            ARGS(BUF(BUF_QKV, AT_L), in, PAR(P_LN1W, AT_L), PAR(P_LN1B, AT_L), PAR(P_QKVW, AT_L), PAR(P_QKVB, AT_L)));
    }
    forward_attention(b, p);
    for (int first = 1; first >= 0; first--)
        add(b, OP_MATMUL_RESIDUAL, first ? ON_FIRST : ON_LATER, "matmul attproj+residual", MM_ATTPROJ,
            ARGS(res2, BUF(BUF_ATTY, AT_L), PAR(P_ATTPROJW, AT_L), PAR(P_ATTPROJB, AT_L),
                 first ? BUF(BUF_ENCODED, AT_0) : BUF(BUF_RESIDUAL3, AT_PREV)));
    add(b, OP_LN_MATMUL, ON_EVERY, "layernorm+matmul fc+gelu", MM_FC,
        ARGS(fchg, res2, PAR(P_LN2W, AT_L), PAR(P_LN2B, AT_L), PAR(P_FCW, AT_L), PAR(P_FCB, AT_L)));
    add(b, OP_MATMUL_RESIDUAL, ON_EVERY, "matmul fcproj+residual", MM_FCPROJ,
        ARGS(res3, fchg, PAR(P_FCPROJW, AT_L), PAR(P_FCPROJB, AT_L), res2));
    add(b, OP_LN_MATMUL, ON_LAST, "layernorm+matmul classifier", MM_CLASSIFIER,
        ARGS(BUF(BUF_LOGITS, AT_0), res3, PAR(P_LNFW, AT_0), PAR(P_LNFB, AT_0), PAR(P_WTE, AT_0), NONE));
}

/* a layer: ln1 (the first layer's: the others' is the previous layer's last op), attention, ln2 with the residual
   add, the MLP, then the residual add with the next LayerNorm (the next layer's ln1, or the final one) */
static void forward_block(SchedList *b, const Plan *p) {
    SchedRef tmp = BUF(BUF_TMP, AT_0), res2 = BUF(BUF_RESIDUAL2, AT_L);
    add(b, OP_LAYERNORM, ON_FIRST, "layernorm forward", -1,
        ARGS(BUF(BUF_LN1, AT_L), BUF(BUF_LN1_MEAN, AT_L), BUF(BUF_LN1_RSTD, AT_L), BUF(BUF_ENCODED, AT_0),
             PAR(P_LN1W, AT_L), PAR(P_LN1B, AT_L)));
    add(b, OP_MATMUL, ON_EVERY, "matmul qkv", MM_QKV,
        ARGS(BUF(BUF_QKV, AT_L), BUF(BUF_LN1, AT_L), PAR(P_QKVW, AT_L), PAR(P_QKVB, AT_L), NONE));
    forward_attention(b, p);
    add(b, OP_MATMUL, ON_EVERY, "matmul attproj", MM_ATTPROJ,
        ARGS(tmp, BUF(BUF_ATTY, AT_L), PAR(P_ATTPROJW, AT_L), PAR(P_ATTPROJB, AT_L), NONE));
    for (int first = 1; first >= 0; first--)   /* the residual stream entering the layer: the encoder's, or residual3 */
        add(b, OP_RESIDUAL_LAYERNORM, first ? ON_FIRST : ON_LATER, "layernorm forward", -1,
            ARGS(res2, BUF(BUF_LN2, AT_L), BUF(BUF_LN2_MEAN, AT_L), BUF(BUF_LN2_RSTD, AT_L),
                 first ? BUF(BUF_ENCODED, AT_0) : BUF(BUF_RESIDUAL3, AT_PREV), tmp, PAR(P_LN2W, AT_L), PAR(P_LN2B, AT_L)));
    forward_fc(b, p);
    add(b, OP_MATMUL, ON_EVERY, "matmul fcproj", MM_FCPROJ,
        ARGS(tmp, BUF(BUF_FCH_GELU, AT_L), PAR(P_FCPROJW, AT_L), PAR(P_FCPROJB, AT_L), NONE));
    add(b, OP_RESIDUAL_LAYERNORM, ON_BELOW_LAST, "layernorm forward", -1,
        ARGS(BUF(BUF_RESIDUAL3, AT_L), BUF(BUF_LN1, AT_NEXT), BUF(BUF_LN1_MEAN, AT_NEXT), BUF(BUF_LN1_RSTD, AT_NEXT), res2,
             tmp, PAR(P_LN1W, AT_NEXT), PAR(P_LN1B, AT_NEXT)));
    add(b, OP_RESIDUAL_LAYERNORM, ON_LAST, "layernorm forward", -1,
        ARGS(BUF(BUF_RESIDUAL3, AT_L), BUF(BUF_LNF, AT_0), BUF(BUF_LNF_MEAN, AT_0), BUF(BUF_LNF_RSTD, AT_0), res2, tmp,
             PAR(P_LNFW, AT_0), PAR(P_LNFB, AT_0)));
}

static void forward_make(SchedPhase *ph, const Plan *p) {
    SchedRef enc = BUF(BUF_ENCODED, AT_0), in = BUF(BUF_INPUTS, AT_0), wte = PAR(P_WTE, AT_0), wpe = PAR(P_WPE, AT_0);
    if (p->step.kind == STEP_DECODE)
        add(&ph->head, OP_DECODE_EMBED, ON_EVERY, "decode embed", -1, ARGS(enc, in, wte, wpe, BUF(BUF_DECODE_POS, AT_0)));
    else
        add(&ph->head, OP_ENCODER, ON_EVERY, "encoder forward", -1, ARGS(enc, in, wte, wpe));
    if (p->decode_linear) {
        decode_block(&ph->block, p);
        return;
    }
    forward_block(&ph->block, p);
    if (p->step.kind == STEP_DECODE)   /* the rows' logits, for the draw */
        add(&ph->tail, OP_MATMUL, ON_EVERY, "matmul classifier", MM_CLASSIFIER,
            ARGS(BUF(BUF_LOGITS, AT_0), BUF(BUF_LNF, AT_0), wte, NONE, NONE));
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
} LinearLn;

/* dln = dout @ W, dW += dout^T ln, db; dresidual += LN'(dln). At recompute=2 ln is not kept: the LayerNorm backward
   makes it again (from inp and the saved mean and rstd) and the dW matmul runs after it; else first. */
static void linear_layernorm_backward(Bwd *k, const LinearLn *x) {
    int OC = x->out, rec2 = k->p->step.recompute >= 2;
    SchedRef dres = BUF(BUF_DRESIDUAL, AT_0), dln = BUF(BUF_DLN, AT_0);
    if (!rec2) weight_grads(k, x->name, x->dw_id, x->dW, x->db, x->dout, x->ln, OC, x->mark);
    add(k->b, OP_MATMUL_DINP, ON_EVERY, x->name, x->dinp_id, ARGS(dln, x->dout, x->W, NONE));
    wait_side(k->b, k->side, MARK_DRES);
    int two = x->inp_first.space != REF_NONE;
    for (int v = two; v >= 0; v--)   /* v 1: the first layer's input (two: a version for each) */
        add(k->b, OP_LAYERNORM_BACKWARD, two ? (v ? ON_FIRST : ON_LATER) : ON_EVERY, "layernorm backward", -1,
            ARGS(dres, x->dlnw, x->dlnb, dln, v ? x->inp_first : x->inp, x->lnw, x->mean, x->rstd, rec2 ? x->ln : NONE,
                 rec2 ? x->lnb : NONE));
    if (rec2) weight_grads(k, x->name, x->dw_id, x->dW, x->db, x->dout, x->ln, OC, x->mark);
}

/* the MLP's backward down to dfch: the side's part first (GELU output again, fcproj dW and db), then
   dfch = (dresidual @ fcprojw) * GELU'(fch): the DGELU epilogue, or (train.gelu kernel) the matmul, then our
   kernel, which also sums the fc bias gradient, or (fused) our matmul with both; dfch is free once the layer
   above's fc gradients are in */
static void backward_mlp(Bwd *k) {
    SchedRef fch = BUF(BUF_FCH, AT_L), fchg = BUF(BUF_FCH_GELU, AT_L), dres = BUF(BUF_DRESIDUAL, AT_0);
    SchedRef dfch = BUF(BUF_DFCH, AT_0), w = PAR(P_FCPROJW, AT_L);
    int gelu_kernel = gelu_backward_in_kernel(k->p->gelu), fused = gelu_fused(k->p->gelu);
    const char *name = gelu_kernel ? "matmul bwd fcproj" : "matmul bwd fcproj+dgelu";
    fork_side(k);
    if (k->p->step.recompute >= 1)
        add_kernel(k->b, ON_EVERY, "gelu recompute", K_GELU_FORWARD, 4LL * k->p->step.B * k->p->step.T * k->p->model.n_embd,
                   ARGS(fchg, fch));
    add(k->b, OP_MATMUL_DW, ON_EVERY, name, MM_FCPROJ_DW, ARGS(GRD(P_FCPROJW, AT_L), dres, fchg));
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

static void backward_block(Bwd *k) {
    int folded = gelu_backward_in_kernel(k->p->gelu) || gelu_fused(k->p->gelu);   /* the fc bias gradient is in */
    SchedRef dres = BUF(BUF_DRESIDUAL, AT_0);
    backward_mlp(k);
    linear_layernorm_backward(k, &(LinearLn){"matmul bwd fc", MM_FC_DINP, MM_FC_DW, 4 * k->p->model.n_embd, GRD(P_FCW, AT_L),
        folded ? NONE : GRD(P_FCB, AT_L), BUF(BUF_DFCH, AT_0), PAR(P_FCW, AT_L), BUF(BUF_LN2, AT_L),
        BUF(BUF_RESIDUAL2, AT_L), NONE, PAR(P_LN2W, AT_L), PAR(P_LN2B, AT_L), GRD(P_LN2W, AT_L), GRD(P_LN2B, AT_L),
        BUF(BUF_LN2_MEAN, AT_L), BUF(BUF_LN2_RSTD, AT_L), MARK_DFCH});
    weight_grads(k, "matmul bwd attproj", MM_ATTPROJ_DW, GRD(P_ATTPROJW, AT_L), GRD(P_ATTPROJB, AT_L), dres,
                 BUF(BUF_ATTY, AT_L), k->p->model.n_embd, MARK_DRES);
    add(k->b, OP_MATMUL_DINP, ON_EVERY, "matmul bwd attproj", MM_ATTPROJ_DINP,
        ARGS(BUF(BUF_DATTY, AT_0), dres, PAR(P_ATTPROJW, AT_L), NONE));
    wait_side(k->b, k->side, MARK_DQKV);   /* dqkv is free once the layer above's qkv gradients are in */
    add(k->b, OP_ATTENTION_BACKWARD, ON_EVERY, "attention backward", -1,
        ARGS(BUF(BUF_DQKV, AT_0), BUF(BUF_QKV, AT_L), BUF(BUF_ATTY, AT_L), BUF(BUF_DATTY, AT_0),
             BUF(BUF_ATT_STATS, AT_L), BUF(BUF_ATT_DDOT, AT_0)));
    linear_layernorm_backward(k, &(LinearLn){"matmul bwd qkv", MM_QKV_DINP, MM_QKV_DW, 3 * k->p->model.n_embd, GRD(P_QKVW, AT_L),
        GRD(P_QKVB, AT_L), BUF(BUF_DQKV, AT_0), PAR(P_QKVW, AT_L), BUF(BUF_LN1, AT_L), BUF(BUF_RESIDUAL3, AT_PREV),
        BUF(BUF_ENCODED, AT_0), PAR(P_LN1W, AT_L), PAR(P_LN1B, AT_L), GRD(P_LN1W, AT_L), GRD(P_LN1B, AT_L),
        BUF(BUF_LN1_MEAN, AT_L), BUF(BUF_LN1_RSTD, AT_L), MARK_DQKV});
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
    add(&ph->head, OP_LAYERNORM_BACKWARD, ON_EVERY, "layernorm backward", -1,
        ARGS(dres, GRD(P_LNFW, AT_0), GRD(P_LNFB, AT_0), BUF(BUF_DLN, AT_0), BUF(BUF_RESIDUAL3, AT_LAST),
             PAR(P_LNFW, AT_0), BUF(BUF_LNF_MEAN, AT_0), BUF(BUF_LNF_RSTD, AT_0), NONE, NONE));
    backward_block(&(Bwd){&ph->block, p, side});
    /* the side's work all in before anything after (the encoder backward, the optimizer, the next forward) */
    mark_side(&ph->tail, side, MARK_DONE);
    wait_side(&ph->tail, side, MARK_DONE);
    add(&s->embed_backward, OP_ENCODER_BACKWARD, ON_EVERY, "encoder backward", -1,
        ARGS(GRD(P_WTE, AT_0), GRD(P_WPE, AT_0), dres, BUF(BUF_INPUTS, AT_0)));
    add(&s->embed_backward, OP_GRAD_READY, ON_EVERY, "grad ready", -1, NULL, 0);
}

void schedule_make(OpSchedule *s, const Plan *p) {
    *s = (OpSchedule){0};
    forward_make(&s->forward, p);
    if (p->step.kind == STEP_TRAIN) backward_make(s, p);
}

/* ---- running and writing ------------------------------------------------------------------------------- */
static int runs_on(int when, int l, int L) {
    switch (when) {
    case ON_FIRST: return l == 0;
    case ON_LATER: return l > 0;
    case ON_LAST: return l == L - 1;
    case ON_BELOW_LAST: return l < L - 1;
    default: return 1;
    }
}

int schedule_run_list(const SchedList *list, int l, int L, SchedRunFn run, void *ctx, Err *err) {
    for (int i = 0; i < list->n; i++)
        if ((l < 0 || runs_on(list->ops[i].when, l, L)) && run(ctx, &list->ops[i], l, err)) return -1;
    return 0;
}

int schedule_run_phase(const SchedPhase *ph, int L, SchedRunFn run, void *ctx, Err *err) {
    if (schedule_run_list(&ph->head, -1, L, run, ctx, err)) return -1;
    for (int i = 0; i < L; i++)
        if (schedule_run_list(&ph->block, ph->reverse ? L - 1 - i : i, L, run, ctx, err)) return -1;
    return schedule_run_list(&ph->tail, -1, L, run, ctx, err);
}

/* each kind's name and the arguments it writes (bit i: argument i) */
static const struct { const char *name; unsigned writes; } kinds[OP_KINDS] = {
    [OP_ENCODER] = {"encoder", 1}, [OP_DECODE_EMBED] = {"decode embed", 1}, [OP_LAYERNORM] = {"layernorm", 7},
    [OP_RESIDUAL_LAYERNORM] = {"residual+layernorm", 15}, [OP_MATMUL] = {"matmul", 1 | 16},
    [OP_FC_GELU] = {"fc+gelu", 3}, [OP_KERNEL] = {"kernel", 1}, [OP_KV_APPEND] = {"kv append", 3},
    [OP_ATTENTION] = {"attention", 3}, [OP_DECODE_ATTENTION] = {"decode attention", 7 | 32},
    [OP_LN_MATMUL] = {"layernorm+matmul", 1}, [OP_MATMUL_RESIDUAL] = {"matmul+residual", 1},
    [OP_ZERO] = {"zero", 1}, [OP_LAYERNORM_BACKWARD] = {"layernorm backward", 7 | 256},
    [OP_MATMUL_DINP] = {"matmul dinp", 1}, [OP_MATMUL_DW] = {"matmul dW", 1}, [OP_BIAS_BACKWARD] = {"bias backward", 1},
    [OP_GELU_BACKWARD_BIAS] = {"gelu backward+bias", 5}, [OP_FCPROJ_DGELU] = {"fcproj dinp+dgelu", 1},
    [OP_FC_BIAS_REDUCE] = {"fc bias reduce", 1}, [OP_ATTENTION_BACKWARD] = {"attention backward", 1 | 32},
    [OP_ENCODER_BACKWARD] = {"encoder backward", 3}, [OP_GRAD_READY] = {"grad ready", 0}, [OP_FORK] = {"fork", 0},
    [OP_MARK] = {"mark", 0}, [OP_WAIT] = {"wait", 0},
};

const char *schedule_kind_name(int kind) { return kind >= 0 && kind < OP_KINDS ? kinds[kind].name : "?"; }

/* OP_KERNEL: the arguments its declaration writes (the pointers not declared const) */
static unsigned kernel_writes(const KernelDecl *k) {
    unsigned w = 0;
    for (int i = 0, j = 0; i < KERNEL_MAX_PARAMS && k->params[i].name; i++) {
        KernelParamType t = k->params[i].type;
        if (t == KP_INT || t == KP_I64 || t == KP_FLOAT || t == KP_TMAP) continue;
        if (t == KP_X || t == KP_F32 || t == KP_I32 || t == KP_U64) w |= 1u << j;
        j++;
    }
    return w;
}

static void write_ref(FILE *f, const SchedRef *r, const Plan *p) {
    static const char *const at[] = {"", "[l]", "[l+1]", "[l-1]", "[L-1]"};
    const char *name = r->space == REF_BUF ? p->memory.buffers[r->id].name : gpt2_param_names[r->id];
    fprintf(f, " %s%s%s", r->space == REF_GRAD ? "d" : "", name ? name : "?", at[r->layer]);
}

static void write_list(FILE *f, const char *what, const SchedList *list, const Plan *p) {
    static const char *const when[] = {"", " (l=0)", " (l>0)", " (l=L-1)", " (l<L-1)"};
    static const char *const marks[] = {"dresidual", "dfch", "dqkv", "done", "-"};
    for (int i = 0; i < list->n; i++) {
        const SchedOp *op = &list->ops[i];
        fprintf(f, "%-16s %-24s %-19s", i ? "" : what, op->name, kinds[op->kind].name);
        if (op->mm >= 0) fprintf(f, " matmul %s:", p->matmuls[op->mm].name);
        if (op->kernel) fprintf(f, " %s:", op->kernel->name);
        if (op->kind == OP_MARK || op->kind == OP_WAIT || (op->kind == OP_GRAD_READY && op->mark != SCHED_NO_MARK))
            fprintf(f, " mark %s", marks[op->mark]);
        unsigned writes = op->kernel ? kernel_writes(op->kernel) : kinds[op->kind].writes;
        for (int w = 1; w >= 0; w--) {   /* what it writes, then what it reads */
            int any = 0;
            for (int a = 0; a < SCHED_MAX_ARGS; a++)
                if (op->arg[a].space != REF_NONE && !!(writes >> a & 1) == w) {
                    if (!any++) fprintf(f, w ? " writes" : " reads");
                    write_ref(f, &op->arg[a], p);
                }
        }
        if (op->n) fprintf(f, " n=%lld", op->n);
        fprintf(f, "%s\n", when[op->when]);
    }
}

void schedule_write(FILE *f, const Plan *p) {
    const OpSchedule *s = &p->schedule;
    fprintf(f, "\n# the step's ops in order (gen/schedule.c); the block runs per layer l, those marked (l...) on those layers\n");
    write_list(f, "forward", &s->forward.head, p);
    write_list(f, "  layer l=0..", &s->forward.block, p);
    write_list(f, "  then", &s->forward.tail, p);
    if (p->step.kind != STEP_TRAIN) return;
    fprintf(f, "# the classifier's chunks (logits, losses, their gradient into dlnf and dwte), then\n");
    write_list(f, "backward", &s->backward.head, p);
    write_list(f, "  layer l=L-1..", &s->backward.block, p);
    write_list(f, "  then", &s->backward.tail, p);
    write_list(f, "embeddings", &s->embed_backward, p);
}
