/* test_schedule: the plan's op lists (gen/schedule.h) against the step that runtime/cuda/step.c ran before the
   schedule was data. The "old" functions below restate that step.c (forward_layer, backward_layer,
   linear_layernorm_backward, weight_grads, backward_layers, backward_tail, decode.c's step) call by call: each call
   as the op kind it became, its profile name, its matmul, and the buffers and tensors of its arguments with their
   absolute layer; the side stream's calls (side_begin, side_end, wait_side) where the plan has the side stream. The
   plan's lists, expanded layer by layer (schedule_run_phase), must give the same calls in the same order, for
   configs/tiny.lua's training step at recompute 0, 1 and 2, each GELU path, one and two streams, and its forward,
   prefill and decode plans. Runs from the repository root. */
#include "gen/config.h"
#include "tests/check.h"
#include "gen/plan.h"
#include "gen/schedule.h"
#include "kernel_ids.h"
#include "runtime/backend.h"
#include "common/rng.h"
#include <stdlib.h>

typedef struct { int space, id, layer; } Ref;   /* a SchedRef with its layer resolved */
typedef struct {
    int kind, mm, mark, kernel_id;
    long long n;
    const char *name;
    Ref a[SCHED_MAX_ARGS];
} Call;
typedef struct { int n; Call calls[2048]; } Trace;

static Config cfg;
static Plan plan;
static Trace got, want;

static void emit(Trace *t, int kind, int mm, const char *name, long long n, int mark, const Ref *a, int na) {
    if (t->n == (int)(sizeof t->calls / sizeof t->calls[0])) { fprintf(stderr, "trace full\n"); exit(1); }
    Call *c = &t->calls[t->n++];
    *c = (Call){kind, mm, mark, -1, n, name, {{0}}};
    for (int i = 0; i < na; i++) c->a[i] = a[i];
}

/* ---- the plan's lists, expanded ---- */
static int record(void *ctx, const SchedOp *op, int l, Err *err) {
    (void)err;
    Ref a[SCHED_MAX_ARGS] = {{0}};
    for (int i = 0; i < SCHED_MAX_ARGS; i++)
        if (op->arg[i].space != REF_NONE)
            a[i] = (Ref){op->arg[i].space, op->arg[i].id, schedule_layer(&op->arg[i], l, plan.model.n_layer)};
    emit(ctx, op->kind, op->mm, op->name, op->n, op->mark, a, SCHED_MAX_ARGS);
    ((Trace *)ctx)->calls[((Trace *)ctx)->n - 1].kernel_id = op->kernel_id;
    if (op->kind == OP_KERNEL) {   /* as many pointer arguments as the declaration has pointer parameters */
        int ptrs = 0, refs = 0;
        for (int i = 0; i < KERNEL_MAX_PARAMS && op->kernel->params[i].name; i++)
            ptrs += op->kernel->params[i].type != KP_INT && op->kernel->params[i].type != KP_I64;
        while (refs < SCHED_MAX_ARGS && op->arg[refs].space != REF_NONE) refs++;
        CHECK(ptrs == refs && op->kernel == plan.kernels[op->kernel_id].decl, "%s: %d arguments for kernel %s's %d pointers",
              op->name, refs, op->kernel->name, ptrs);
    }
    return 0;
}

/* ---- the old step.c, restated ---- */
#define B(id, l) ((Ref){REF_BUF, (id), (l)})
#define P(id, l) ((Ref){REF_PARAM, (id), (l)})
#define G(id, l) ((Ref){REF_GRAD, (id), (l)})
#define N0 ((Ref){0, 0, 0})
#define CALL(kind, mm, name, ...) \
    emit(&want, kind, mm, name, 0, SCHED_NO_MARK, (const Ref[]){__VA_ARGS__}, (int)(sizeof((const Ref[]){__VA_ARGS__}) / sizeof(Ref)))
#define CALL_N(kind, name, n, ...) \
    emit(&want, kind, -1, name, n, SCHED_NO_MARK, (const Ref[]){__VA_ARGS__}, (int)(sizeof((const Ref[]){__VA_ARGS__}) / sizeof(Ref)))

/* the gelu_forward kernel: launch_gelu_forward(out, inp, n = B*T*n_ffn) */
static void gelu_forward(const char *name, Ref out, Ref inp) {
    emit(&want, OP_KERNEL, -1, name, (long long)plan.step.B * plan.step.T * gpt2_ffn(&plan.model), SCHED_NO_MARK,
         (const Ref[]){out, inp}, 2);
    want.calls[want.n - 1].kernel_id = K_GELU_FORWARD;
}

static int side(void) { return plan.streams >= 2; }
static void side_begin(void) { if (side()) emit(&want, OP_FORK, -1, "fork", 0, SCHED_NO_MARK, NULL, 0); }
static void side_end(int m) { if (side()) emit(&want, OP_MARK, -1, "mark", 0, m, NULL, 0); }
static void wait_side(int m) { if (side()) emit(&want, OP_WAIT, -1, "wait", 0, m, NULL, 0); }
static Ref residual_in(int l) { return l == 0 ? B(BUF_ENCODED, 0) : B(BUF_RESIDUAL3, l - 1); }

static void old_forward_layer(int l) {
    int L = plan.model.n_layer;
    if (l == 0)
        CALL(OP_LAYERNORM, -1, "layernorm forward", B(BUF_LN1, l), B(BUF_LN1_MEAN, 0), B(BUF_LN1_RSTD, 0), residual_in(0),
             P(P_LN1W, 0), P(P_LN1B, 0));
    CALL(OP_MATMUL, MM_QKV, "matmul qkv", B(BUF_QKV, l), B(BUF_LN1, l), P(P_QKVW, l), P(P_QKVB, l), N0);
    if (plan.step.kind == STEP_DECODE) {
        CALL(OP_DECODE_ATTENTION, -1, "decode attention", B(BUF_ATTY, l), B(BUF_KCACHE, l), B(BUF_VCACHE, l), B(BUF_QKV, l),
             B(BUF_DECODE_POS, 0), B(BUF_ATT_PARTIAL, 0));
    } else {
        if (plan.step.fills_cache)
            CALL(OP_KV_APPEND, -1, "kv append", B(BUF_KCACHE, l), B(BUF_VCACHE, l), B(BUF_QKV, l), B(BUF_DECODE_POS, 0));
        CALL(OP_ATTENTION, -1, "attention forward", B(BUF_ATTY, l), B(BUF_ATT_STATS, l), B(BUF_QKV, l));
    }
    CALL(OP_MATMUL, MM_ATTPROJ, "matmul attproj", B(BUF_TMP, 0), B(BUF_ATTY, l), P(P_ATTPROJW, l), P(P_ATTPROJB, l), N0);
    CALL(OP_RESIDUAL_LAYERNORM, -1, "layernorm forward", B(BUF_RESIDUAL2, l), B(BUF_LN2, l), B(BUF_LN2_MEAN, l),
         B(BUF_LN2_RSTD, l), residual_in(l), B(BUF_TMP, 0), P(P_LN2W, l), P(P_LN2B, l));
    if (gelu_fused(plan.gelu)) {
        CALL(OP_FC_GELU, -1, "matmul fc+gelu", B(BUF_FCH, l), B(BUF_FCH_GELU, l), B(BUF_LN2, l), P(P_FCW, l), P(P_FCB, l));
    } else if (gelu_forward_in_kernel(plan.gelu)) {
        CALL(OP_MATMUL, MM_FC, "matmul fc", B(BUF_FCH, l), B(BUF_LN2, l), P(P_FCW, l), P(P_FCB, l), N0);
        gelu_forward("gelu forward", B(BUF_FCH_GELU, l), B(BUF_FCH, l));
    } else {
        CALL(OP_MATMUL, MM_FC, "matmul fc+gelu", B(BUF_FCH_GELU, l), B(BUF_LN2, l), P(P_FCW, l), P(P_FCB, l), B(BUF_FCH, l));
    }
    CALL(OP_MATMUL, MM_FCPROJ, "matmul fcproj", B(BUF_TMP, 0), B(BUF_FCH_GELU, l), P(P_FCPROJW, l), P(P_FCPROJB, l), N0);
    if (l + 1 < L)
        CALL(OP_RESIDUAL_LAYERNORM, -1, "layernorm forward", B(BUF_RESIDUAL3, l), B(BUF_LN1, l + 1), B(BUF_LN1_MEAN, l + 1),
             B(BUF_LN1_RSTD, l + 1), B(BUF_RESIDUAL2, l), B(BUF_TMP, 0), P(P_LN1W, l + 1), P(P_LN1B, l + 1));
    else
        CALL(OP_RESIDUAL_LAYERNORM, -1, "layernorm forward", B(BUF_RESIDUAL3, l), B(BUF_LNF, 0), B(BUF_LNF_MEAN, 0),
             B(BUF_LNF_RSTD, 0), B(BUF_RESIDUAL2, l), B(BUF_TMP, 0), P(P_LNFW, 0), P(P_LNFB, 0));
}

/* a decode step of few rows (Plan.decode_linear): each LayerNorm inside the matmul after it, each residual add
   inside the matmul before it, the final LayerNorm inside the classifier */
static void fused_decode_layer(int l) {
    CALL(OP_LN_MATMUL, MM_QKV, "layernorm+matmul qkv", B(BUF_QKV, l), residual_in(l), P(P_LN1W, l), P(P_LN1B, l),
         P(P_QKVW, l), P(P_QKVB, l));
    CALL(OP_DECODE_ATTENTION, -1, "decode attention", B(BUF_ATTY, l), B(BUF_KCACHE, l), B(BUF_VCACHE, l), B(BUF_QKV, l),
         B(BUF_DECODE_POS, 0), B(BUF_ATT_PARTIAL, 0));
    CALL(OP_MATMUL_RESIDUAL, MM_ATTPROJ, "matmul attproj+residual", B(BUF_RESIDUAL2, l), B(BUF_ATTY, l),
         P(P_ATTPROJW, l), P(P_ATTPROJB, l), residual_in(l));
    CALL(OP_LN_MATMUL, MM_FC, "layernorm+matmul fc+gelu", B(BUF_FCH_GELU, l), B(BUF_RESIDUAL2, l), P(P_LN2W, l),
         P(P_LN2B, l), P(P_FCW, l), P(P_FCB, l));
    CALL(OP_MATMUL_RESIDUAL, MM_FCPROJ, "matmul fcproj+residual", B(BUF_RESIDUAL3, l), B(BUF_FCH_GELU, l),
         P(P_FCPROJW, l), P(P_FCPROJB, l), B(BUF_RESIDUAL2, l));
    if (l == plan.model.n_layer - 1)
        CALL(OP_LN_MATMUL, MM_CLASSIFIER, "layernorm+matmul classifier", B(BUF_LOGITS, 0), B(BUF_RESIDUAL3, l),
             P(P_LNFW, 0), P(P_LNFB, 0), P(P_WTE, 0), N0);
}

/* step.c's forward_from_inputs (op_encoder_forward, the layers), or decode.c's step_ops up to the draw */
static void old_forward(void) {
    if (plan.step.kind == STEP_DECODE)
        CALL(OP_DECODE_EMBED, -1, "decode embed", B(BUF_ENCODED, 0), B(BUF_INPUTS, 0), P(P_WTE, 0), P(P_WPE, 0),
             B(BUF_DECODE_POS, 0));
    else
        CALL(OP_ENCODER, -1, "encoder forward", B(BUF_ENCODED, 0), B(BUF_INPUTS, 0), P(P_WTE, 0), P(P_WPE, 0));
    if (plan.decode_linear) {
        for (int l = 0; l < plan.model.n_layer; l++) fused_decode_layer(l);
        return;
    }
    for (int l = 0; l < plan.model.n_layer; l++) old_forward_layer(l);
    if (plan.step.kind == STEP_DECODE)
        CALL(OP_MATMUL, MM_CLASSIFIER, "matmul classifier", B(BUF_LOGITS, 0), B(BUF_LNF, 0), P(P_WTE, 0), N0, N0);
}

static void weight_grads(const char *name, int dw_id, Ref dW, Ref db, Ref dout, Ref inp, int OC, int mark) {
    side_begin();
    CALL(OP_MATMUL_DW, dw_id, name, dW, dout, inp);
    if (db.space) CALL_N(OP_BIAS_BACKWARD, "bias backward", OC, db, dout);
    side_end(mark);
}

static void linear_layernorm_backward(const char *name, int dinp_id, int dw_id, Ref dW, Ref db, Ref dout, Ref W, Ref ln,
                                      Ref inp, Ref lnw, Ref lnb, Ref dlnw, Ref dlnb, Ref mean, Ref rstd, int mark) {
    Ref dres = B(BUF_DRESIDUAL, 0), dln = B(BUF_DLN, 0);
    int OC = plan.matmuls[dinp_id].k, rec2 = plan.step.recompute >= 2;
    if (!rec2) weight_grads(name, dw_id, dW, db, dout, ln, OC, mark);
    CALL(OP_MATMUL_DINP, dinp_id, name, dln, dout, W, N0);
    wait_side(MARK_DRES);
    CALL(OP_LAYERNORM_BACKWARD, -1, "layernorm backward", dres, dlnw, dlnb, dln, inp, lnw, mean, rstd, rec2 ? ln : N0,
         rec2 ? lnb : N0);
    if (rec2) weight_grads(name, dw_id, dW, db, dout, ln, OC, mark);
}

static void old_backward_layer(int l) {
    Ref dres = B(BUF_DRESIDUAL, 0), dfch = B(BUF_DFCH, 0), fch = B(BUF_FCH, l), fchg = B(BUF_FCH_GELU, l);
    int gelu_kernel = gelu_backward_in_kernel(plan.gelu), fused = gelu_fused(plan.gelu), C = plan.model.n_embd;
    side_begin();
    if (plan.step.recompute >= 1) gelu_forward("gelu recompute", fchg, fch);
    CALL(OP_MATMUL_DW, MM_FCPROJ_DW, gelu_kernel ? "matmul bwd fcproj" : "matmul bwd fcproj+dgelu", G(P_FCPROJW, l), dres,
         fchg);
    CALL_N(OP_BIAS_BACKWARD, "bias backward", C, G(P_FCPROJB, l), dres);
    side_end(MARK_DRES);
    wait_side(MARK_DFCH);
    if (fused) {
        CALL(OP_FCPROJ_DGELU, -1, "matmul bwd fcproj+dgelu", dfch, dres, P(P_FCPROJW, l), fch);
        CALL(OP_FC_BIAS_REDUCE, -1, "bias backward", G(P_FCB, l), dfch);   /* dfch: the CPU's reading of the partials */
    } else {
        CALL(OP_MATMUL_DINP, MM_FCPROJ_DINP, gelu_kernel ? "matmul bwd fcproj" : "matmul bwd fcproj+dgelu", dfch, dres,
             P(P_FCPROJW, l), gelu_kernel ? N0 : fch);
        if (gelu_kernel) CALL(OP_GELU_BACKWARD_BIAS, -1, "gelu backward", dfch, fch, G(P_FCB, l));
    }
    linear_layernorm_backward("matmul bwd fc", MM_FC_DINP, MM_FC_DW, G(P_FCW, l), gelu_kernel || fused ? N0 : G(P_FCB, l),
                              dfch, P(P_FCW, l), B(BUF_LN2, l), B(BUF_RESIDUAL2, l), P(P_LN2W, l), P(P_LN2B, l),
                              G(P_LN2W, l), G(P_LN2B, l), B(BUF_LN2_MEAN, l), B(BUF_LN2_RSTD, l), MARK_DFCH);
    weight_grads("matmul bwd attproj", MM_ATTPROJ_DW, G(P_ATTPROJW, l), G(P_ATTPROJB, l), dres, B(BUF_ATTY, l), C, MARK_DRES);
    CALL(OP_MATMUL_DINP, MM_ATTPROJ_DINP, "matmul bwd attproj", B(BUF_DATTY, 0), dres, P(P_ATTPROJW, l), N0);
    wait_side(MARK_DQKV);
    CALL(OP_ATTENTION_BACKWARD, -1, "attention backward", B(BUF_DQKV, 0), B(BUF_QKV, l), B(BUF_ATTY, l), B(BUF_DATTY, 0),
         B(BUF_ATT_STATS, l), B(BUF_ATT_DDOT, 0));
    linear_layernorm_backward("matmul bwd qkv", MM_QKV_DINP, MM_QKV_DW, G(P_QKVW, l), G(P_QKVB, l), B(BUF_DQKV, 0),
                              P(P_QKVW, l), B(BUF_LN1, l), residual_in(l), P(P_LN1W, l), P(P_LN1B, l), G(P_LN1W, l),
                              G(P_LN1B, l), B(BUF_LN1_MEAN, l), B(BUF_LN1_RSTD, l), MARK_DQKV);
}

/* backward_layers: the memset of dresidual, the final LayerNorm's backward, the layers (each with its grad_ready,
   after a wait for the dqkv mark), the join */
static void old_backward(void) {
    int L = plan.model.n_layer;
    CALL_N(OP_ZERO, "zero dresidual", (long long)plan.step.B * plan.step.T * plan.model.n_embd, B(BUF_DRESIDUAL, 0));
    CALL(OP_LAYERNORM_BACKWARD, -1, "layernorm backward", B(BUF_DRESIDUAL, 0), G(P_LNFW, 0), G(P_LNFB, 0), B(BUF_DLN, 0),
         B(BUF_RESIDUAL3, L - 1), P(P_LNFW, 0), B(BUF_LNF_MEAN, 0), B(BUF_LNF_RSTD, 0), N0, N0);
    for (int l = L - 1; l >= 0; l--) {
        old_backward_layer(l);
        emit(&want, OP_GRAD_READY, -1, "grad ready", 0, MARK_DQKV, NULL, 0);
    }
    side_end(MARK_DONE);
    wait_side(MARK_DONE);
}

static void old_embed_backward(void) {
    CALL(OP_ENCODER_BACKWARD, -1, "encoder backward", G(P_WTE, 0), G(P_WPE, 0), B(BUF_DRESIDUAL, 0), B(BUF_INPUTS, 0));
    emit(&want, OP_GRAD_READY, -1, "grad ready", 0, SCHED_NO_MARK, NULL, 0);
}

/* ---- comparing ---- */
static void describe(char *out, size_t n, const Call *c) {
    int k = snprintf(out, n, "%s [%s] mm %d kernel %d mark %d n %lld:", c->name, schedule_kind_name(c->kind), c->mm,
                     c->kernel_id, c->mark, c->n);
    for (int i = 0; i < SCHED_MAX_ARGS && k < (int)n; i++)
        k += snprintf(out + k, n - k, " %d.%d.%d", c->a[i].space, c->a[i].id, c->a[i].layer);
}

static int same(const Call *a, const Call *b) {
    if (a->kind != b->kind || a->mm != b->mm || a->kernel_id != b->kernel_id || a->mark != b->mark || a->n != b->n || strcmp(a->name, b->name)) return 0;
    return !memcmp(a->a, b->a, sizeof a->a);
}

static void compare(const char *what) {
    int n = got.n < want.n ? got.n : want.n;
    for (int i = 0; i < n; i++)
        if (!same(&got.calls[i], &want.calls[i])) {
            char g[512], w[512];
            describe(g, sizeof g, &got.calls[i]);
            describe(w, sizeof w, &want.calls[i]);
            CHECK(0, "%s: call %d: the schedule has %s; step.c had %s", what, i, g, w);
            return;
        }
    CHECK(got.n == want.n, "%s: %d calls in the schedule, step.c made %d", what, got.n, want.n);
}

static void check_plan(const char *what) {
    char name[256];
    Err err = {{0}};
    got.n = want.n = 0;
    CHECK_OK(schedule_run_phase(&plan.schedule.forward, plan.model.n_layer, record, &got, &err), &err);
    old_forward();
    snprintf(name, sizeof name, "%s, forward", what);
    compare(name);
    got.n = want.n = 0;
    if (plan.step.kind == STEP_TRAIN) {
        CHECK_OK(schedule_run_phase(&plan.schedule.backward, plan.model.n_layer, record, &got, &err), &err);
        CHECK_OK(schedule_run_list(&plan.schedule.embed_backward, -1, plan.model.n_layer, record, &got, &err), &err);
        old_backward();
        old_embed_backward();
    } else {
        CHECK(plan.schedule.backward.block.n == 0 && plan.schedule.embed_backward.n == 0, "%s: a backward", what);
    }
    snprintf(name, sizeof name, "%s, backward", what);
    compare(name);
}

static int load(const char *const *sets, int n) {
    Err err = {{0}};
    if (config_load(&cfg, "configs/tiny.lua", sets, n, &err)) { CHECK(0, "tiny.lua: %s", err.msg); return -1; }
    return 0;
}

static void test_train_steps(void) {
    static const char *const gelu[] = {"train.gelu=epilogue", "train.gelu=kernel", "train.gelu=split", "train.gelu=fused"};
    static const char *const rec[] = {"train.recompute=0", "train.recompute=1", "train.recompute=2"};
    static const char *const streams[] = {"train.streams=1", "train.streams=2"};
    int cases = 0;
    for (int g = 0; g < 4; g++)
        for (int r = 0; r < 3; r++)
            for (int s = 0; s < 2; s++) {
                const char *sets[] = {gelu[g], rec[r], streams[s], "precision=bf16"};   /* fused: 16 bits on sm_90 */
                Err err = {{0}};
                if (load(sets, 4)) return;
                CHECK_OK(plan_make_train(&plan, &cfg, "sm_90", NULL, &err), &err);
                char what[128];
                snprintf(what, sizeof what, "train, %s, %s, %s", gelu[g], rec[r], streams[s]);
                CHECK(plan.gelu == (GeluPath)(GELU_EPILOGUE + g) && plan.step.recompute == r && plan.streams == s + 1,
                      "%s: the plan has gelu %d, recompute %d, streams %d", what, plan.gelu, plan.step.recompute,
                      plan.streams);
                check_plan(what);
                cases++;
            }
    CHECK(cases == 24, "%d cases", cases);
}

/* plan_set_gelu (the tuning database's, the tuner's path) makes the schedule again */
static void test_set_gelu_remakes(void) {
    const char *sets[] = {"train.gelu=epilogue"};
    Err err = {{0}};
    if (load(sets, 1)) return;
    CHECK_OK(plan_make_train(&plan, &cfg, "sm_90", NULL, &err), &err);
    plan_set_gelu(&plan, GELU_KERNEL, "test");
    check_plan("train, epilogue set to kernel");
}

static void test_forward_steps(void) {
    Err err = {{0}};
    if (load(NULL, 0)) return;
    CHECK_OK(plan_make_sample(&plan, &cfg, "sm_90", &err), &err);
    check_plan("sample (decode, 1 row)");
    CHECK_OK(plan_make_decode(&plan, &cfg, 3, 1, "sm_90", &err), &err);
    check_plan("decode, 3 rows");
    CHECK_OK(plan_make_prefill(&plan, &cfg, 3, 20, 1, "sm_90", NULL, &err), &err);
    check_plan("prefill");
    CHECK(plan.schedule.forward.block.n == 11, "prefill: %d ops in a layer (two each for the first and last layers)", plan.schedule.forward.block.n);
    StepShape s = step_forward(&cfg, 2, 32, 0);
    CHECK_OK(plan_make(&plan, &cfg, "forward", &s, "sm_90", NULL, &err), &err);
    check_plan("forward");
}

/* a relative's decode step of few rows takes the decode linears too: its norm (RMSNorm: no norm bias) and MLP inside
   them (SwiGLU: the gate's weight beside fc's), no biases where the model has none, its untied head in the classifier,
   QK-norm and RoPE inside the attention (qkv's matmul writes qkv, the attention takes the norms' weights), the soft-cap
   inside the classifier (no op after it); never the persistent kernel (GPT-2's) */
static void test_relatives_decode_block(void) {
    static const char *const llama[] = {"model.norm=rmsnorm", "model.position=rope", "model.mlp=swiglu", "model.n_ffn=96",
                                        "model.n_kv_head=1", "model.bias=false", "model.tie_embeddings=false"};
    static const char *const nano[] = {"model.norm=rmsnorm", "model.position=rope", "model.mlp=relu2", "model.qk_norm=true",
                                       "model.bias=false", "model.tie_embeddings=false", "model.logit_softcap=15",
                                       "model.n_head=2"};   /* head size 64: QK-norm also rotates */
    for (int m = 0; m < 2; m++) {
        Err err = {{0}};
        if (load(m ? nano : llama, m ? 8 : 7)) return;
        cfg.run.decode = DECODE_PERSISTENT;
        CHECK_OK(plan_make_sample(&plan, &cfg, "sm_90", &err), &err);
        const SchedList *b = &plan.schedule.forward.block;
        static const int want[] = {OP_LN_MATMUL, OP_LN_MATMUL, OP_DECODE_ATTENTION, OP_MATMUL_RESIDUAL, OP_MATMUL_RESIDUAL,
                                   OP_LN_MATMUL, OP_MATMUL_RESIDUAL, OP_LN_MATMUL};
        int ok = plan.decode_linear && !plan.decode_persistent && b->n == 8;
        for (int i = 0; ok && i < 8; i++) ok = b->ops[i].kind == want[i];
        CHECK(ok, "%s: decode_linear %d, persistent %d, %d ops in a layer", m ? "nano" : "llama", plan.decode_linear,
              plan.decode_persistent, b->n);
        if (!ok) continue;
        const SchedOp *qkv = &b->ops[0], *att = &b->ops[2], *fc = &b->ops[5], *cls = &b->ops[7];
        CHECK(qkv->arg[0].space == REF_BUF && qkv->arg[0].id == BUF_QKV && att->arg[3].id == BUF_QKV,
              "qkv's matmul writes qkv, which the attention reads");
        CHECK(m ? att->arg[6].space == REF_PARAM && att->arg[6].id == P_QNORMW && att->arg[7].id == P_KNORMW
                : att->arg[6].space == REF_NONE, "%s: the attention's QK-norm weights", m ? "nano" : "llama");
        CHECK(qkv->arg[3].space == REF_NONE && qkv->arg[5].space == REF_NONE && fc->arg[5].space == REF_NONE &&
              cls->arg[3].space == REF_NONE, "RMSNorm without biases: no norm bias nor bias arguments");
        CHECK(cls->arg[4].space == REF_PARAM && cls->arg[4].id == P_LMHEAD, "the classifier reads the untied head");
        CHECK(m ? fc->arg[6].space == REF_NONE : fc->arg[6].space == REF_PARAM && fc->arg[6].id == P_FCGW,
              "%s: fc's gate weight", m ? "ReLU^2" : "SwiGLU");
        CHECK(!strcmp(fc->name, m ? "rmsnorm+matmul fc+relu2" : "rmsnorm+matmul fc+swiglu"), "fc's op is %s", fc->name);
        const SchedList *t = &plan.schedule.forward.tail;
        int softcap = 0;
        for (int i = 0; i < t->n; i++) softcap += t->ops[i].kind == OP_SOFTCAP;
        CHECK(softcap == 0, "%s: %d soft-cap ops after the classifier", m ? "nano" : "llama", softcap);
    }
}

/* plan.txt's section lists every op once */
static void test_written(void) {
    Err err = {{0}};
    if (load(NULL, 0)) return;
    CHECK_OK(plan_make_train(&plan, &cfg, "sm_90", NULL, &err), &err);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    schedule_write(f, &plan);
    fclose(f);
    const OpSchedule *s = &plan.schedule;
    int ops = s->forward.head.n + s->forward.block.n + s->forward.tail.n + s->backward.head.n + s->backward.block.n +
              s->backward.tail.n + s->embed_backward.n, lines = 0;
    for (char *p = text; *p; p++) lines += *p == '\n';
    CHECK(lines == ops + 3, "%d lines for %d ops (and three of comment)", lines, ops);
    CHECK(strstr(text, "matmul qkv") && strstr(text, "writes qkv[l] reads ln1[l] qkvw[l] qkvb[l]"),
          "no qkv matmul line: %.400s", text);
    free(text);
}

/* The CPU backend runs every plan's list to the same numbers: a training micro-step of each GELU path at recompute 0
   and 2 gives the bits of the epilogue path at recompute 0 (the CPU's fusions are the same math in steps) */
/* relu2: the model a relative with a ReLU^2 MLP and no biases (train.gelu = "fused": fc_gemm's ReLU^2 path) */
static int micro_step(const char *gelu, const char *rec, int relu2, float *grads, size_t *np, float *loss) {
    const char *sets[] = {gelu, rec, "precision=bf16", "model.vocab_size=300", "train.batch_size=2", "train.seq_len=16",
                          "train.total_batch_size=32", "model.n_layer=2", "model.mlp=relu2", "model.bias=false"};
    Err err = {{0}};
    if (load(sets, relu2 ? 10 : 8)) return -1;
    CHECK_OK(plan_make_train(&plan, &cfg, "sm_90", NULL, &err), &err);
    BackendOptions o = {&plan, 0, 0, 0, NULL, NULL, NULL};
    Backend *be = cpu_backend_create(&o, &err);
    if (!be) { CHECK(0, "%s %s: %s", gelu, rec, err.msg); return -1; }
    *np = be->num_params;
    float *params = xmalloc(*np * sizeof(float));
    uint64_t rng = 7;
    for (size_t i = 0; i < *np; i++) params[i] = 0.1f * (rng_uniform(&rng) - 0.5f);
    int32_t in[32], tg[32];
    for (int i = 0; i < 32; i++) { in[i] = (i * 37) % 300; tg[i] = (i * 11 + 5) % 300; }
    BackendRun zero = {.phase = BACKEND_ZERO_GRADS},
               micro = {.phase = BACKEND_FORWARD_BACKWARD, .inputs = in, .targets = tg, .grad_scale = 1.0f, .loss = loss};
    int rc = be->write(be, BACKEND_PARAMS, params, &err) || be->run(be, &zero, &err) || be->run(be, &micro, &err) ||
             (grads && be->read(be, BACKEND_GRADS, 0, grads, &err));
    CHECK(!rc, "%s %s: %s", gelu, rec, err.msg);
    be->destroy(be);
    free(params);
    return rc ? -1 : 0;
}

static void test_cpu_paths_agree(void) {
    static const char *const gelu[] = {"train.gelu=epilogue", "train.gelu=kernel", "train.gelu=split", "train.gelu=fused"};
    size_t np = 0;
    float loss0, loss;
    if (micro_step(gelu[0], "train.recompute=0", 0, NULL, &np, &loss0)) return;
    float *want_g = xcalloc(np, sizeof(float)), *got_g = xcalloc(np, sizeof(float));
    if (micro_step(gelu[0], "train.recompute=0", 0, want_g, &np, &loss0)) goto done;
    for (int g = 0; g < 4; g++)
        for (int r = 0; r <= 2; r += 2) {
            const char *rec = r ? "train.recompute=2" : "train.recompute=0";
            if (micro_step(gelu[g], rec, 0, got_g, &np, &loss)) goto done;
            CHECK(!memcmp(&loss, &loss0, sizeof loss) && !memcmp(got_g, want_g, np * sizeof(float)),
                  "%s %s: loss %.9g (epilogue, recompute 0: %.9g) or gradients differ", gelu[g], rec, loss, loss0);
        }
done:
    free(want_g);
    free(got_g);
}

/* a ReLU^2 relative's fused path (fc_gemm's ReLU^2: OP_FC_GELU and OP_FCPROJ_DGELU in place of the matmuls and
   the ReLU^2 ops, no bias reduce) gives the CPU the plain path's bits, and is the plan's where train.gelu asks */
static void test_cpu_relu2_fused_agrees(void) {
    size_t np = 0;
    float loss0, loss;
    if (micro_step("train.gelu=epilogue", "train.recompute=0", 1, NULL, &np, &loss0)) return;
    CHECK(plan.gelu == GELU_EPILOGUE, "relu2, epilogue: the plan has gelu %d", plan.gelu);
    float *want_g = xcalloc(np, sizeof(float)), *got_g = xcalloc(np, sizeof(float));
    if (micro_step("train.gelu=epilogue", "train.recompute=0", 1, want_g, &np, &loss0) ||
        micro_step("train.gelu=fused", "train.recompute=0", 1, got_g, &np, &loss))
        goto done;
    CHECK(plan.gelu == GELU_FUSED, "relu2, fused: the plan has gelu %d", plan.gelu);
    int fc = 0, relu2_ops = 0;
    for (int i = 0; i < plan.schedule.forward.block.n; i++) {
        fc += plan.schedule.forward.block.ops[i].kind == OP_FC_GELU;
        relu2_ops += plan.schedule.forward.block.ops[i].kind == OP_RELU2;
    }
    for (int i = 0; i < plan.schedule.backward.block.n; i++) {
        fc += plan.schedule.backward.block.ops[i].kind == OP_FCPROJ_DGELU;
        relu2_ops += plan.schedule.backward.block.ops[i].kind == OP_RELU2_BACKWARD;
        relu2_ops += plan.schedule.backward.block.ops[i].kind == OP_FC_BIAS_REDUCE;
    }
    CHECK(fc == 2 && relu2_ops == 0, "relu2, fused: %d fused ops (2 expected) and %d of the plain path's", fc, relu2_ops);
    CHECK(!memcmp(&loss, &loss0, sizeof loss) && !memcmp(got_g, want_g, np * sizeof(float)),
          "relu2, fused: loss %.9g (the plain path's %.9g) or gradients differ", loss, loss0);
done:
    free(want_g);
    free(got_g);
}

int main(int argc, char **argv) {
    check_filter = argc > 1 ? argv[1] : NULL;
    RUN(test_train_steps);
    RUN(test_cpu_relu2_fused_agrees);
    RUN(test_set_gelu_remakes);
    RUN(test_forward_steps);
    RUN(test_relatives_decode_block);
    RUN(test_written);
    RUN(test_cpu_paths_agree);
    return check_summary();
}
