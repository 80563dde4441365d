/* test_cpu_ops: the fp32 reference ops (runtime/cpu/cpu_ops.c): each op's backward against central differences
   of its forward, matmul against a naive product, and grouped-query attention against multi-head attention on
   its expanded keys and values (the GPU's way). The whole model and the CPU backend: test_cpu_model.c. */
#include <math.h>
#include "common/files.h"
#include "common/rng.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/cpu/cpu_ops.h"
#include "tests/check.h"
#include "tests/fd.h"

/* CHECK_OK copies an Err message (4 KiB) into the harness's 1 KiB reason: truncation is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

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
        worst = worse(worst, fabs(s - 1));
    }
    CHECK(worst < 1e-6 && above == 0, "attention rows sum to 1 within %.2e, %d entries above the diagonal", worst, above);
    free(c.qkv); free(c.out); free(c.preatt); free(c.att); free(c.R); free(dqkv); free(dpre); free(datt);
}

/* Grouped-query attention as cuDNN's path runs it (Plan.kv_expand, templates/rope.cu): multi-head attention on qkv with
   each kv head repeated for its NH/NKV query heads, the gradients of the repeats summed back in query-head order,
   equals grouped-query attention itself (cpu_attention_*_gqa), forward and backward */
static void test_gqa_by_expansion(void) {
    uint64_t rng = 17;
    CpuHeads g = {2, 5, 4, 2, 8};
    int C = g.NH * g.HS, G = g.NH / g.NKV;
    size_t W = (size_t)(g.NH + 2 * g.NKV) * g.HS, N = (size_t)g.B * g.T, na = (size_t)g.B * g.NH * g.T * g.T;
    float *qkv = fnew(N * W), *x = fnew(N * 3 * C), *out = fnew(N * C), *ref = fnew(N * C), *R = fnew(N * C);
    float *pre = fnew(na), *att = fnew(na), *att_x = fnew(na), *datt = fnew(na), *dpre = fnew(na);
    float *d = fnew(N * W), *dx = fnew(N * 3 * C), *dsum = fnew(N * W);
    fill_normal(qkv, N * W, 1.0f, &rng);
    fill_normal(R, N * C, 1.0f, &rng);
    size_t *src = malloc(3 * (size_t)C * sizeof *src);   /* kv_expand's map: feature f of 3C -> its feature in W */
    for (int f = 0; f < 3 * C; f++) {
        int part = f / C, h = f % C / g.HS, c = f % g.HS;
        src[f] = part == 0 ? (size_t)f : (size_t)((part == 1 ? g.NH : g.NH + g.NKV) * g.HS + h / G * g.HS + c);
    }
    for (size_t r = 0; r < N; r++)
        for (int f = 0; f < 3 * C; f++) x[r * 3 * C + f] = qkv[r * W + src[f]];
    cpu_attention_forward_gqa(ref, pre, att, qkv, g);
    cpu_attention_forward(out, pre, att_x, x, g.B, g.T, C, g.NH);
    double worst = 0;
    for (size_t i = 0; i < N * C; i++) worst = worse(worst, fabs(out[i] - ref[i]));
    CHECK(worst < 1e-6, "forward: expanded multi-head attention differs from grouped-query attention by %.2e", worst);
    cpu_attention_backward_gqa(d, dpre, datt, R, qkv, att, g);
    cpu_attention_backward(dx, dpre, datt, R, x, att_x, g.B, g.T, C, g.NH);
    for (size_t r = 0; r < N; r++)
        for (int f = 0; f < 3 * C; f++) dsum[r * W + src[f]] += dx[r * 3 * C + f];
    worst = 0;
    for (size_t i = 0; i < N * W; i++) worst = worse(worst, fabs(dsum[i] - d[i]));
    CHECK(worst < 1e-5, "backward: the repeats' gradients summed differ from grouped-query attention's by %.2e", worst);
    free(qkv); free(x); free(out); free(ref); free(R); free(pre); free(att); free(att_x); free(datt); free(dpre);
    free(d); free(dx); free(dsum); free(src);
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
        fmaxerr = worse(fmaxerr, fabs(y - c.out[i]));
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
        lerr = worse(lerr, fabs(log(s) - c.logits[n * Vp + tg[n]] - c.losses[n]));
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

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_layernorm_backward);
    RUN(test_matmul_backward);
    RUN(test_matmul_vs_naive);
    RUN(test_attention_backward);
    RUN(test_gqa_by_expansion);
    RUN(test_gelu);
    RUN(test_softmax_crossentropy);
    RUN(test_encoder);
    return check_summary();
}
