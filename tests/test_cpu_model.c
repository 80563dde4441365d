/* test_cpu_model: the fp32 reference ops and the CPU backend.
 *   - each op's backward against central differences of its forward, and matmul against a naive product
 *   - the whole model's gradient against central differences of the loss, for samples of every tensor
 *   - determinism across runs and thread counts, AdamW against fp64, padded wte rows staying zero
 *   - the PyTorch golden file (tests/reference/golden_tiny.bin), when it is there */
#include <math.h>
#include "common/files.h"
#include "common/rng.h"
#include <stdio.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/backend.h"
#include "runtime/checkpoint.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/check.h"
#include "tests/golden.h"

/* CHECK_OK copies an Err message (4 KiB) into the harness's 1 KiB reason: truncation is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* ---------------------------------------------------------------------------------------------------- */
/* helpers */

static void fill_normal(float *p, size_t n, float std, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) p[i] = std * rng_normal(rng);
}

static float *fnew(size_t n) { return xcalloc(n, sizeof(float)); }

static double dot_d(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Tracks the worst error of a set of comparisons, for one line of report. */
typedef struct { double max_abs, max_rel; int bad; } ErrStat;

/* |got - want| <= atol + rtol * |want|; rel error is reported against max(|want|, atol) */
static void err_add(ErrStat *e, double got, double want, double atol, double rtol) {
    double d = fabs(got - want), r = d / fmax(fabs(want), atol);
    if (d > e->max_abs) e->max_abs = d;
    if (r > e->max_rel) e->max_rel = r;
    if (!(d <= atol + rtol * fabs(want))) e->bad++;
}

/* Central difference of f at x[i]; the step actually taken (after fp32 rounding) is the denominator. */
typedef double (*Objective)(void *ctx);
static double central_diff(float *x, size_t i, float h, Objective f, void *ctx) {
    float orig = x[i];
    x[i] = orig + h;
    float xp = x[i];
    double fp = f(ctx);
    x[i] = orig - h;
    float xm = x[i];
    double fm = f(ctx);
    x[i] = orig;
    return (fp - fm) / ((double)xp - (double)xm);
}

/* Checks grad[i] against central differences of f for every i < n. */
static void fd_all(ErrStat *e, float *x, const float *grad, size_t n, float h, Objective f, void *ctx,
                   double atol, double rtol) {
    for (size_t i = 0; i < n; i++) err_add(e, grad[i], central_diff(x, i, h, f, ctx), atol, rtol);
}

/* ---------------------------------------------------------------------------------------------------- */
/* (b) each op's backward against central differences of its forward.
 * Each objective is J = sum(out * R) for a fixed random R, so the analytic gradient is the op's backward
 * with dout = R. Inputs are O(1), h = 1e-2: out carries fp32 rounding of ~1e-7 relative, so J (a sum
 * of 50-250 terms) has noise ~1e-6 and the difference quotient ~1e-4; the truncation error h^2 f'''/6
 * is ~1e-5 for these smooth ops. Measured worst: ~1e-4 absolute, ~7e-4 relative on large gradients.
 * Tolerance: 5e-4 absolute + 2e-3 relative. A real bug is off by O(|g|) ~ 1; a 1% error in one term
 * of a backward (tried by hand: dk, dv, a LayerNorm dbias) already fails. */
#define OP_H 1e-2f
#define OP_ATOL 5e-4
#define OP_RTOL 2e-3

typedef struct { int N, C, OC; float *inp, *w, *b, *out, *mean, *rstd, *R; } OpCtx;

static double ln_objective(void *p) {
    OpCtx *c = p;
    cpu_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

static void test_layernorm_backward(void) {
    uint64_t rng = 11;
    OpCtx c = {5, 12, 0, fnew(60), fnew(12), fnew(12), fnew(60), fnew(5), fnew(5), fnew(60)};
    fill_normal(c.inp, 60, 1.0f, &rng); fill_normal(c.w, 12, 1.0f, &rng); fill_normal(c.b, 12, 1.0f, &rng);
    fill_normal(c.R, 60, 1.0f, &rng);
    for (int i = 0; i < 60; i++) c.inp[i] += (float)(i % 12) * 0.1f;   /* rows with a mean */
    float *dinp = fnew(60), *dw = fnew(12), *db = fnew(12);
    ln_objective(&c);
    cpu_layernorm_backward(dinp, dw, db, c.R, c.inp, c.w, c.mean, c.rstd, 5, 12);
    ErrStat e = {0};
    fd_all(&e, c.inp, dinp, 60, OP_H, ln_objective, &c, OP_ATOL, OP_RTOL);
    fd_all(&e, c.w, dw, 12, OP_H, ln_objective, &c, OP_ATOL, OP_RTOL);
    fd_all(&e, c.b, db, 12, OP_H, ln_objective, &c, OP_ATOL, OP_RTOL);
    printf("  layernorm backward vs finite differences: max abs err %.2e, max rel err %.2e\n", e.max_abs, e.max_rel);
    CHECK(e.bad == 0, "%d of 84 layernorm gradients off (max abs %.2e)", e.bad, e.max_abs);
    /* backward accumulates: a second call doubles the gradients */
    float first = dinp[7], firstw = dw[3];
    ln_objective(&c);   /* the last difference left mean and rstd of a perturbed input */
    cpu_layernorm_backward(dinp, dw, db, c.R, c.inp, c.w, c.mean, c.rstd, 5, 12);
    /* dweight sums rows onto its old value, so it is 2x only up to rounding */
    CHECK(dinp[7] == 2 * first && fabsf(dw[3] - 2 * firstw) <= 1e-6f * fabsf(firstw), "layernorm backward does not accumulate");
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.mean); free(c.rstd); free(c.R);
    free(dinp); free(dw); free(db);
}

static double mm_objective(void *p) {
    OpCtx *c = p;
    cpu_matmul_forward(c->out, c->inp, c->w, c->b, c->N, c->C, c->OC);
    return dot_d(c->out, c->R, (size_t)c->N * c->OC);
}

static void test_matmul_backward(void) {
    uint64_t rng = 12;
    int N = 5, C = 7, OC = 9;
    OpCtx c = {N, C, OC, fnew(N * C), fnew(OC * C), fnew(OC), fnew(N * OC), NULL, NULL, fnew(N * OC)};
    fill_normal(c.inp, N * C, 1.0f, &rng); fill_normal(c.w, OC * C, 1.0f, &rng);
    fill_normal(c.b, OC, 1.0f, &rng); fill_normal(c.R, N * OC, 1.0f, &rng);
    float *dinp = fnew(N * C), *dw = fnew(OC * C), *db = fnew(OC);
    cpu_matmul_backward(dinp, dw, db, c.R, c.inp, c.w, N, C, OC);
    ErrStat e = {0};
    fd_all(&e, c.inp, dinp, N * C, OP_H, mm_objective, &c, OP_ATOL, OP_RTOL);
    fd_all(&e, c.w, dw, OC * C, OP_H, mm_objective, &c, OP_ATOL, OP_RTOL);
    fd_all(&e, c.b, db, OC, OP_H, mm_objective, &c, OP_ATOL, OP_RTOL);
    printf("  matmul backward vs finite differences: max abs err %.2e, max rel err %.2e\n", e.max_abs, e.max_rel);
    CHECK(e.bad == 0, "%d matmul gradients off (max abs %.2e)", e.bad, e.max_abs);
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.R); free(dinp); free(dw); free(db);
}

/* The tiled matmul against a naive fp64 product, on shapes that cross every tile and panel edge.
   Tolerance: 2e-6 * sum_k |a_k b_k| per element. A K-term fp32 sum errs by up to K * 6e-8 * sum|terms|
   in the worst case and by ~sqrt(K) * 6e-8 * (partial sums) in practice; measured here, ~2e-7 * sum|terms|
   at K <= 600. A wrong index or a missed tile edge is off by O(1). */
static void check_matmul_shape(int N, int C, int OC, ErrStat *ef, ErrStat *eb) {
    uint64_t rng = (uint64_t)N * 1000003 + C * 101 + OC;
    float *inp = fnew((size_t)N * C), *w = fnew((size_t)OC * C), *b = fnew(OC), *out = fnew((size_t)N * OC);
    float *dout = fnew((size_t)N * OC), *dinp = fnew((size_t)N * C), *dw = fnew((size_t)OC * C), *db = fnew(OC);
    fill_normal(inp, (size_t)N * C, 1, &rng); fill_normal(w, (size_t)OC * C, 1, &rng);
    fill_normal(b, OC, 1, &rng); fill_normal(dout, (size_t)N * OC, 1, &rng);
    for (size_t i = 0; i < (size_t)OC * C; i++) dw[i] = 0.5f;   /* accumulation on top of old values */
    cpu_matmul_forward(out, inp, w, b, N, C, OC);
    cpu_matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b[o], mag = fabs(b[o]);
            for (int k = 0; k < C; k++) { s += (double)inp[n * C + k] * w[o * C + k]; mag += fabs((double)inp[n * C + k] * w[o * C + k]); }
            err_add(ef, out[(size_t)n * OC + o], s, 2e-6 * mag, 0);
        }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++) {
            double s = 0, mag = 0;
            for (int o = 0; o < OC; o++) { s += (double)dout[(size_t)n * OC + o] * w[o * C + k]; mag += fabs((double)dout[(size_t)n * OC + o] * w[o * C + k]); }
            err_add(eb, dinp[(size_t)n * C + k], s, 2e-6 * mag + 1e-30, 0);
        }
    for (int o = 0; o < OC; o++) {
        for (int k = 0; k < C; k++) {
            double s = 0.5, mag = 0.5;
            for (int n = 0; n < N; n++) { s += (double)dout[(size_t)n * OC + o] * inp[n * C + k]; mag += fabs((double)dout[(size_t)n * OC + o] * inp[n * C + k]); }
            err_add(eb, dw[(size_t)o * C + k], s, 2e-6 * mag, 0);
        }
        double s = 0, mag = 0;
        for (int n = 0; n < N; n++) { s += dout[(size_t)n * OC + o]; mag += fabs(dout[(size_t)n * OC + o]); }
        err_add(eb, db[o], s, 2e-6 * mag, 0);
    }
    free(inp); free(w); free(b); free(out); free(dout); free(dinp); free(dw); free(db);
}

static void test_matmul_vs_naive(void) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {4, 16, 8}, {70, 33, 130}, {129, 300, 67}, {8, 600, 260}};
    ErrStat ef = {0}, eb = {0};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_matmul_shape(shapes[i][0], shapes[i][1], shapes[i][2], &ef, &eb);
    printf("  matmul vs naive fp64: forward max abs err %.2e, backward max abs err %.2e\n", ef.max_abs, eb.max_abs);
    CHECK(ef.bad == 0, "%d forward outputs off (max abs %.2e)", ef.bad, ef.max_abs);
    CHECK(eb.bad == 0, "%d backward outputs off (max abs %.2e)", eb.bad, eb.max_abs);
}

typedef struct { int B, T, C, NH; float *qkv, *out, *preatt, *att, *R; } AttCtx;

static double att_objective(void *p) {
    AttCtx *c = p;
    cpu_attention_forward(c->out, c->preatt, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dot_d(c->out, c->R, (size_t)c->B * c->T * c->C);
}

static void test_attention_backward(void) {
    uint64_t rng = 13;
    int B = 2, T = 5, C = 8, NH = 2;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    AttCtx c = {B, T, C, NH, fnew(nq), fnew(no), fnew(na), fnew(na), fnew(no)};
    fill_normal(c.qkv, nq, 1.0f, &rng); fill_normal(c.R, no, 1.0f, &rng);
    float *dqkv = fnew(nq), *dpre = fnew(na), *datt = fnew(na);
    att_objective(&c);
    cpu_attention_backward(dqkv, dpre, datt, c.R, c.qkv, c.att, B, T, C, NH);
    ErrStat e = {0};
    fd_all(&e, c.qkv, dqkv, nq, OP_H, att_objective, &c, OP_ATOL, OP_RTOL);
    printf("  attention backward vs finite differences: max abs err %.2e, max rel err %.2e\n", e.max_abs, e.max_rel);
    CHECK(e.bad == 0, "%d of %zu attention gradients off (max abs %.2e)", e.bad, nq, e.max_abs);
    /* causal: rows of att sum to 1, and nothing above the diagonal */
    double worst = 0;
    int above = 0;
    for (int r = 0; r < B * NH * T; r++) {
        int t = r % T;
        double s = 0;
        for (int t2 = 0; t2 < T; t2++) { s += c.att[(size_t)r * T + t2]; if (t2 > t && c.att[(size_t)r * T + t2] != 0) above++; }
        worst = fmax(worst, fabs(s - 1));
    }
    CHECK(worst < 1e-6 && above == 0, "attention rows sum to 1 within %.2e, %d entries above the diagonal", worst, above);
    free(c.qkv); free(c.out); free(c.preatt); free(c.att); free(c.R); free(dqkv); free(dpre); free(datt);
}

typedef struct { size_t n; float *inp, *out, *R; } GeluCtx;

static double gelu_objective(void *p) {
    GeluCtx *c = p;
    cpu_gelu_forward(c->out, c->inp, c->n);
    return dot_d(c->out, c->R, c->n);
}

static void test_gelu(void) {
    uint64_t rng = 14;
    GeluCtx c = {33, fnew(33), fnew(33), fnew(33)};
    for (int i = 0; i < 33; i++) c.inp[i] = -4.0f + 0.25f * i;
    fill_normal(c.R, 33, 1.0f, &rng);
    float *d = fnew(33);
    gelu_objective(&c);
    cpu_gelu_backward(d, c.inp, c.R, 33);
    ErrStat e = {0};
    fd_all(&e, c.inp, d, 33, OP_H, gelu_objective, &c, OP_ATOL, OP_RTOL);
    gelu_objective(&c);
    /* forward against the formula in double */
    double fmaxerr = 0;
    for (int i = 0; i < 33; i++) {
        double x = c.inp[i], y = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        fmaxerr = fmax(fmaxerr, fabs(y - c.out[i]));
    }
    printf("  gelu: forward max abs err %.2e vs fp64, backward vs finite differences max abs err %.2e\n", fmaxerr, e.max_abs);
    CHECK(e.bad == 0 && fmaxerr < 1e-6, "gelu: %d gradients off, forward err %.2e", e.bad, fmaxerr);
    free(c.inp); free(c.out); free(c.R); free(d);
}

typedef struct { int N, V, Vp; float *logits, *losses, dloss; int32_t *targets; } CeCtx;

static double ce_objective(void *p) {
    CeCtx *c = p;
    cpu_softmax_crossentropy(c->losses, NULL, c->logits, c->targets, 0, c->N, c->V, c->Vp);
    double s = 0;
    for (int i = 0; i < c->N; i++) s += c->losses[i];
    return s * c->dloss;
}

static void test_softmax_crossentropy(void) {
    uint64_t rng = 15;
    int N = 3, V = 7, Vp = 8;
    int32_t tg[3] = {0, 6, 3};
    CeCtx c = {N, V, Vp, fnew(N * Vp), fnew(N), 0.37f, tg};
    fill_normal(c.logits, N * Vp, 2.0f, &rng);
    for (int n = 0; n < N; n++) c.logits[n * Vp + 7] = 1000.0f;   /* padded column: must be ignored */
    float *d = fnew(N * Vp);
    for (int i = 0; i < N * Vp; i++) d[i] = 7.0f;                 /* written, not accumulated */
    cpu_softmax_crossentropy(c.losses, d, c.logits, c.targets, c.dloss, N, V, Vp);
    double lerr = 0;
    for (int n = 0; n < N; n++) {
        double s = 0;
        for (int i = 0; i < V; i++) s += exp(c.logits[n * Vp + i]);
        lerr = fmax(lerr, fabs(log(s) - c.logits[n * Vp + tg[n]] - c.losses[n]));
    }
    ErrStat e = {0};
    for (int n = 0; n < N; n++)
        for (int i = 0; i < V; i++)
            err_add(&e, d[n * Vp + i], central_diff(c.logits, (size_t)n * Vp + i, OP_H, ce_objective, &c), OP_ATOL, OP_RTOL);
    int pad_ok = 1;
    for (int n = 0; n < N; n++) pad_ok &= d[n * Vp + 7] == 0.0f;
    /* in place: dlogits over the logits gives the same bits */
    ce_objective(&c);   /* losses at the unperturbed logits again */
    float *inplace = fnew(N * Vp), *l2 = fnew(N);
    memcpy(inplace, c.logits, (size_t)N * Vp * sizeof(float));
    cpu_softmax_crossentropy(l2, inplace, inplace, c.targets, c.dloss, N, V, Vp);
    CHECK(memcmp(inplace, d, (size_t)N * Vp * sizeof(float)) == 0 && memcmp(l2, c.losses, (size_t)N * sizeof(float)) == 0,
          "softmax cross-entropy in place differs");
    free(inplace); free(l2);
    printf("  softmax cross-entropy: loss max abs err %.2e vs fp64, dlogits vs finite differences max abs err %.2e\n", lerr, e.max_abs);
    CHECK(lerr < 1e-5, "loss off by %.2e", lerr);
    CHECK(e.bad == 0, "%d dlogits off (max abs %.2e)", e.bad, e.max_abs);
    CHECK(pad_ok, "dlogits on the padded column is not 0");
    free(c.logits); free(c.losses); free(d);
}

/* The encoder is linear: its backward is checked exactly, with a token that repeats. */
static void test_encoder(void) {
    int B = 2, T = 3, C = 4, V = 5;
    int32_t inp[6] = {1, 3, 1, 4, 1, 0};
    uint64_t rng = 16;
    float *wte = fnew(V * C), *wpe = fnew(T * C), *out = fnew(B * T * C), *dout = fnew(B * T * C);
    float *dwte = fnew(V * C), *dwpe = fnew(T * C), *res = fnew(B * T * C);
    fill_normal(wte, V * C, 1, &rng); fill_normal(wpe, T * C, 1, &rng); fill_normal(dout, B * T * C, 1, &rng);
    cpu_encoder_forward(out, inp, wte, wpe, B, T, C);
    cpu_encoder_backward(dwte, dwpe, dout, inp, B, T, C);
    int ok = 1;
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) ok &= out[bt * C + c] == wte[inp[bt] * C + c] + wpe[(bt % T) * C + c];
    for (int v = 0; v < V; v++)
        for (int c = 0; c < C; c++) {
            float s = 0;
            for (int bt = 0; bt < B * T; bt++) if (inp[bt] == v) s += dout[bt * C + c];
            ok &= dwte[v * C + c] == s;
        }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) ok &= dwpe[t * C + c] == dout[t * C + c] + dout[(T + t) * C + c];
    cpu_residual_forward(res, out, dout, (size_t)B * T * C);
    for (int i = 0; i < B * T * C; i++) ok &= res[i] == out[i] + dout[i];
    CHECK(ok, "encoder forward/backward or residual differ from the direct sums");
    free(wte); free(wpe); free(out); free(dout); free(dwte); free(dwpe); free(res);
}

/* ---------------------------------------------------------------------------------------------------- */
/* the whole model */

static const GPT2Shape TINY = {16, 60, 128, 2, 2, 16};   /* maxT, V, Vp, L, NH, C */
enum { TB = 2, TT = 8 };

static Backend *make_backend(const GPT2Shape *s, int B, int T) {
    BackendOptions o = {0};
    o.shape = *s; o.B = B; o.T = T; o.precision = PREC_FP32;
    Err err;
    Backend *be = cpu_backend_create(&o, &err);
    if (!be) fprintf(stderr, "cpu_backend_create: %s\n", err.msg);
    return be;
}

/* Fresh init, then every real entry moved by N(0, 0.2): nonzero biases, LayerNorm weights away from 1,
   and weights large enough that attention and GELU are far from linear, so every path matters. */
static void rough_params(const GPT2Shape *s, float *params, unsigned long seed) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(s, sz, off);
    gpt2_init_params(s, params, seed);
    uint64_t rng = seed + 77;
    size_t real_wte = (size_t)s->vocab_size * s->n_embd;
    for (size_t i = 0; i < n; i++)
        if (i >= real_wte && i < sz[P_WTE]) continue;      /* padded rows stay zero */
        else params[i] += 0.2f * rng_normal(&rng);
}

static void tokens(int32_t *x, int n, int V, uint64_t *rng) {
    for (int i = 0; i < n; i++) x[i] = (int32_t)(rng_next(rng) % (uint64_t)V);
}

typedef struct { Backend *be; float *params; const int32_t *inp, *tgt; } ModelCtx;

static double model_loss(void *p) {
    ModelCtx *c = p;
    Err err;
    float loss = NAN;
    if (c->be->set_params(c->be, c->params, &err) || c->be->forward(c->be, c->inp, c->tgt, &loss, &err))
        fprintf(stderr, "model_loss: %s\n", err.msg);
    return loss;
}

/* (a) Gradient of the mean loss w.r.t. samples of every tensor, against central differences in fp32
 * (the quotient formed in double over the step actually taken). The loss (~4) carries fp32 rounding noise
 * of a few 1e-7; with h = 1e-2 that is ~1e-4 in the quotient, and the truncation error h^2 f'''/6 is of the
 * same order; measured worst: ~2e-5. Tolerance: 1e-4 absolute + 2e-3 relative. Samples: 6 random entries
 * per tensor plus its largest-gradient entry (a strong signal). A wrong gradient is off by O(|g|); a 1%
 * error in one term of one op's backward already fails here. */
static void test_model_gradients(void) {
    Backend *be = make_backend(&TINY, TB, TT);
    CHECK(be != NULL, "no backend");
    if (!be) return;
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(&TINY, sz, off);
    float *params = fnew(n), *grads = fnew(n);
    rough_params(&TINY, params, 5);
    uint64_t rng = 99;
    int32_t inp[TB * TT], tgt[TB * TT];
    tokens(inp, TB * TT, TINY.vocab_size, &rng);
    tokens(tgt, TB * TT, TINY.vocab_size, &rng);
    Err err;
    ModelCtx ctx = {be, params, inp, tgt};
    model_loss(&ctx);
    CHECK_OK(be->zero_grad(be, &err), &err);
    CHECK_OK(be->backward(be, 1.0f, &err), &err);
    CHECK_OK(be->get_grads(be, grads, &err), &err);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t span = sz[t];
        if (t == P_WTE) span = (size_t)TINY.vocab_size * TINY.n_embd;   /* real rows */
        if (t == P_WPE) span = (size_t)TT * TINY.n_embd;                /* positions in use */
        size_t idx[7];
        idx[6] = 0;
        for (size_t i = 0; i < span; i++) if (fabsf(grads[off[t] + i]) > fabsf(grads[off[t] + idx[6]])) idx[6] = i;
        for (int k = 0; k < 6; k++) idx[k] = rng_next(&rng) % span;
        ErrStat e = {0};
        for (int k = 0; k < 7; k++)
            err_add(&e, grads[off[t] + idx[k]], central_diff(params, off[t] + idx[k], 1e-2f, model_loss, &ctx), 1e-4, 2e-3);
        printf("  %-9s max abs err %.2e  max rel err %.2e  (largest |g| %.2e)\n", gpt2_param_names[t], e.max_abs,
               e.max_rel, fabs(grads[off[t] + idx[6]]));
        CHECK(e.bad == 0, "%s: %d of 7 sampled gradients off (max abs err %.2e)", gpt2_param_names[t], e.bad, e.max_abs);
    }
    /* exactly zero where the loss cannot reach: padded wte rows, positions beyond T */
    int nonzero = 0;
    for (size_t i = (size_t)TINY.vocab_size * TINY.n_embd; i < sz[P_WTE]; i++) nonzero += grads[off[P_WTE] + i] != 0;
    for (size_t i = (size_t)TT * TINY.n_embd; i < sz[P_WPE]; i++) nonzero += grads[off[P_WPE] + i] != 0;
    CHECK(nonzero == 0, "%d gradients nonzero on padded wte rows or unused positions", nonzero);
    free(params); free(grads);
    be->destroy(be);
}

/* grad_scale scales, and a second backward adds. */
static void test_backward_scales_and_accumulates(void) {
    Backend *be = make_backend(&TINY, TB, TT);
    if (!be) { CHECK(0, "no backend"); return; }
    size_t n = be->num_params;
    float *params = fnew(n), *g1 = fnew(n), *g2 = fnew(n);
    rough_params(&TINY, params, 6);
    uint64_t rng = 7;
    int32_t inp[TB * TT], tgt[TB * TT];
    tokens(inp, TB * TT, TINY.vocab_size, &rng);
    tokens(tgt, TB * TT, TINY.vocab_size, &rng);
    Err err;
    float loss;
    CHECK_OK(be->set_params(be, params, &err), &err);
    CHECK_OK(be->forward(be, inp, tgt, &loss, &err), &err);
    CHECK_OK(be->zero_grad(be, &err), &err);
    CHECK_OK(be->backward(be, 1.0f, &err), &err);
    CHECK_OK(be->get_grads(be, g1, &err), &err);
    CHECK_OK(be->zero_grad(be, &err), &err);
    CHECK_OK(be->backward(be, 0.5f, &err), &err);
    CHECK_OK(be->backward(be, 0.5f, &err), &err);
    CHECK_OK(be->get_grads(be, g2, &err), &err);
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < n; i++) { worst = fmax(worst, fabs(g1[i] - g2[i])); gmax = fmax(gmax, fabs(g1[i])); }
    /* 0.5 is a power of two, so half-gradients are exact; only the sum of two halves rounds */
    CHECK(worst <= 1e-6 * gmax, "backward(0.5) twice differs from backward(1) by %.2e (max |g| %.2e)", worst, gmax);
    free(params); free(g1); free(g2);
    be->destroy(be);
}

/* Misuse gets an error, not a crash. */
static void test_backend_errors(void) {
    Backend *be = make_backend(&TINY, TB, TT);
    if (!be) { CHECK(0, "no backend"); return; }
    Err err;
    float row[60], loss;
    CHECK(be->backward(be, 1.0f, &err) != 0, "backward before any forward was accepted");
    CHECK(be->get_logits(be, 0, 0, row, &err) != 0, "get_logits before any forward was accepted");
    int32_t inp[TB * TT] = {0}, tgt[TB * TT] = {0};
    inp[3] = TINY.vocab_size;
    CHECK(be->forward(be, inp, tgt, &loss, &err) != 0 && strstr(err.msg, "inputs[3]"), "a token id >= V was accepted");
    inp[3] = 0;
    tgt[5] = -1;
    CHECK(be->forward(be, inp, tgt, &loss, &err) != 0 && strstr(err.msg, "targets[5]"), "a negative target was accepted");
    CHECK_OK(be->forward(be, inp, NULL, NULL, &err), &err);
    CHECK(be->backward(be, 1.0f, &err) != 0, "backward after a forward without targets was accepted");
    CHECK_OK(be->get_logits(be, TB - 1, TT - 1, row, &err), &err);
    CHECK(be->get_logits(be, TB, 0, row, &err) != 0, "get_logits outside B was accepted");
    CHECK(be->update(be, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 0, &err) != 0, "update step 0 was accepted");
    BackendOptions o = {0};
    o.shape = TINY; o.B = 1; o.T = TINY.max_seq_len + 1;
    CHECK(cpu_backend_create(&o, &err) == NULL && strstr(err.msg, "max_seq_len"), "T > maxT was accepted");
    be->destroy(be);
}

/* ---------------------------------------------------------------------------------------------------- */
/* (c) determinism, (e) padded rows */

static const GPT2Shape MID = {32, 300, 384, 2, 4, 64};

/* Three AdamW steps on a fixed batch with `threads` OpenMP threads; returns params, losses and norms. */
static void train_steps(int threads, float *params_out, float losses[3], float norms[3]) {
    int prev = omp_get_max_threads();
    omp_set_num_threads(threads);
    Backend *be = make_backend(&MID, 2, 32);
    float *params = fnew(be->num_params);
    gpt2_init_params(&MID, params, 42);
    uint64_t rng = 3;
    int32_t inp[64], tgt[64];
    tokens(inp, 64, MID.vocab_size, &rng);
    tokens(tgt, 64, MID.vocab_size, &rng);
    Err err;
    CHECK_OK(be->set_params(be, params, &err), &err);
    for (int s = 0; s < 3; s++) {
        CHECK_OK(be->zero_grad(be, &err), &err);
        CHECK_OK(be->forward(be, inp, tgt, &losses[s], &err), &err);
        CHECK_OK(be->backward(be, 1.0f, &err), &err);
        CHECK_OK(be->grad_norm(be, &norms[s], &err), &err);
        float scale = norms[s] > 1.0f ? 1.0f / norms[s] : 1.0f;
        CHECK_OK(be->update(be, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, scale, s + 1, &err), &err);
    }
    CHECK_OK(be->get_params(be, params_out, &err), &err);
    free(params);
    be->destroy(be);
    omp_set_num_threads(prev);
}

static void test_determinism(void) {
    size_t sz[NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(&MID, sz, NULL);
    float *p1 = fnew(n), *p2 = fnew(n), *p3 = fnew(n);
    float l1[3], l2[3], l3[3], n1[3], n2[3], n3[3];
    train_steps(2, p1, l1, n1);
    train_steps(2, p2, l2, n2);
    train_steps(3, p3, l3, n3);   /* another thread count: work splits differently, sums must not */
    printf("  losses %.6f %.6f %.6f, grad norms %.4f %.4f %.4f\n", l1[0], l1[1], l1[2], n1[0], n1[1], n1[2]);
    CHECK(memcmp(p1, p2, n * sizeof(float)) == 0 && memcmp(l1, l2, sizeof l1) == 0 && memcmp(n1, n2, sizeof n1) == 0,
          "two identical runs differ");
    CHECK(memcmp(p1, p3, n * sizeof(float)) == 0 && memcmp(l1, l3, sizeof l1) == 0 && memcmp(n1, n3, sizeof n1) == 0,
          "2 and 3 threads give different bits");
    CHECK(l1[2] < l1[0], "loss did not go down on a fixed batch: %.6f -> %.6f", l1[0], l1[2]);
    /* (e) padded wte rows are exactly zero after the updates */
    int nonzero = 0;
    for (size_t i = (size_t)MID.vocab_size * MID.n_embd; i < sz[P_WTE]; i++) nonzero += p1[i] != 0.0f;
    CHECK(nonzero == 0, "%d entries of the padded wte rows are nonzero after 3 updates", nonzero);
    free(p1); free(p2); free(p3);
}

/* (d) AdamW against the formula in fp64, three steps with weight decay and a gradient scale. A handful of
   fp32 operations per step: 1e-6 relative is ~10 ulps. */
static void test_adamw(void) {
    float p[4] = {0.5f, -1.25f, 3.0f, 0.0f}, m[4] = {0}, v[4] = {0};
    double pd[4] = {0.5, -1.25, 3.0, 0.0}, md[4] = {0}, vd[4] = {0};
    const float g[3][4] = {{0.1f, -2.0f, 1e-3f, 0.7f}, {-0.3f, 1.5f, 2e-3f, 0.0f}, {0.2f, 0.4f, -1e-3f, -0.7f}};
    double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
    double worst = 0;
    for (int s = 1; s <= 3; s++) {
        cpu_adamw(p, g[s - 1], m, v, 4, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)gs, s);
        for (int i = 0; i < 4; i++) {
            double gg = (double)g[s - 1][i] * gs;
            md[i] = b1 * md[i] + (1 - b1) * gg;
            vd[i] = b2 * vd[i] + (1 - b2) * gg * gg;
            double mh = md[i] / (1 - pow(b1, s)), vh = vd[i] / (1 - pow(b2, s));
            pd[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pd[i]);
            worst = fmax(worst, fabs(p[i] - pd[i]) / fmax(fabs(pd[i]), 1e-3));
        }
    }
    printf("  adamw vs fp64: max rel err %.2e\n", worst);
    CHECK(worst < 1e-6, "adamw differs from fp64 by %.2e relative", worst);
}

/* ---------------------------------------------------------------------------------------------------- */
/* (f) the PyTorch golden file; its format is described in tests/reference/README.md */

/* Gradients: PyTorch and we sum in different orders; fp32 reductions over <= 4096 terms err by ~1e-6 of
   the tensor's scale. Tolerance: 1e-4 of the tensor's largest |gradient|, per element. */
static void golden_grads(Backend *be, const Golden *g) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&g->shape, sz, off);
    float *grads = fnew(g->n);
    Err err;
    CHECK_OK(be->get_grads(be, grads, &err), &err);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        double scale = 0, worst = 0;
        for (size_t i = 0; i < sz[t]; i++) scale = fmax(scale, fabs(g->grads[off[t] + i]));
        for (size_t i = 0; i < sz[t]; i++) worst = fmax(worst, fabs(grads[off[t] + i] - g->grads[off[t] + i]));
        printf("  grad %-9s max abs err %.2e  rel to max|g| %.2e  (max|g| %.2e)\n", gpt2_param_names[t], worst,
               scale > 0 ? worst / scale : 0, scale);
        CHECK(worst <= 1e-4 * scale + 1e-12, "gradient of %s: max abs err %.2e, max|g| %.2e", gpt2_param_names[t], worst, scale);
    }
    free(grads);
}

/* The AdamW steps: losses to 1e-4 absolute (~1.5e-5 relative at ln(1000)); the updates are lr-sized steps whose
   rounding differences are ~1e-6 relative, so the loss curves agree far closer than that. */
static void golden_steps(Backend *be, const Golden *g) {
    GoldenRun r = golden_run_steps(be, g, NULL);
    CHECK(r.ok, "%s", r.why);
    CHECK(r.worst_loss <= 1e-4, "step losses differ by up to %.2e", r.worst_loss);
    CHECK(r.worst_norm <= 1e-4, "grad norms differ by up to %.2e relative", r.worst_norm);
    CHECK(r.worst_final <= 1e-4, "final parameter norms differ by up to %.2e relative", r.worst_final);
}

static void test_golden(void) {
    golden_paths();
    if (!file_exists(golden_path))
        SKIP("%s is absent: generate it where PyTorch is (python3 tests/reference/gpt2_reference.py --out tests/reference) and commit it", golden_path);
    Err err;
    Golden g;
    float *params = NULL;
    char *buf = golden_load(&g, &params, &err);
    if (!buf) { CHECK(0, "%s", err.msg); return; }
    Backend *be = NULL;
    be = make_backend(&g.shape, g.B, g.T);
    if (!be) { CHECK(0, "no backend"); goto out; }
    float loss;
    CHECK_OK(be->set_params(be, params, &err), &err);
    CHECK_OK(be->forward(be, g.inputs, g.targets, &loss, &err), &err);
    /* logits: O(0.1-1) values from sums of C=64 products; fp32 agrees to ~1e-6, tolerance 2e-5 */
    float *row = fnew(g.shape.vocab_size);
    double lerr = 0;
    for (int b = 0; b < g.logits_B; b++)
        for (int t = 0; t < g.T; t++) {
            CHECK_OK(be->get_logits(be, b, t, row, &err), &err);
            const float *ref = g.logits + ((size_t)b * g.T + t) * g.shape.vocab_size;
            for (int i = 0; i < g.shape.vocab_size; i++) lerr = fmax(lerr, fabs(row[i] - ref[i]));
        }
    free(row);
    printf("  logits max abs err %.2e; loss %.7f, reference %.7f\n", lerr, loss, *g.loss);
    CHECK(lerr <= 2e-5, "logits differ by up to %.2e", lerr);
    /* loss ~6.9, a mean of 128 terms: fp32 agrees to ~1e-6; tolerance 1e-5 */
    CHECK(fabs(loss - *g.loss) <= 1e-5, "loss %.7f, reference %.7f", loss, *g.loss);
    CHECK_OK(be->zero_grad(be, &err), &err);
    CHECK_OK(be->backward(be, 1.0f, &err), &err);
    golden_grads(be, &g);
    CHECK_OK(be->set_params(be, params, &err), &err);   /* the steps start from the initial weights */
    golden_steps(be, &g);
out:
    if (be) be->destroy(be);
    free(params);
    free(buf);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_layernorm_backward);
    RUN(test_matmul_backward);
    RUN(test_matmul_vs_naive);
    RUN(test_attention_backward);
    RUN(test_gelu);
    RUN(test_softmax_crossentropy);
    RUN(test_encoder);
    RUN(test_model_gradients);
    RUN(test_backward_scales_and_accumulates);
    RUN(test_backend_errors);
    RUN(test_determinism);
    RUN(test_adamw);
    RUN(test_golden);
    return check_summary();
}
