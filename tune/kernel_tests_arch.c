/* kernel_tests_arch: the tests of the kernel families of GPT-2's relatives (templates/rmsnorm.cu, rope.cu,
   activation.cu), each against the CPU reference op (runtime/cpu/cpu_ops_arch.c) at the plan's shape and precision;
   see families.h. The backward kernels that sum weight gradients run twice: the same bits each time. */
#include "tune/families.h"
#include "runtime/cuda/tune_api.h"
#include "runtime/cpu/cpu_ops.h"
#include "common/rng.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CpuHeads heads(const Harness *g) {
    const GPT2Shape *s = &g->plan->model;
    return (CpuHeads){g->B, g->T, s->n_head, gpt2_kv_heads(s), gpt2_head_size(s)};
}
static size_t qkv_width(const Harness *g) { return (size_t)gpt2_qkv_width(&g->plan->model); }
static float eps(const Harness *g) { return gpt2_norm_eps(&g->plan->model); }
static void same_bits(HarnessCmp *c, const char *what, const float *a, const float *b, size_t n) {
    if (memcmp(a, b, n * 4) && !c->bad) { c->bad = 1; snprintf(c->what, sizeof c->what, "%s differs between two runs", what); }
}

/* RMSNorm: forward, with the residual add, and the backward accumulating onto random dinp and dweight */
static void test_rmsnorm_rows(Harness *g) {
    size_t N = g->BT, C = g->C;
    float *x = harness_hrand(g, N * C, 2.0f), *x2 = harness_hrand(g, N * C, 2.0f), *w = harness_hrand(g, C, 1.0f);
    float *ref = harness_hbuf(N * C), *rstd = harness_hbuf(N), *got = harness_hbuf(N * C), *gr = harness_hbuf(N);
    float *res = harness_hbuf(N * C);
    Err err = {{0}};
    dptr dx = harness_dup_x(g, x, N * C), dx2 = harness_dup_x(g, x2, N * C), dw = harness_dup_x(g, w, C);
    dptr dout = harness_dalloc(g, N * C * g->xs), drstd = harness_dalloc(g, N * 4), dres = harness_dalloc(g, N * C * g->xs);
    for (int fused = 0; fused < 2; fused++) {
        const float *in = x;
        if (fused) {
            for (size_t i = 0; i < N * C; i++) res[i] = x[i] + x2[i];
            harness_quantize(g, res, N * C);
            in = res;
        }
        cpu_rmsnorm_forward(ref, rstd, in, w, (int)N, (int)C, eps(g));
        harness_quantize(g, ref, N * C);
        int rc = fused ? launch_fused_residual_rmsnorm_forward(&g->ks, g->s, dres, dout, drstd, dx, dx2, dw, &err)
                       : launch_rmsnorm_forward(&g->ks, g->s, dout, drstd, dx, dw, &err);
        HarnessCmp c = {0, 0, ""};
        if (!rc) {
            if (fused) { harness_down(g, got, dres, N * C); harness_cmp(&c, "residual", got, res, N * C, g->tol); }
            harness_down(g, got, dout, N * C);
            harness_cmp(&c, "out", got, ref, N * C, g->tol);
            cu.cuMemcpyDtoH(gr, drstd, N * 4);
            harness_cmp(&c, "rstd", gr, rstd, N, 1e-5);
        }
        harness_finish(g, fused ? "fused_residual_rmsnorm_forward" : "rmsnorm_forward", &c, &err, rc);
    }
    /* the backward of the plain forward's row statistics (rstd of x) */
    cpu_rmsnorm_forward(ref, rstd, x, w, (int)N, (int)C, eps(g));
    float *dy = harness_hrand(g, N * C, 1.0f), *dinp0 = harness_hrand(g, N * C, 1.0f), *dw0 = harness_hrand(g, C, 1.0f);
    float *rdinp = xmalloc(N * C * 4), *rdw = xmalloc(C * 4), *again = harness_hbuf(N * C), *gdw = harness_hbuf(C), *gdw2 = harness_hbuf(C);
    memcpy(rdinp, dinp0, N * C * 4);
    memcpy(rdw, dw0, C * 4);
    cpu_rmsnorm_backward(rdinp, rdw, dy, x, w, rstd, (int)N, (int)C);
    size_t parts = g->plan->kernels[K_RMSNORM_BACKWARD].dims.grid[0];
    dptr ddy = harness_dup_x(g, dy, N * C), ddinp = harness_dalloc(g, N * C * g->xs), ddw = harness_dalloc(g, C * g->xs);
    dptr scratch = harness_dalloc(g, parts * C * 4);
    cu.cuMemcpyHtoD(drstd, rstd, N * 4);
    int rc = 0;
    for (int rep = 0; rep < 2 && !rc; rep++) {
        harness_up(g, ddinp, dinp0, N * C);
        harness_up(g, ddw, dw0, C);
        rc = launch_rmsnorm_backward(&g->ks, g->s, ddinp, scratch, ddy, dx, dw, drstd, &err) ||
             launch_rmsnorm_backward_reduce(&g->ks, g->s, ddw, scratch, &err);
        if (!rc) { harness_down(g, rep ? again : got, ddinp, N * C); harness_down(g, rep ? gdw2 : gdw, ddw, C); }
    }
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        harness_cmp(&c, "dinp", got, rdinp, N * C, g->tol);
        harness_cmp(&c, "dweight", gdw, rdw, C, g->tol);
        same_bits(&c, "dinp", got, again, N * C);
        same_bits(&c, "dweight", gdw, gdw2, C);
    }
    harness_finish(g, "rmsnorm_backward (deterministic)", &c, &err, rc);
    free(x); free(x2); free(w); free(ref); free(rstd); free(got); free(gr); free(res); free(dy); free(dinp0); free(dw0);
    free(rdinp); free(rdw); free(again); free(gdw); free(gdw2);
    harness_dfree_all(g);
}

/* QK-norm's test inputs on the host and the GPU: qkv x, the weights, the CPU's rstd; the plan's positions (a decode
   step's and a prefill's from the cache's position pos, here 5, else from 0) and whether the kernels rotate */
typedef struct {
    CpuHeads h;
    size_t N, W, HS, nh;
    int32_t pos;
    int rotates;
    double theta;
    float *x, *qw, *kw, *rstd;
    dptr dx, dqw, dkw, drstd, dpos;
} QkCase;

/* the forward into another buffer (v copied), against the CPU's norm (then, where the kernels rotate, RoPE) */
static int test_qk_norm_forward(Harness *g, QkCase *q) {
    size_t N = q->N, W = q->W, nh = q->nh;
    float *ref = harness_hbuf(N * W), *got = harness_hbuf(N * W), *gr = harness_hbuf(N * nh);
    Err err = {{0}};
    dptr dout = harness_dalloc(g, N * W * g->xs);
    cpu_qk_norm_forward(ref, q->rstd, q->x, q->qw, q->kw, (int)N, q->h, eps(g));
    if (q->rotates) {
        harness_quantize(g, ref, N * W);   /* the norm's output as stored, then rotated */
        cpu_rope(ref, q->pos, q->h, q->theta, 1);
    }
    harness_quantize(g, ref, N * W);
    int rc = launch_qk_norm_forward(&g->ks, g->s, dout, q->drstd, q->dx, q->dqw, q->dkw, q->dpos, &err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        harness_down(g, got, dout, N * W);
        harness_cmp(&c, "out", got, ref, N * W, g->tol);
        cu.cuMemcpyDtoH(gr, q->drstd, N * nh * 4);
        harness_cmp(&c, "rstd", gr, q->rstd, N * nh, 1e-5);
    }
    harness_finish(g, q->rotates ? "qk_norm_forward with RoPE" : "qk_norm_forward", &c, &err, rc);
    free(ref); free(got); free(gr);
    return rc;
}

/* the backward in place, twice (the same bits), against the CPU's (where the kernels rotate, after RoPE's backward) */
static void test_qk_norm_backward(Harness *g, QkCase *q) {
    size_t N = q->N, W = q->W, HS = q->HS;
    float *dy = harness_hrand(g, N * W, 1.0f), *gq0 = harness_hrand(g, HS, 1.0f), *gk0 = harness_hrand(g, HS, 1.0f);
    float *rd = xmalloc(N * W * 4), *rq = xmalloc(HS * 4), *rk = xmalloc(HS * 4), *again = harness_hbuf(N * W);
    float *got = harness_hbuf(N * W), *gq = harness_hbuf(2 * HS), *gq2 = harness_hbuf(2 * HS);
    memcpy(rd, dy, N * W * 4);
    memcpy(rq, gq0, HS * 4);
    memcpy(rk, gk0, HS * 4);
    if (q->rotates) {
        cpu_rope(rd, q->pos, q->h, q->theta, -1);
        harness_quantize(g, rd, N * W);   /* the gradient rotated back, as stored */
    }
    cpu_qk_norm_backward(rd, q->x, q->qw, q->kw, q->rstd, rq, rk, (int)N, q->h);
    size_t parts = g->plan->kernels[K_QK_NORM_BACKWARD].dims.grid[0];
    dptr dd = harness_dalloc(g, N * W * g->xs), dgq = harness_dalloc(g, HS * g->xs), dgk = harness_dalloc(g, HS * g->xs);
    dptr scratch = harness_dalloc(g, parts * 2 * HS * 4);
    Err err = {{0}};
    int rc = 0;
    cu.cuMemcpyHtoD(q->drstd, q->rstd, q->N * q->nh * 4);
    for (int rep = 0; rep < 2 && !rc; rep++) {
        harness_up(g, dd, dy, N * W);
        harness_up(g, dgq, gq0, HS);
        harness_up(g, dgk, gk0, HS);
        rc = launch_qk_norm_backward(&g->ks, g->s, dd, scratch, q->dx, q->dqw, q->dkw, q->drstd, q->dpos, &err) ||
             launch_qk_norm_backward_reduce(&g->ks, g->s, dgq, dgk, scratch, &err);
        if (!rc) {
            float *w = rep ? gq2 : gq;
            harness_down(g, rep ? again : got, dd, N * W);
            harness_down(g, w, dgq, HS);
            harness_down(g, w + HS, dgk, HS);
        }
    }
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        harness_cmp(&c, "dinp", got, rd, N * W, g->tol);
        harness_cmp(&c, "dqw", gq, rq, HS, g->tol);
        harness_cmp(&c, "dkw", gq + HS, rk, HS, g->tol);
        same_bits(&c, "dinp", got, again, N * W);
        same_bits(&c, "dqw and dkw", gq, gq2, 2 * HS);
    }
    harness_finish(g, q->rotates ? "qk_norm_backward with RoPE (deterministic)" : "qk_norm_backward (deterministic)", &c,
                   &err, rc);
    free(dy); free(gq0); free(gk0); free(rd); free(rq); free(rk); free(again); free(got); free(gq); free(gq2);
}

static void test_qk_norm(Harness *g) {
    QkCase q = {.h = heads(g), .N = g->BT, .W = qkv_width(g)};
    const StepShape *st = &g->plan->step;
    q.HS = (size_t)q.h.HS;
    q.nh = (size_t)(q.h.NH + q.h.NKV);
    q.pos = st->kind == STEP_DECODE || st->fills_cache ? 5 : 0;
    q.rotates = gpt2_qk_norm_rotates(&g->plan->model);
    q.theta = gpt2_rope_theta(&g->plan->model);
    q.x = harness_hrand(g, q.N * q.W, 2.0f);
    q.qw = harness_hrand(g, q.HS, 1.0f);
    q.kw = harness_hrand(g, q.HS, 1.0f);
    q.rstd = harness_hbuf(q.N * q.nh);
    q.dx = harness_dup_x(g, q.x, q.N * q.W);
    q.dqw = harness_dup_x(g, q.qw, q.HS);
    q.dkw = harness_dup_x(g, q.kw, q.HS);
    q.drstd = harness_dalloc(g, q.N * q.nh * 4);
    q.dpos = harness_dup_raw(g, &q.pos, 4);
    if (!test_qk_norm_forward(g, &q)) test_qk_norm_backward(g, &q);
    free(q.x); free(q.qw); free(q.kw); free(q.rstd);
    harness_dfree_all(g);
}

void kernel_test_rmsnorm(Harness *g) {
    test_rmsnorm_rows(g);
    test_qk_norm(g);
}

/* RoPE forward and backward in place, at the plan's positions (a decode step's and a prefill's from the cache's
   position pos, here 5, else from 0) */
static void test_rope(Harness *g) {
    CpuHeads h = heads(g);
    size_t N = g->BT, W = qkv_width(g);
    const StepShape *st = &g->plan->step;
    int32_t pos = st->kind == STEP_DECODE || st->fills_cache ? 5 : 0;
    float *x = harness_hrand(g, N * W, 2.0f), *ref = harness_hbuf(N * W), *got = harness_hbuf(N * W);
    Err err = {{0}};
    dptr dx = harness_dup_x(g, x, N * W), dpos = harness_dup_raw(g, &pos, 4);
    for (int dir = 1; dir >= -1; dir -= 2) {
        memcpy(ref, x, N * W * 4);
        cpu_rope(ref, pos, h, gpt2_rope_theta(&g->plan->model), dir);
        harness_quantize(g, ref, N * W);
        harness_up(g, dx, x, N * W);
        int rc = dir > 0 ? launch_rope_forward(&g->ks, g->s, dx, dpos, &err) : launch_rope_backward(&g->ks, g->s, dx, dpos, &err);
        HarnessCmp c = {0, 0, ""};
        if (!rc) { harness_down(g, got, dx, N * W); harness_cmp(&c, dir > 0 ? "qkv" : "dqkv", got, ref, N * W, g->tol); }
        harness_finish(g, dir > 0 ? "rope_forward" : "rope_backward", &c, &err, rc);
    }
    free(x); free(ref); free(got);
    harness_dfree_all(g);
}

/* kv_expand against its definition: row (q, then k and v of NH heads each), query head j's k and v those of kv head
   j / (NH/NKV); kv_reduce: dq as it is, each kv head's dk and dv the sum over its query heads' */
static void test_kv(Harness *g) {
    CpuHeads h = heads(g);
    size_t N = g->BT, W = qkv_width(g), C = g->C, HS = (size_t)h.HS, G = (size_t)(h.NH / h.NKV);
    float *x = harness_hrand(g, N * W, 2.0f), *ref = harness_hbuf(N * 3 * C), *got = harness_hbuf(N * 3 * C);
    float *d = harness_hrand(g, N * 3 * C, 1.0f), *rd = harness_hbuf(N * W), *gd = harness_hbuf(N * W);
    for (size_t r = 0; r < N; r++)
        for (size_t f = 0; f < 3 * C; f++) {
            size_t part = f / C, j = f % C / HS, c = f % HS;
            size_t src = part == 0 ? f : (part == 1 ? C : C + (size_t)h.NKV * HS) + j / G * HS + c;
            ref[r * 3 * C + f] = x[r * W + src];
            rd[r * W + src] += d[r * 3 * C + f];   /* dq: the one term; dk, dv: in query-head order */
        }
    harness_quantize(g, rd, N * W);
    Err err = {{0}};
    dptr dx = harness_dup_x(g, x, N * W), dout = harness_dalloc(g, N * 3 * C * g->xs);
    dptr dd = harness_dup_x(g, d, N * 3 * C), dred = harness_dalloc(g, N * W * g->xs);
    int rc = launch_kv_expand(&g->ks, g->s, dout, dx, &err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) { harness_down(g, got, dout, N * 3 * C); harness_cmp(&c, "out", got, ref, N * 3 * C, 0); }
    harness_finish(g, "kv_expand", &c, &err, rc);
    rc = launch_kv_reduce(&g->ks, g->s, dred, dd, &err);
    c = (HarnessCmp){0, 0, ""};
    if (!rc) { harness_down(g, gd, dred, N * W); harness_cmp(&c, "dqkv", gd, rd, N * W, g->tol); }
    harness_finish(g, "kv_reduce", &c, &err, rc);
    free(x); free(ref); free(got); free(d); free(rd); free(gd);
    harness_dfree_all(g);
}

void kernel_test_rope(Harness *g) {
    test_rope(g);
    test_kv(g);
}

/* one elementwise kernel's output (n values at dev) against ref, quantized */
static void cmp_elems(Harness *g, const char *name, const char *tensor, dptr dev, float *ref, size_t n, Err *err, int rc) {
    float *got = harness_hbuf(n);
    HarnessCmp c = {0, 0, ""};
    harness_quantize(g, ref, n);
    if (!rc) { harness_down(g, got, dev, n); harness_cmp(&c, tensor, got, ref, n, g->tol); }
    harness_finish(g, name, &c, err, rc);
    free(got);
}

static void test_mlp_act(Harness *g) {
    size_t n = (size_t)g->BT * gpt2_ffn(&g->plan->model);
    float *pre = harness_hrand(g, n, 3.0f), *gate = harness_hrand(g, n, 4.0f), *dy = harness_hrand(g, n, 1.0f);
    float *ref = harness_hbuf(n), *ref2 = harness_hbuf(n);
    Err err = {{0}};
    dptr dpre = harness_dup_x(g, pre, n), dgate = harness_dup_x(g, gate, n), dout = harness_dalloc(g, n * g->xs);
    dptr dd = harness_dup_x(g, dy, n), ddg = harness_dalloc(g, n * g->xs);
    cpu_relu2_forward(ref, pre, n);
    cmp_elems(g, "relu2_forward", "out", dout, ref, n, &err, launch_relu2_forward(&g->ks, g->s, dout, dpre, (long long)n, &err));
    memcpy(ref, dy, n * 4);
    cpu_relu2_backward(ref, pre, n);
    cmp_elems(g, "relu2_backward", "dinp", dd, ref, n, &err, launch_relu2_backward(&g->ks, g->s, dd, dpre, (long long)n, &err));
    cpu_swiglu_forward(ref, pre, gate, n);   /* pre as the up projection */
    cmp_elems(g, "swiglu_forward", "out", dout, ref, n, &err,
              launch_swiglu_forward(&g->ks, g->s, dout, dpre, dgate, (long long)n, &err));
    memcpy(ref, dy, n * 4);
    cpu_swiglu_backward(ref, ref2, pre, gate, n);
    harness_up(g, dd, dy, n);
    int rc = launch_swiglu_backward(&g->ks, g->s, dd, ddg, dpre, dgate, (long long)n, &err);
    cmp_elems(g, "swiglu_backward (d up)", "dup", dd, ref, n, &err, rc);
    cmp_elems(g, "swiglu_backward (dgate)", "dgate", ddg, ref2, n, &err, rc);
    free(pre); free(gate); free(dy); free(ref); free(ref2);
    harness_dfree_all(g);
}

/* the soft-cap on rows of logits (a decode step's; a training step's loss caps in classifier_forward, whose test,
   kernel_test_classifier, checks the cap's gradient) against the CPU's */
static void test_softcap(Harness *g) {
    int R = g->plan->classifier_rows, N = R < 128 ? R : 128, Vp = g->Vp;
    size_t n = (size_t)N * Vp;
    float cap = (float)g->plan->model.logit_softcap;
    float *raw = harness_hrand(g, n, 3.0f * cap), *capped = xmalloc(n * 4);
    memcpy(capped, raw, n * 4);
    cpu_softcap_forward(capped, n, cap);
    Err err = {{0}};
    dptr dlog = harness_dalloc(g, n * g->xs);
    harness_up(g, dlog, raw, n);
    int rc = launch_softcap_forward(&g->ks, g->s, dlog, (long long)n, &err);
    cmp_elems(g, "softcap_forward", "logits", dlog, capped, n, &err, rc);
    free(raw); free(capped);
    harness_dfree_all(g);
}

void kernel_test_activation(Harness *g) {
    test_mlp_act(g);
    if (g->plan->model.logit_softcap > 0) test_softcap(g);
    else {   /* the family is in the plan for its MLP: the cap's kernels have nothing to cap */
        g->skipped[K_SOFTCAP_FORWARD] = 1;
        harness_skip(g, "softcap", "the model has no logit_softcap");
    }
}
