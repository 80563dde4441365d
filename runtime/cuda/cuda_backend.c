/* cuda_backend: the Backend (runtime/backend.h) on one GPU: the plan's generated kernels plus cuBLASLt
   matmuls, over one arena holding parameters, gradients, optimizer state and activations.
   Activations follow the model of SPEC section 1 layer by layer; what the backward needs is kept per layer
   unless recompute says otherwise (1: GELU output recomputed, 2: LayerNorm outputs too). */
#include "runtime/backend.h"
#include "common/clock.h"
#include <stdio.h>
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/cuda_matmul.h"
#include "common/bf16.h"
#include "runtime/checkpoint.h"
#include "runtime/cuda/cuda_backend.h"
#include "gen/plan.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef CUdeviceptr dptr;

typedef struct {
    CudaDevice dev;
    Kernels ks;
    Matmul mm;
    Precision prec;
    size_t xs;                       /* bytes per floatX */
    int B, T, C, L, NH, HS, V, Vp, recompute, master;
    size_t np, psz[NUM_PARAM_TENSORS], poff[NUM_PARAM_TENSORS];
    dptr arena;
    size_t arena_bytes;
    /* parameters, gradients, optimizer */
    dptr params, grads, m, v, master_w;
    /* activations kept for the backward */
    dptr encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, att, residual2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu,
        residual3, lnf, lnf_mean, lnf_rstd, logits, losses;
    size_t ln_lstride, gelu_lstride;     /* elements between layers: 0 where recomputed into one buffer */
    /* scratch */
    dptr qkvr, preatt, vaccum, tmp, dresidual, dfch, dln, datty, dqkv, dqkvr, dvaccum, ln_scratch, bias_scratch, norm_partials;
    dptr inputs, targets, bucket_token, bucket_start, positions;
    /* kernels */
    const Kernel *enc_fwd, *enc_wpe, *enc_wte, *ln_fwd, *ln_res_fwd, *ln_bwd, *ln_bwd_reduce, *bias_partial, *bias_reduce,
        *perm, *unperm, *perm_bwd, *unperm_bwd, *sm_fwd, *sm_bwd, *gelu_fwd, *gelu_bwd, *cls, *norm, *adamw;
    unsigned vec_c;                  /* the templates' vec_for(C) */
    /* host side */
    int32_t *h_inputs, *h_count, *h_bucket_token, *h_bucket_start, *h_positions;
    float *h_losses, *h_partials;
    int n_buckets, have_targets, logits_valid;
} Cuda;

static Cuda *impl(Backend *be) { return (Cuda *)be->impl; }

static int ck(CUresult r, const char *what, Err *err) {
    if (r == CUDA_SUCCESS) return 0;
    char eb[256];
    return err_set(err, "%s: %s", what, cuda_err_string(r, eb, sizeof eb));
}

/* ---- arena ---- */
static size_t carve(size_t *off, size_t bytes) {
    size_t at = (*off + 255) & ~(size_t)255;
    *off = at + bytes;
    return at;
}

/* Lays out every buffer from base (0 for sizing). Returns the arena size. */
static size_t layout(Cuda *c, dptr base) {
    size_t off = 0, x = c->xs;
    size_t B = c->B, T = c->T, C = c->C, L = c->L, NH = c->NH, BT = B * T, Vp = c->Vp;
    size_t ln_layers = c->recompute >= 2 ? 1 : L, gelu_layers = c->recompute >= 1 ? 1 : L;
    c->ln_lstride = c->recompute >= 2 ? 0 : BT * C;
    c->gelu_lstride = c->recompute >= 1 ? 0 : BT * 4 * C;
#define BUF(field, bytes) c->field = base + carve(&off, (bytes))
    BUF(params, c->np * x);
    BUF(grads, c->np * x);
    BUF(m, c->np * 4);
    BUF(v, c->np * 4);
    if (c->master) BUF(master_w, c->np * 4); else c->master_w = 0;
    BUF(encoded, BT * C * x);
    BUF(ln1, ln_layers * BT * C * x);
    BUF(ln1_mean, L * BT * 4);
    BUF(ln1_rstd, L * BT * 4);
    BUF(qkv, L * BT * 3 * C * x);
    BUF(atty, L * BT * C * x);
    BUF(att, L * B * NH * T * T * x);
    BUF(residual2, L * BT * C * x);
    BUF(ln2, ln_layers * BT * C * x);
    BUF(ln2_mean, L * BT * 4);
    BUF(ln2_rstd, L * BT * 4);
    BUF(fch, L * BT * 4 * C * x);
    BUF(fch_gelu, gelu_layers * BT * 4 * C * x);
    BUF(residual3, L * BT * C * x);
    BUF(lnf, BT * C * x);
    BUF(lnf_mean, BT * 4);
    BUF(lnf_rstd, BT * 4);
    BUF(logits, BT * Vp * x);
    BUF(losses, BT * 4);
    BUF(qkvr, BT * 3 * C * x);
    BUF(vaccum, BT * C * x);
    BUF(tmp, BT * C * x);
    BUF(dresidual, BT * C * x);
    BUF(dln, BT * C * x);
    /* Buffers of the layers' backward only: nothing reads them before the classifier's backward has consumed
       the dlogits, so they share the logits buffer when they fit there. The forward needs no (B,NH,T,T)
       scratch: the scores go straight into att[l] and the softmax runs in place. */
    size_t bwd_sizes[6] = {B * NH * T * T * x, BT * 4 * C * x, BT * C * x, BT * 3 * C * x, BT * 3 * C * x, BT * C * x};
    size_t bwd_need = 0, boff = 0;
    for (int i = 0; i < 6; i++) carve(&bwd_need, bwd_sizes[i]);
    int share = bwd_need <= BT * Vp * x;
#define BWD(field, i) c->field = share ? c->logits + carve(&boff, bwd_sizes[i]) : base + carve(&off, bwd_sizes[i])
    BWD(preatt, 0);   /* datt / dpreatt */
    BWD(dfch, 1);
    BWD(datty, 2);
    BWD(dqkv, 3);
    BWD(dqkvr, 4);
    BWD(dvaccum, 5);
#undef BWD
    BUF(ln_scratch, (size_t)c->ln_bwd->pk->grid[0] * 2 * C * 4);
    BUF(bias_scratch, (size_t)c->bias_partial->pk->grid[1] * 4 * C * 4);
    BUF(norm_partials, (size_t)c->norm->pk->grid[0] * 4);
    BUF(inputs, BT * 4);
    BUF(targets, BT * 4);
    BUF(bucket_token, BT * 4);
    BUF(bucket_start, (BT + 1) * 4);
    BUF(positions, BT * 4);
#undef BUF
    return (off + 255) & ~(size_t)255;
}

/* ---- pointers into parameters / layers ---- */
static dptr param(Cuda *c, dptr base, int i, int l) {
    size_t per_layer = (i == P_WTE || i == P_WPE || i == P_LNFW || i == P_LNFB) ? 0 : c->psz[i] / c->L;
    return base + (c->poff[i] + (size_t)l * per_layer) * c->xs;
}
#define PW(i, l) param(c, c->params, (i), (l))
#define GW(i, l) param(c, c->grads, (i), (l))
static dptr at(Cuda *c, dptr base, size_t l, size_t layer_elems, size_t elem_bytes) { (void)c; return base + l * layer_elems * elem_bytes; }
#define BTC ((size_t)c->B * c->T * c->C)
#define BT_ ((size_t)c->B * c->T)

/* ---- GPT2GEN_PROFILE=1: synchronize around each op and add up its time (for breakdowns, not for speed) ---- */
#define PROF_MAX 32
typedef struct { const char *name; double seconds; } ProfEntry;
static int prof_on = -1;
static ProfEntry prof[PROF_MAX];
static int prof_n, prof_steps;
static double prof_start(void) {
    if (prof_on < 0) { const char *e = getenv("GPT2GEN_PROFILE"); prof_on = e && *e && strcmp(e, "0"); }
    if (!prof_on) return 0;
    cu.cuCtxSynchronize();
    return now_seconds();
}
static void prof_stop(const char *name, double t0) {
    if (!prof_on) return;
    cu.cuCtxSynchronize();
    double dt = now_seconds() - t0;
    for (int i = 0; i < prof_n; i++) if (!strcmp(prof[i].name, name)) { prof[i].seconds += dt; return; }
    if (prof_n < PROF_MAX) prof[prof_n++] = (ProfEntry){name, dt};
}
static void prof_print(void) {
    if (prof_on <= 0 || prof_steps == 0) return;
    double total = 0;
    for (int i = 0; i < prof_n; i++) total += prof[i].seconds;
    fprintf(stderr, "GPT2GEN_PROFILE: mean per training step over %d steps (ops synchronized one by one)\n", prof_steps);
    for (int i = 0; i < prof_n; i++)
        fprintf(stderr, "  %-28s %8.2f ms  %5.1f%%\n", prof[i].name, prof[i].seconds / prof_steps * 1e3, 100 * prof[i].seconds / total);
    fprintf(stderr, "  %-28s %8.2f ms\n", "total", total / prof_steps * 1e3);
}
#define OP(name, call) do { double t_ = prof_start(); if (call) return -1; prof_stop(name, t_); } while (0)

static int launch(Cuda *c, const Kernel *k, unsigned gx, unsigned gy, void **args, Err *err) {
    return kernels_launch(&c->ks, k, gx, gy, args, err);
}

/* ---- ops ---- */
static int op_layernorm(Cuda *c, dptr out, dptr mean, dptr rstd, dptr inp, dptr w, dptr b, Err *err) {
    void *a[] = {&out, &mean, &rstd, &inp, &w, &b};
    return launch(c, c->ln_fwd, 0, 0, a, err);
}
static int op_residual_layernorm(Cuda *c, dptr res, dptr out, dptr mean, dptr rstd, dptr x1, dptr x2, dptr w, dptr b, Err *err) {
    void *a[] = {&res, &out, &mean, &rstd, &x1, &x2, &w, &b};
    return launch(c, c->ln_res_fwd, 0, 0, a, err);
}
static int op_layernorm_backward(Cuda *c, dptr dinp, dptr dw, dptr db, dptr dout, dptr inp, dptr w, dptr mean, dptr rstd, Err *err) {
    void *a[] = {&dinp, &c->ln_scratch, &dout, &inp, &w, &mean, &rstd};
    if (launch(c, c->ln_bwd, 0, 0, a, err)) return -1;
    int n = (int)c->ln_bwd->pk->grid[0];
    void *r[] = {&dw, &db, &c->ln_scratch, &n};
    return launch(c, c->ln_bwd_reduce, 0, 0, r, err);
}
static int op_bias_backward(Cuda *c, dptr db, dptr dout, int OC, Err *err) {
    void *a[] = {&c->bias_scratch, &dout, &OC};
    if (launch(c, c->bias_partial, plan_ceil_div((size_t)OC, 32 * c->vec_c), 0, a, err)) return -1;
    void *r[] = {&db, &c->bias_scratch, &OC};
    return launch(c, c->bias_reduce, plan_ceil_div((size_t)OC, c->bias_reduce->pk->block[0]), 0, r, err);
}
/* out (N,OC) = inp (N,Cin) @ W (OC,Cin)^T + bias */
static int op_matmul(Cuda *c, dptr out, dptr inp, dptr W, dptr bias, int N, int Cin, int OC, Err *err) {
    return matmul_run(&c->mm, out, W, inp, bias, OC, N, Cin, 1, 0, 1, 0, 0, 0, 0, err);
}
/* dinp = alpha dout @ W (overwritten; times GELU'(pre) when pre is given); dW += alpha dout^T @ inp;
   db += column sums of dout (when db; alpha must be 1 then) */
static int op_matmul_backward(Cuda *c, dptr dinp, dptr dW, dptr db, dptr dout, dptr inp, dptr W, int N, int Cin, int OC,
                              float alpha, dptr pre, Err *err) {
    if (matmul_run_ex(&c->mm, dinp, W, dout, 0, pre, Cin, N, OC, 0, 0, 1, 0, 0, 0, 0, pre ? EPI_DGELU : EPI_NONE, alpha, err)) return -1;
    if (matmul_run_ex(&c->mm, dW, inp, dout, 0, 0, Cin, OC, N, 0, 1, 1, 0, 0, 0, 1, EPI_NONE, alpha, err)) return -1;
    return db ? op_bias_backward(c, db, dout, OC, err) : 0;
}
static int op_gelu(Cuda *c, const Kernel *k, dptr out, dptr inp, Err *err) {
    long long n = (long long)BT_ * 4 * c->C;
    void *a[] = {&out, &inp, &n};
    return launch(c, k, 0, 0, a, err);
}

/* attention of layer l: qkv[l] -> atty[l], keeping att[l] */
static int op_attention(Cuda *c, int l, Err *err) {
    size_t B = c->B, T = c->T, NH = c->NH, HS = c->HS, BTC_ = BTC;
    dptr qkv = at(c, c->qkv, l, 3 * BTC_, c->xs), att = at(c, c->att, l, B * NH * T * T, c->xs), out = at(c, c->atty, l, BTC_, c->xs);
    dptr q = c->qkvr, k = q + BTC_ * c->xs, v = k + BTC_ * c->xs;
    void *pa[] = {&q, &k, &v, &qkv};
    OP("attn fwd: permutes", launch(c, c->perm, 0, 0, pa, err));
    int batch = (int)(B * NH), t = (int)T, hs = (int)HS;
    OP("attn fwd: batched matmuls", matmul_run(&c->mm, att, k, q, 0, t, t, hs, 1, 0, batch, T * HS, T * HS, T * T, 0, err));
    void *sa[] = {&att, &att};
    OP("attn fwd: softmax", launch(c, c->sm_fwd, 0, 0, sa, err));
    OP("attn fwd: batched matmuls", matmul_run(&c->mm, c->vaccum, v, att, 0, hs, t, t, 0, 0, batch, T * HS, T * T, T * HS, 0, err));
    void *ua[] = {&out, &c->vaccum};
    OP("attn fwd: permutes", launch(c, c->unperm, 0, 0, ua, err));
    return 0;
}

/* dqkv (overwritten) from datty, for layer l */
static int op_attention_backward(Cuda *c, int l, Err *err) {
    size_t B = c->B, T = c->T, NH = c->NH, HS = c->HS, BTC_ = BTC;
    dptr qkv = at(c, c->qkv, l, 3 * BTC_, c->xs), att = at(c, c->att, l, B * NH * T * T, c->xs);
    dptr q = c->qkvr, k = q + BTC_ * c->xs, v = k + BTC_ * c->xs;
    dptr dq = c->dqkvr, dk = dq + BTC_ * c->xs, dv = dk + BTC_ * c->xs;
    dptr datt = c->preatt;
    void *pa[] = {&q, &k, &v, &qkv};
    OP("attn bwd: permutes", launch(c, c->perm, 0, 0, pa, err));
    void *ua[] = {&c->dvaccum, &c->datty};
    OP("attn bwd: permutes", launch(c, c->unperm_bwd, 0, 0, ua, err));
    int batch = (int)(B * NH), t = (int)T, hs = (int)HS;
    /* datt = dvaccum v^T ; dv = att^T dvaccum */
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, datt, v, c->dvaccum, 0, t, t, hs, 1, 0, batch, T * HS, T * HS, T * T, 0, err));
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, dv, c->dvaccum, att, 0, hs, t, t, 0, 1, batch, T * HS, T * T, T * HS, 0, err));
    void *sa[] = {&datt, &datt, &att};
    OP("attn bwd: softmax", launch(c, c->sm_bwd, 0, 0, sa, err));
    /* dq = dpreatt k ; dk = dpreatt^T q */
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, dq, k, datt, 0, hs, t, t, 0, 0, batch, T * HS, T * T, T * HS, 0, err));
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, dk, q, datt, 0, hs, t, t, 0, 1, batch, T * HS, T * T, T * HS, 0, err));
    void *ba[] = {&c->dqkv, &dq, &dk, &dv};
    OP("attn bwd: permutes", launch(c, c->perm_bwd, 0, 0, ba, err));
    return 0;
}

/* ---- encoder buckets: for each distinct token, its positions in increasing order ---- */
int cuda_encoder_buckets(const int32_t *inp, int n, int Vp, int32_t *count, int32_t *token, int32_t *start, int32_t *positions) {
    memset(count, 0, (size_t)(Vp + 1) * sizeof(int32_t));
    for (int i = 0; i < n; i++) count[inp[i] + 1]++;
    int nb = 0;
    for (int tok = 0; tok < Vp; tok++) {
        if (count[tok + 1]) { token[nb] = tok; start[nb] = count[tok]; nb++; }
        count[tok + 1] += count[tok];      /* prefix sum: count[tok] = first slot of tok */
    }
    start[nb] = n;
    for (int i = 0; i < n; i++) positions[count[inp[i]]++] = i;
    return nb;
}
static void build_buckets(Cuda *c, const int32_t *inp) {
    c->n_buckets = cuda_encoder_buckets(inp, c->B * c->T, c->Vp, c->h_count, c->h_bucket_token, c->h_bucket_start, c->h_positions);
}

/* ---- the Backend ---- */
static int cu_forward(Backend *be, const int32_t *inputs, const int32_t *targets, float *loss, Err *err) {
    Cuda *c = impl(be);
    int BT = c->B * c->T, C = c->C, L = c->L;
    for (int i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= c->V) return err_set(err, "input token %d at position %d is outside the vocabulary (0..%d)", inputs[i], i, c->V - 1);
    if (ck(cu.cuMemcpyHtoD(c->inputs, inputs, (size_t)BT * 4), "copying inputs to the GPU", err)) return -1;
    memcpy(c->h_inputs, inputs, (size_t)BT * 4);
    dptr wte = PW(P_WTE, 0), wpe = PW(P_WPE, 0);
    void *ea[] = {&c->encoded, &c->inputs, &wte, &wpe};
    OP("encoder forward", launch(c, c->enc_fwd, 0, 0, ea, err));
    size_t x = c->xs;
    for (int l = 0; l < L; l++) {
        dptr residual = l == 0 ? c->encoded : at(c, c->residual3, l - 1, BTC, x);
        dptr ln1 = at(c, c->ln1, l, c->ln_lstride, x), ln2 = at(c, c->ln2, l, c->ln_lstride, x);
        dptr m1 = at(c, c->ln1_mean, l, BT, 4), r1 = at(c, c->ln1_rstd, l, BT, 4);
        dptr m2 = at(c, c->ln2_mean, l, BT, 4), r2 = at(c, c->ln2_rstd, l, BT, 4);
        dptr qkv = at(c, c->qkv, l, 3 * BTC, x), atty = at(c, c->atty, l, BTC, x);
        dptr res2 = at(c, c->residual2, l, BTC, x), res3 = at(c, c->residual3, l, BTC, x);
        dptr fch = at(c, c->fch, l, 4 * BTC, x), fchg = at(c, c->fch_gelu, l, c->gelu_lstride, x);
        if (l == 0 && op_layernorm(c, ln1, m1, r1, residual, PW(P_LN1W, 0), PW(P_LN1B, 0), err)) return -1;
        OP("matmul qkv", op_matmul(c, qkv, ln1, PW(P_QKVW, l), PW(P_QKVB, l), BT, C, 3 * C, err));
        if (op_attention(c, l, err)) return -1;
        OP("matmul attproj", op_matmul(c, c->tmp, atty, PW(P_ATTPROJW, l), PW(P_ATTPROJB, l), BT, C, C, err));
        OP("layernorm forward", op_residual_layernorm(c, res2, ln2, m2, r2, residual, c->tmp, PW(P_LN2W, l), PW(P_LN2B, l), err));
        /* fch = ln2 @ fcw^T + fcb, fchg = GELU(fch): one cuBLASLt call with the GELU epilogue */
        OP("matmul fc+gelu", matmul_run_ex(&c->mm, fchg, PW(P_FCW, l), ln2, PW(P_FCB, l), fch, 4 * C, BT, C, 1, 0, 1, 0, 0, 0, 0, EPI_GELU_AUX, 1.0f, err));
        OP("matmul fcproj", op_matmul(c, c->tmp, fchg, PW(P_FCPROJW, l), PW(P_FCPROJB, l), BT, 4 * C, C, err));
        if (l + 1 < L) {
            dptr nln1 = at(c, c->ln1, l + 1, c->ln_lstride, x);
            OP("layernorm forward", op_residual_layernorm(c, res3, nln1, at(c, c->ln1_mean, l + 1, BT, 4), at(c, c->ln1_rstd, l + 1, BT, 4), res2,
                                      c->tmp, PW(P_LN1W, l + 1), PW(P_LN1B, l + 1), err));
        } else {
            OP("layernorm forward", op_residual_layernorm(c, res3, c->lnf, c->lnf_mean, c->lnf_rstd, res2, c->tmp, PW(P_LNFW, 0), PW(P_LNFB, 0), err));
        }
    }
    OP("matmul classifier", op_matmul(c, c->logits, c->lnf, wte, 0, BT, C, c->Vp, err));
    c->logits_valid = 1;
    c->have_targets = 0;
    if (!targets) return ck(cu.cuCtxSynchronize(), "forward", err);
    for (int i = 0; i < BT; i++)
        if (targets[i] < 0 || targets[i] >= c->V) return err_set(err, "target token %d at position %d is outside the vocabulary", targets[i], i);
    if (ck(cu.cuMemcpyHtoD(c->targets, targets, (size_t)BT * 4), "copying targets to the GPU", err)) return -1;
    /* one pass: losses, and dlogits in place of the logits (for d(mean loss); backward scales by grad_scale) */
    float dloss = 1.0f / BT;
    int write = 1;
    void *ca[] = {&c->losses, &c->logits, &c->targets, &dloss, &write};
    OP("classifier (loss+dlogits)", launch(c, c->cls, 0, 0, ca, err));
    c->logits_valid = 0;
    if (ck(cu.cuMemcpyDtoH(c->h_losses, c->losses, (size_t)BT * 4), "forward (reading the losses)", err)) return -1;
    double s = 0;
    for (int i = 0; i < BT; i++) s += c->h_losses[i];
    if (loss) *loss = (float)(s / BT);
    build_buckets(c, inputs);
    if (ck(cu.cuMemcpyHtoD(c->bucket_token, c->h_bucket_token, (size_t)c->n_buckets * 4), "copying buckets", err) ||
        ck(cu.cuMemcpyHtoD(c->bucket_start, c->h_bucket_start, (size_t)(c->n_buckets + 1) * 4), "copying buckets", err) ||
        ck(cu.cuMemcpyHtoD(c->positions, c->h_positions, (size_t)BT * 4), "copying buckets", err)) return -1;
    c->have_targets = 1;
    return 0;
}

static int cu_backward(Backend *be, float grad_scale, Err *err) {
    Cuda *c = impl(be);
    if (!c->have_targets) return err_set(err, "backward needs a forward with targets first");
    int BT = c->B * c->T, C = c->C, L = c->L;
    size_t x = c->xs;
    prof_steps++;
    /* the logits buffer holds d(mean loss)/d(logits) since the forward; grad_scale goes in as alpha */
    if (ck(cu.cuMemsetD8(c->dresidual, 0, BTC * x), "zeroing dresidual", err)) return -1;
    OP("matmul bwd classifier", op_matmul_backward(c, c->dln, GW(P_WTE, 0), 0, c->logits, c->lnf, PW(P_WTE, 0), BT, C, c->Vp, grad_scale, 0, err));
    dptr last = at(c, c->residual3, L - 1, BTC, x);
    OP("layernorm backward", op_layernorm_backward(c, c->dresidual, GW(P_LNFW, 0), GW(P_LNFB, 0), c->dln, last, PW(P_LNFW, 0), c->lnf_mean, c->lnf_rstd, err));
    for (int l = L - 1; l >= 0; l--) {
        dptr residual = l == 0 ? c->encoded : at(c, c->residual3, l - 1, BTC, x);
        dptr ln1 = at(c, c->ln1, l, c->ln_lstride, x), ln2 = at(c, c->ln2, l, c->ln_lstride, x);
        dptr m1 = at(c, c->ln1_mean, l, BT, 4), r1 = at(c, c->ln1_rstd, l, BT, 4);
        dptr m2 = at(c, c->ln2_mean, l, BT, 4), r2 = at(c, c->ln2_rstd, l, BT, 4);
        dptr atty = at(c, c->atty, l, BTC, x), res2 = at(c, c->residual2, l, BTC, x);
        dptr fch = at(c, c->fch, l, 4 * BTC, x), fchg = at(c, c->fch_gelu, l, c->gelu_lstride, x);
        if (c->recompute >= 1) OP("gelu recompute", op_gelu(c, c->gelu_fwd, fchg, fch, err));
        /* dfch = (dresidual @ fcprojw) * GELU'(fch): the DGELU epilogue */
        OP("matmul bwd fcproj+dgelu", op_matmul_backward(c, c->dfch, GW(P_FCPROJW, l), GW(P_FCPROJB, l), c->dresidual, fchg, PW(P_FCPROJW, l), BT, 4 * C, C, 1.0f, fch, err));
        if (c->recompute >= 2) OP("layernorm forward", op_layernorm(c, ln2, m2, r2, res2, PW(P_LN2W, l), PW(P_LN2B, l), err));
        OP("matmul bwd fc", op_matmul_backward(c, c->dln, GW(P_FCW, l), GW(P_FCB, l), c->dfch, ln2, PW(P_FCW, l), BT, C, 4 * C, 1.0f, 0, err));
        OP("layernorm backward", op_layernorm_backward(c, c->dresidual, GW(P_LN2W, l), GW(P_LN2B, l), c->dln, res2, PW(P_LN2W, l), m2, r2, err));
        OP("matmul bwd attproj", op_matmul_backward(c, c->datty, GW(P_ATTPROJW, l), GW(P_ATTPROJB, l), c->dresidual, atty, PW(P_ATTPROJW, l), BT, C, C, 1.0f, 0, err));
        if (op_attention_backward(c, l, err)) return -1;
        if (c->recompute >= 2) OP("layernorm forward", op_layernorm(c, ln1, m1, r1, residual, PW(P_LN1W, l), PW(P_LN1B, l), err));
        OP("matmul bwd qkv", op_matmul_backward(c, c->dln, GW(P_QKVW, l), GW(P_QKVB, l), c->dqkv, ln1, PW(P_QKVW, l), BT, C, 3 * C, 1.0f, 0, err));
        OP("layernorm backward", op_layernorm_backward(c, c->dresidual, GW(P_LN1W, l), GW(P_LN1B, l), c->dln, residual, PW(P_LN1W, l), m1, r1, err));
    }
    dptr dwpe = GW(P_WPE, 0), dwte = GW(P_WTE, 0);
    void *wa[] = {&dwpe, &c->dresidual};
    OP("encoder backward", launch(c, c->enc_wpe, 0, 0, wa, err));
    void *ta[] = {&dwte, &c->dresidual, &c->bucket_token, &c->bucket_start, &c->positions};
    OP("encoder backward", launch(c, c->enc_wte, (unsigned)c->n_buckets, 0, ta, err));
    return ck(cu.cuCtxSynchronize(), "backward", err);
}

static int cu_zero_grad(Backend *be, Err *err) {
    Cuda *c = impl(be);
    return ck(cu.cuMemsetD8(c->grads, 0, c->np * c->xs), "zeroing gradients", err);
}

static int cu_grad_norm(Backend *be, float *norm, Err *err) {
    Cuda *c = impl(be);
    long long n = (long long)c->np;
    void *a[] = {&c->norm_partials, &c->grads, &n};
    OP("grad norm", launch(c, c->norm, 0, 0, a, err));
    unsigned g = c->norm->pk->grid[0];
    if (ck(cu.cuMemcpyDtoH(c->h_partials, c->norm_partials, g * 4), "gradient norm", err)) return -1;
    double s = 0;
    for (unsigned i = 0; i < g; i++) s += c->h_partials[i];
    *norm = (float)sqrt(s);
    return 0;
}

static int cu_update(Backend *be, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                     int step, Err *err) {
    Cuda *c = impl(be);
    float bc1 = (float)(1.0 - pow(beta1, step)), bc2 = (float)(1.0 - pow(beta2, step));
    unsigned bs = c->adamw->pk->block[0];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        dptr p = c->params + c->poff[i] * c->xs, g = c->grads + c->poff[i] * c->xs;
        dptr m = c->m + c->poff[i] * 4, v = c->v + c->poff[i] * 4;
        dptr mw = c->master_w ? c->master_w + c->poff[i] * 4 : 0;
        long long n = (long long)c->psz[i];
        float wd = gpt2_param_decays(i) ? weight_decay : 0.0f;
        void *a[] = {&p, &mw, &g, &m, &v, &n, &lr, &beta1, &beta2, &bc1, &bc2, &eps, &wd, &grad_scale};
        OP("adamw", launch(c, c->adamw, plan_ceil_div((size_t)n, bs), 0, a, err));
    }
    return ck(cu.cuCtxSynchronize(), "AdamW update", err);
}

/* floatX device array <-> fp32 host array */
static int download(Cuda *c, float *out, dptr src, size_t n, Err *err) {
    if (c->xs == 4) return ck(cu.cuMemcpyDtoH(out, src, n * 4), "copying from the GPU", err);
    uint16_t *tmp = xmalloc(n * 2);
    int rc = ck(cu.cuMemcpyDtoH(tmp, src, n * 2), "copying from the GPU", err);
    if (!rc) bf16_to_f32_array(out, tmp, n);
    free(tmp);
    return rc;
}
static int upload(Cuda *c, dptr dst, const float *in, size_t n, Err *err) {
    if (c->xs == 4) return ck(cu.cuMemcpyHtoD(dst, in, n * 4), "copying to the GPU", err);
    uint16_t *tmp = xmalloc(n * 2);
    bf16_from_f32_array(tmp, in, n);
    int rc = ck(cu.cuMemcpyHtoD(dst, tmp, n * 2), "copying to the GPU", err);
    free(tmp);
    return rc;
}

static int cu_set_params(Backend *be, const float *params, Err *err) {
    Cuda *c = impl(be);
    /* padding rows of wte stay zero */
    if (!c->master_w) return upload(c, c->params, params, c->np, err);
    /* the 16-bit weights as AdamW's stochastic rounding would write them from these master weights, so that
       a resumed run continues with the same bits */
    uint16_t *tmp = xmalloc(c->np * 2);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        for (size_t j = 0; j < c->psz[i]; j++) tmp[c->poff[i] + j] = bf16_from_f32_stochastic(params[c->poff[i] + j], (uint32_t)j);
    int rc = ck(cu.cuMemcpyHtoD(c->params, tmp, c->np * 2), "copying weights to the GPU", err);
    free(tmp);
    if (rc) return -1;
    return ck(cu.cuMemcpyHtoD(c->master_w, params, c->np * 4), "copying master weights", err);
}
static int cu_get_params(Backend *be, float *params, Err *err) {
    Cuda *c = impl(be);
    if (c->master_w) return ck(cu.cuMemcpyDtoH(params, c->master_w, c->np * 4), "copying master weights", err);
    return download(c, params, c->params, c->np, err);
}
static int cu_get_grads(Backend *be, float *grads, Err *err) {
    Cuda *c = impl(be);
    return download(c, grads, c->grads, c->np, err);
}
static int cu_get_logits(Backend *be, int b, int t, float *out, Err *err) {
    Cuda *c = impl(be);
    if (!c->logits_valid) return err_set(err, "get_logits: no logits: call forward without targets first (with targets, the logits buffer holds their gradient)");
    if (b < 0 || b >= c->B || t < 0 || t >= c->T) return err_set(err, "get_logits: (b=%d, t=%d) outside B=%d T=%d", b, t, c->B, c->T);
    return download(c, out, c->logits + ((size_t)b * c->T + t) * c->Vp * c->xs, (size_t)c->V, err);
}
static int cu_get_opt_state(Backend *be, float *m, float *v, Err *err) {
    Cuda *c = impl(be);
    return ck(cu.cuMemcpyDtoH(m, c->m, c->np * 4), "copying AdamW m", err) || ck(cu.cuMemcpyDtoH(v, c->v, c->np * 4), "copying AdamW v", err) ? -1 : 0;
}
static int cu_set_opt_state(Backend *be, const float *m, const float *v, Err *err) {
    Cuda *c = impl(be);
    return ck(cu.cuMemcpyHtoD(c->m, m, c->np * 4), "copying AdamW m", err) || ck(cu.cuMemcpyHtoD(c->v, v, c->np * 4), "copying AdamW v", err) ? -1 : 0;
}

static void cu_destroy(Backend *be) {
    if (!be) return;
    Cuda *c = impl(be);
    if (c) {
        prof_print();
        if (c->arena) cu.cuMemFree(c->arena);
        matmul_destroy(&c->mm);
        kernels_unload(&c->ks);
        free(c->h_inputs); free(c->h_count); free(c->h_bucket_token); free(c->h_bucket_start); free(c->h_positions);
        free(c->h_losses); free(c->h_partials);
        free(c);
    }
    free(be);
}

static int resolve(Cuda *c, Err *err) {
    struct { const Kernel **slot; const char *name; } t[] = {
        {&c->enc_fwd, "encoder_forward"}, {&c->enc_wpe, "encoder_backward_wpe"}, {&c->enc_wte, "encoder_backward_wte"},
        {&c->ln_fwd, "layernorm_forward"}, {&c->ln_res_fwd, "fused_residual_layernorm_forward"},
        {&c->ln_bwd, "layernorm_backward"}, {&c->ln_bwd_reduce, "layernorm_backward_reduce"},
        {&c->bias_partial, "bias_backward_partial"}, {&c->bias_reduce, "bias_backward_reduce"},
        {&c->perm, "attention_permute"}, {&c->unperm, "attention_unpermute"}, {&c->perm_bwd, "attention_permute_backward"},
        {&c->unperm_bwd, "attention_unpermute_backward"}, {&c->sm_fwd, "attention_softmax_forward"},
        {&c->sm_bwd, "attention_softmax_backward"}, {&c->gelu_fwd, "gelu_forward"}, {&c->gelu_bwd, "gelu_backward"},
        {&c->cls, "classifier_forward"}, {&c->norm, "global_norm_squared"}, {&c->adamw, "adamw_update"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!(*t[i].slot = kernels_get(&c->ks, t[i].name, err))) return -1;
    return 0;
}

static double gib(size_t b) { return b / (1024.0 * 1024.0 * 1024.0); }

Backend *cuda_backend_create(const BackendOptions *opt, Err *err) {
    const Plan *plan = opt->plan;
    if (!plan) { err_set(err, "the CUDA backend needs a plan (gpt2gen build)"); return NULL; }
    const Config *cfg = plan->cfg;
    if (opt->precision == PREC_FP16) { err_set(err, "the CUDA backend supports precision fp32 and bf16; fp16 is not implemented yet"); return NULL; }
    if (opt->B != cfg->train.batch_size || opt->T != cfg->train.seq_len || opt->precision != cfg->precision ||
        opt->shape.n_layer != cfg->model.n_layer || opt->shape.n_embd != cfg->model.n_embd || opt->shape.n_head != cfg->model.n_head ||
        opt->shape.padded_vocab_size != cfg->model.padded_vocab_size || opt->shape.max_seq_len != cfg->model.max_seq_len) {
        err_set(err, "the plan in %s was made for B=%d T=%d %s L=%d C=%d NH=%d, not B=%d T=%d %s L=%d C=%d NH=%d: rebuild it",
                plan->build_dir, cfg->train.batch_size, cfg->train.seq_len, precision_name(cfg->precision), cfg->model.n_layer,
                cfg->model.n_embd, cfg->model.n_head, opt->B, opt->T, precision_name(opt->precision), opt->shape.n_layer,
                opt->shape.n_embd, opt->shape.n_head);
        return NULL;
    }
    Cuda *c = xcalloc(1, sizeof *c);
    Backend *be = xcalloc(1, sizeof *be);
    be->impl = c;
    be->destroy = cu_destroy;
    if (cuda_open(&c->dev, err) || kernels_load(&c->ks, plan, &c->dev, err) || resolve(c, err)) { cu_destroy(be); return NULL; }
    c->prec = opt->precision;
    c->xs = c->prec == PREC_FP32 ? 4 : 2;
    c->B = opt->B; c->T = opt->T;
    c->C = opt->shape.n_embd; c->L = opt->shape.n_layer; c->NH = opt->shape.n_head; c->HS = c->C / c->NH;
    c->V = opt->shape.vocab_size; c->Vp = opt->shape.padded_vocab_size;
    c->recompute = opt->recompute;
    c->master = opt->master_weights && c->prec != PREC_FP32;
    unsigned x128 = c->prec == PREC_FP32 ? 4 : 8;
    c->vec_c = c->C % x128 == 0 ? x128 : 1;
    c->np = gpt2_param_sizes(&opt->shape, c->psz, c->poff);
    size_t need = layout(c, 0);
    size_t free_b = 0, total_b = 0;
    cu.cuMemGetInfo(&free_b, &total_b);
    size_t extra = 64u << 20;   /* cuBLASLt workspace and handles */
    if (need + extra > free_b) {
        err_set(err, "out of GPU memory: the plan for %s needs %.2f GiB (parameters, gradients and AdamW state %.2f GiB, "
                "activations %.2f GiB), but GPU 0 (%s) has %.2f GiB free of %.2f GiB; lower train.batch_size, or set "
                "train.recompute=2 (recompute GELU and LayerNorm)%s",
                cfg->name, gib(need + extra), gib(c->np * (2 * c->xs + 8 + (c->master ? 4 : 0))),
                gib(need - c->np * (2 * c->xs + 8 + (c->master ? 4 : 0))), c->dev.name, gib(free_b), gib(total_b),
                c->master ? ", or train.master_weights=false" : "");
        cu_destroy(be);
        return NULL;
    }
    CUresult r = cu.cuMemAlloc(&c->arena, need);
    if (r != CUDA_SUCCESS) {
        char eb[256];
        err_set(err, "out of GPU memory: allocating %.2f GiB for %s failed (%s); lower train.batch_size or set train.recompute=2",
                gib(need), cfg->name, cuda_err_string(r, eb, sizeof eb));
        c->arena = 0;
        cu_destroy(be);
        return NULL;
    }
    c->arena_bytes = need;
    layout(c, c->arena);
    if (matmul_init(&c->mm, c->prec, err)) { cu_destroy(be); return NULL; }
    if (ck(cu.cuMemsetD8(c->arena, 0, need), "clearing GPU memory", err)) { cu_destroy(be); return NULL; }
    size_t BT = (size_t)c->B * c->T;
    c->h_inputs = xmalloc(BT * 4);
    c->h_count = xmalloc(((size_t)c->Vp + 1) * 4);
    c->h_bucket_token = xmalloc(BT * 4);
    c->h_bucket_start = xmalloc((BT + 1) * 4);
    c->h_positions = xmalloc(BT * 4);
    c->h_losses = xmalloc(BT * 4);
    c->h_partials = xmalloc((size_t)c->norm->pk->grid[0] * 4);
    be->name = "cuda";
    be->shape = opt->shape;
    be->B = opt->B;
    be->T = opt->T;
    be->num_params = c->np;
    be->set_params = cu_set_params;
    be->get_params = cu_get_params;
    be->forward = cu_forward;
    be->get_logits = cu_get_logits;
    be->zero_grad = cu_zero_grad;
    be->backward = cu_backward;
    be->grad_norm = cu_grad_norm;
    be->update = cu_update;
    be->get_grads = cu_get_grads;
    be->get_opt_state = cu_get_opt_state;
    be->set_opt_state = cu_set_opt_state;
    return be;
}

size_t cuda_backend_arena_bytes(Backend *be) { return impl(be)->arena_bytes; }
