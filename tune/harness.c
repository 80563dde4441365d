/* harness: buffers, comparisons and reports of the GPU tests (see harness.h). */
#include "tune/harness.h"
#include "common/fp16.h"
#include "common/rng.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reporting: one line per test through tune/report.h, named "<config>/<test>" ---- */
void harness_report(Harness *g, ReportKind kind, const char *name, const char *fmt, ...) {
    char full[512];
    snprintf(full, sizeof full, "%s/%s", g->cfg->name, name);
    va_list ap;
    va_start(ap, fmt);
    report_vline(kind, full, fmt, ap);
    va_end(ap);
}

/* ---- memory ---- */
dptr harness_dalloc(Harness *g, size_t bytes) {
    dptr p = 0;
    if (g->nalloc == 64 || cu.cuMemAlloc(&p, bytes ? bytes : 16) != CUDA_SUCCESS) {
        fprintf(stderr, "kernel_tests: cannot allocate %zu bytes on the GPU\n", bytes);
        exit(EXIT_FAIL);
    }
    cu.cuMemsetD8(p, 0, bytes ? bytes : 16);
    g->allocs[g->nalloc++] = p;
    return p;
}
void harness_dfree_all(Harness *g) {
    for (int i = 0; i < g->nalloc; i++) cu.cuMemFree(g->allocs[i]);
    g->nalloc = 0;
}
float *harness_hbuf(size_t n) { return xcalloc(n ? n : 1, sizeof(float)); }

/* rounds to what floatX can hold, so that GPU and CPU see the same inputs */
void harness_quantize(Harness *g, float *x, size_t n) {
    if (g->xs == 2)
        for (size_t i = 0; i < n; i++) x[i] = x16_round(g->prec == PREC_FP16, x[i]);
}
float *harness_hrand(Harness *g, size_t n, float scale) {
    float *x = harness_hbuf(n);
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(&g->rng) - 1.0f);
    harness_quantize(g, x, n);
    return x;
}
int harness_up(Harness *g, dptr d, const float *h, size_t n) {   /* floatX */
    if (g->xs == 4) return cu.cuMemcpyHtoD(d, h, n * 4) == CUDA_SUCCESS ? 0 : -1;
    uint16_t *t = xmalloc(n * 2);
    x16_from_f32_array(g->prec == PREC_FP16, t, h, n);
    int rc = cu.cuMemcpyHtoD(d, t, n * 2) == CUDA_SUCCESS ? 0 : -1;
    free(t);
    return rc;
}
int harness_down(Harness *g, float *h, dptr d, size_t n) {
    if (g->xs == 4) return cu.cuMemcpyDtoH(h, d, n * 4) == CUDA_SUCCESS ? 0 : -1;
    uint16_t *t = xmalloc(n * 2);
    int rc = cu.cuMemcpyDtoH(t, d, n * 2) == CUDA_SUCCESS ? 0 : -1;
    x16_to_f32_array(g->prec == PREC_FP16, h, t, n);
    free(t);
    return rc;
}
dptr harness_dup_x(Harness *g, const float *h, size_t n) {        /* new floatX device copy */
    dptr d = harness_dalloc(g, n * g->xs);
    if (d) harness_up(g, d, h, n);
    return d;
}
dptr harness_dup_raw(Harness *g, const void *h, size_t bytes) {
    dptr d = harness_dalloc(g, bytes);
    if (d) cu.cuMemcpyHtoD(d, h, bytes);
    return d;
}

/* max |got - ref| relative to max |ref| */
double harness_relerr(const float *got, const float *ref, size_t n) {
    double emax = 0, rmax = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (isnan(e) || e > emax) emax = e;   /* a NaN, once seen, stays: the result is NaN */
        if (fabs(ref[i]) > rmax) rmax = fabs(ref[i]);
    }
    return emax / (rmax > 1e-30 ? rmax : 1e-30);
}

/* One comparison inside a test: records the worst error; a failure names the tensor. */
void harness_cmp(HarnessCmp *c, const char *tensor, const float *got, const float *ref, size_t n, double tol) {
    harness_cmp_value(c, tensor, harness_relerr(got, ref, n), 0, tol);
}
void harness_cmp_value(HarnessCmp *c, const char *tensor, double e, size_t nonfinite, double tol) {
    if (isnan(e) || e > c->worst) c->worst = e;
    if (c->bad) return;
    if (nonfinite) { c->bad = 1; snprintf(c->what, sizeof c->what, "%s: %zu values are not finite", tensor, nonfinite); }
    else if (!(e <= tol)) { c->bad = 1; snprintf(c->what, sizeof c->what, "%s: max error %.3g > %.1g", tensor, e, tol); }
}
void harness_failed(HarnessCmp *c, const char *fmt, ...) {
    if (c->bad) return;
    c->bad = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->what, sizeof c->what, fmt, ap);
    va_end(ap);
}
void harness_finish(Harness *g, const char *name, HarnessCmp *c, Err *err, int launch_rc) {
    if (launch_rc) harness_fail(g, name, "%s", err->msg);
    else if (c->bad) harness_fail(g, name, "%s", c->what);
    else harness_ok(g, name, "max err %.2e", c->worst);
}

/* waits for the stream after matmuls (kernel launches synchronize themselves: sync_each) */
int harness_wait(Harness *g, Err *err) { return cuda_device_sync(&g->dev, "waiting for the GPU", err); }

/* the Harness of cfg and plan, on GPU 0: -1 and a skip line when there is none */
int harness_open(Harness *g, const Config *cfg, const struct Plan *plan, const Env *env) {
    memset(g, 0, sizeof *g);
    g->cfg = cfg;
    g->plan = plan;
    g->env = env;
    Err err = {{0}};
    if (cuda_device_open(&g->dev, 0, &err)) { harness_skip(g, "gpu", "%s", err.msg); return -1; }
    g->s = g->dev.compute;
    harness_use_plan(g, plan);
    g->rng = 0x1234567ull;
    return 0;
}

void harness_use_plan(Harness *g, const struct Plan *plan) {
    g->plan = plan;
    const GPT2Shape *m = &plan->model;
    g->prec = plan->step.precision;
    g->xs = g->prec == PREC_FP32 ? 4 : 2;
    g->B = plan->step.B; g->T = plan->step.T; g->BT = g->B * g->T;
    g->C = m->n_embd; g->NH = m->n_head; g->HS = g->C / g->NH; g->L = m->n_layer;
    g->V = m->vocab_size; g->Vp = m->padded_vocab_size; g->maxT = m->max_seq_len;
    g->tol = g->prec == PREC_FP32 ? 2e-5 : g->prec == PREC_FP16 ? 5e-3 : 1.5e-2;   /* fp16 keeps 3 more mantissa bits */
}

int harness_dfill(Harness *g, dptr d, size_t n, int f32, float scale, uint64_t seed) {
    size_t es = f32 ? 4 : g->xs, block = n < ((size_t)1 << 22) ? n : (size_t)1 << 22;
    if (!n) return 0;
    float *h = xmalloc(block * sizeof(float));
    for (size_t i = 0; i < block; i++) h[i] = scale * (2.0f * rng_uniform(&seed) - 1.0f);
    int rc = 0;
    if (f32 || g->xs == 4) rc = cu.cuMemcpyHtoD(d, h, block * 4) != CUDA_SUCCESS;
    else rc = harness_up(g, d, h, block);
    free(h);
    for (size_t done = block; done < n && !rc;) {   /* doubling copies of what is there */
        size_t k = done < n - done ? done : n - done;
        rc = cu.cuMemcpyDtoD(d + done * es, d, k * es) != CUDA_SUCCESS;
        done += k;
    }
    return rc ? -1 : 0;
}
