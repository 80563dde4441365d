/* kernel_tests_rows: the tests of the families that work row by row or element by element (encoder, layernorm,
   gelu, classifier), each against the CPU reference op (runtime/cpu/cpu_ops.h); see families.h. */
#include "tune/families.h"
#include "runtime/cuda/tune_api.h"
#include "runtime/cpu/cpu_ops.h"
#include "common/gpt2.h"
#include "common/rng.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kernel_test_encoder(Harness *g) {
    size_t BT = g->BT, C = g->C;
    int32_t *tok = xmalloc(BT * 4);
    for (size_t i = 0; i < BT; i++) tok[i] = (int32_t)(rng_next(&g->rng) % (uint64_t)(i % 3 ? g->V : 64));   /* repeats */
    float *wte = harness_hrand(g, (size_t)g->Vp * C, 1.0f), *wpe = harness_hrand(g, (size_t)g->maxT * C, 1.0f);
    float *ref = harness_hbuf(BT * C), *got = harness_hbuf(BT * C);
    Err err = {{0}};
    dptr dtok = harness_dup_raw(g, tok, BT * 4), dwte = harness_dup_x(g, wte, (size_t)g->Vp * C), dwpe = harness_dup_x(g, wpe, (size_t)g->maxT * C);
    dptr dout = harness_dalloc(g, BT * C * g->xs);
    int rc = launch_encoder_forward(&g->ks, g->s, dout, dtok, dwte, dwpe, &err);
    cpu_encoder_forward(ref, tok, wte, wpe, g->B, g->T, (int)C);
    harness_quantize(g, ref, BT * C);
    HarnessCmp c = {0, 0, ""};
    if (!rc) { harness_down(g, got, dout, BT * C); harness_cmp(&c, "out", got, ref, BT * C, g->tol); }
    harness_finish(g, "encoder_forward", &c, &err, rc);

    /* backward: wpe and wte, accumulating onto random gradients; twice, for determinism */
    float *d = harness_hrand(g, BT * C, 1.0f);
    float *gwte = harness_hrand(g, (size_t)g->Vp * C, 1.0f), *gwpe = harness_hrand(g, (size_t)g->maxT * C, 1.0f);
    float *rwte = xmalloc((size_t)g->Vp * C * 4), *rwpe = xmalloc((size_t)g->maxT * C * 4);
    memcpy(rwte, gwte, (size_t)g->Vp * C * 4);
    memcpy(rwpe, gwpe, (size_t)g->maxT * C * 4);
    cpu_encoder_backward(rwte, rwpe, d, tok, g->B, g->T, (int)C);
    int32_t *count = xmalloc(((size_t)g->Vp + 1) * 4), *btok = xmalloc(BT * 4), *bstart = xmalloc((BT + 1) * 4), *pos = xmalloc(BT * 4);
    int nb = cuda_encoder_buckets(tok, (int)BT, g->Vp, count, btok, bstart, pos);
    dptr dd = harness_dup_x(g, d, BT * C), dbt = harness_dup_raw(g, btok, BT * 4), dbs = harness_dup_raw(g, bstart, (BT + 1) * 4), dpos = harness_dup_raw(g, pos, BT * 4);
    float *got_wte = harness_hbuf((size_t)g->Vp * C), *got_wpe = harness_hbuf((size_t)g->maxT * C), *again = harness_hbuf((size_t)g->Vp * C);
    c = (HarnessCmp){0, 0, ""};
    rc = 0;
    for (int rep = 0; rep < 2 && !rc; rep++) {
        harness_up(g, dwte, gwte, (size_t)g->Vp * C);
        harness_up(g, dwpe, gwpe, (size_t)g->maxT * C);
        rc = launch_encoder_backward_wpe(&g->ks, g->s, dwpe, dd, &err) ||
             launch_encoder_backward_wte(&g->ks, g->s, dwte, dd, dbt, dbs, dpos, nb, &err);
        if (!rc) harness_down(g, rep ? again : got_wte, dwte, (size_t)g->Vp * C);
    }
    if (!rc) {
        harness_down(g, got_wpe, dwpe, (size_t)g->maxT * C);
        harness_cmp(&c, "dwte", got_wte, rwte, (size_t)g->Vp * C, g->tol);
        harness_cmp(&c, "dwpe", got_wpe, rwpe, (size_t)g->maxT * C, g->tol);
        if (memcmp(got_wte, again, (size_t)g->Vp * C * 4) && !c.bad) { c.bad = 1; snprintf(c.what, sizeof c.what, "dwte differs between two runs"); }
    }
    harness_finish(g, "encoder_backward (deterministic)", &c, &err, rc);
    free(tok); free(wte); free(wpe); free(ref); free(got); free(d); free(gwte); free(gwpe); free(rwte); free(rwpe);
    free(count); free(btok); free(bstart); free(pos); free(got_wte); free(got_wpe); free(again);
    harness_dfree_all(g);
}

/* what kernel_test_layernorm's parts share: the inputs x, x2 (the residual's other half), weight and bias, the host's
   scratch for the references and the results, and the device's buffers */
typedef struct {
    size_t N, C;
    float *x, *x2, *w, *b, *ref, *mean, *rstd, *got, *gr, *res;
    dptr dx, dx2, dw, db, dout, dmean, drstd, dres;
} LnTest;

/* residual + LayerNorm: the LayerNorm of the residual as stored (t->res: the residual, left for the backward) */
static void layernorm_test_residual(Harness *g, LnTest *t, Err *err) {
    size_t N = t->N, C = t->C;
    float *res = t->res = harness_hbuf(N * C);
    for (size_t i = 0; i < N * C; i++) res[i] = t->x[i] + t->x2[i];
    harness_quantize(g, res, N * C);
    cpu_layernorm_forward_eps(t->ref, t->mean, t->rstd, res, t->w, t->b, (int)N, (int)C, gpt2_norm_eps(&g->plan->model));
    harness_quantize(g, t->ref, N * C);
    int rc = launch_fused_residual_layernorm_forward(&g->ks, g->s, t->dres, t->dout, t->dmean, t->drstd, t->dx, t->dx2,
                                                     t->dw, t->db, err);
    HarnessCmp c = (HarnessCmp){0, 0, ""};
    if (!rc) {
        harness_down(g, t->got, t->dres, N * C);
        harness_cmp(&c, "residual", t->got, res, N * C, g->tol);
        harness_down(g, t->got, t->dout, N * C);
        harness_cmp(&c, "out", t->got, t->ref, N * C, g->tol);
        cu.cuMemcpyDtoH(t->gr, t->drstd, N * 4);
        harness_cmp(&c, "rstd", t->gr, t->rstd, N, 1e-5);
    }
    harness_finish(g, "fused_residual_layernorm_forward", &c, err, rc);
}

/* backward: dinp, dweight, dbias accumulate onto random values; twice, for determinism, the second time also
   making the LayerNorm output again (recompute=2), which must leave the gradients as they were */
static void layernorm_test_backward(Harness *g, LnTest *t, Err *err) {
    size_t N = t->N, C = t->C;
    float *got = t->got, *res = t->res;
    cpu_layernorm_forward_eps(t->ref, t->mean, t->rstd, t->x, t->w, t->b, (int)N, (int)C, gpt2_norm_eps(&g->plan->model));
    harness_quantize(g, t->ref, N * C);
    float *dy = harness_hrand(g, N * C, 1.0f), *dinp0 = harness_hrand(g, N * C, 1.0f), *dw0 = harness_hrand(g, C, 1.0f), *db0 = harness_hrand(g, C, 1.0f);
    float *rdinp = xmalloc(N * C * 4), *rdw = xmalloc(C * 4), *rdb = xmalloc(C * 4);
    memcpy(rdinp, dinp0, N * C * 4); memcpy(rdw, dw0, C * 4); memcpy(rdb, db0, C * 4);
    cpu_layernorm_backward(rdinp, rdw, rdb, dy, t->x, t->w, t->mean, t->rstd, (int)N, (int)C);
    size_t parts = g->plan->kernels[K_LAYERNORM_BACKWARD].dims.grid[0];
    dptr ddy = harness_dup_x(g, dy, N * C), ddinp = harness_dalloc(g, N * C * g->xs), ddw = harness_dalloc(g, C * g->xs), ddb = harness_dalloc(g, C * g->xs);
    dptr scratch = harness_dalloc(g, parts * 2 * C * 4), dlo = harness_dalloc(g, N * C * g->xs);
    cu.cuMemcpyHtoD(t->dmean, t->mean, N * 4);
    cu.cuMemcpyHtoD(t->drstd, t->rstd, N * 4);
    float *gdw = harness_hbuf(C), *gdb = harness_hbuf(C), *again = harness_hbuf(N * C), *dw_again = harness_hbuf(C), *db_again = harness_hbuf(C);
    int rc = 0;
    for (int rep = 0; rep < 2 && !rc; rep++) {
        harness_up(g, ddinp, dinp0, N * C); harness_up(g, ddw, dw0, C); harness_up(g, ddb, db0, C);
        rc = launch_layernorm_backward(&g->ks, g->s, ddinp, scratch, rep ? dlo : 0, ddy, t->dx, t->dw, t->db, t->dmean,
                                       t->drstd, err) ||
             launch_layernorm_backward_reduce(&g->ks, g->s, ddw, ddb, scratch, err);
        if (!rc) {
            harness_down(g, rep ? again : got, ddinp, N * C);
            harness_down(g, rep ? dw_again : gdw, ddw, C);
            harness_down(g, rep ? db_again : gdb, ddb, C);
        }
    }
    HarnessCmp c = (HarnessCmp){0, 0, ""};
    if (!rc) {
        harness_cmp(&c, "dinp", got, rdinp, N * C, g->tol);
        harness_cmp(&c, "dweight", gdw, rdw, C, g->tol);
        harness_cmp(&c, "dbias", gdb, rdb, C, g->tol);
        harness_down(g, res, dlo, N * C);
        harness_cmp(&c, "out made again", res, t->ref, N * C, g->tol);
        const char *differs = memcmp(got, again, N * C * 4) ? "dinp" : memcmp(gdw, dw_again, C * 4) ? "dweight"
                            : memcmp(gdb, db_again, C * 4) ? "dbias" : NULL;
        if (differs && !c.bad) { c.bad = 1; snprintf(c.what, sizeof c.what, "%s differs between two runs", differs); }
    }
    harness_finish(g, "layernorm_backward (deterministic)", &c, err, rc);
    free(dy); free(dinp0); free(dw0); free(db0); free(rdinp); free(rdw); free(rdb); free(gdw); free(gdb); free(again); free(dw_again); free(db_again);
}

void kernel_test_layernorm(Harness *g) {
    size_t N = g->BT, C = g->C;
    LnTest t = {.N = N, .C = C};
    t.x = harness_hrand(g, N * C, 2.0f), t.x2 = harness_hrand(g, N * C, 2.0f), t.w = harness_hrand(g, C, 1.0f), t.b = harness_hrand(g, C, 1.0f);
    for (size_t i = 0; i < N * C; i++) t.x[i] += 0.5f * (float)(i % 7);   /* a non-zero mean per row */
    harness_quantize(g, t.x, N * C);
    t.ref = harness_hbuf(N * C), t.mean = harness_hbuf(N), t.rstd = harness_hbuf(N), t.got = harness_hbuf(N * C);
    float *gm = harness_hbuf(N);
    t.gr = harness_hbuf(N);
    Err err = {{0}};
    t.dx = harness_dup_x(g, t.x, N * C), t.dx2 = harness_dup_x(g, t.x2, N * C), t.dw = harness_dup_x(g, t.w, C), t.db = harness_dup_x(g, t.b, C);
    t.dout = harness_dalloc(g, N * C * g->xs), t.dmean = harness_dalloc(g, N * 4), t.drstd = harness_dalloc(g, N * 4), t.dres = harness_dalloc(g, N * C * g->xs);
    cpu_layernorm_forward_eps(t.ref, t.mean, t.rstd, t.x, t.w, t.b, (int)N, (int)C, gpt2_norm_eps(&g->plan->model));
    harness_quantize(g, t.ref, N * C);
    int rc = launch_layernorm_forward(&g->ks, g->s, t.dout, t.dmean, t.drstd, t.dx, t.dw, t.db, &err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        harness_down(g, t.got, t.dout, N * C);
        cu.cuMemcpyDtoH(gm, t.dmean, N * 4);
        cu.cuMemcpyDtoH(t.gr, t.drstd, N * 4);
        harness_cmp(&c, "out", t.got, t.ref, N * C, g->tol);
        harness_cmp(&c, "mean", gm, t.mean, N, 1e-5);
        harness_cmp(&c, "rstd", t.gr, t.rstd, N, 1e-5);
    }
    harness_finish(g, "layernorm_forward", &c, &err, rc);
    layernorm_test_residual(g, &t, &err);
    layernorm_test_backward(g, &t, &err);
    free(t.x); free(t.x2); free(t.w); free(t.b); free(t.ref); free(t.mean); free(t.rstd); free(t.got); free(gm); free(t.gr); free(t.res);
    harness_dfree_all(g);
}

void kernel_test_gelu(Harness *g) {
    long long n = (long long)g->BT * 4 * g->C;
    float *x = harness_hrand(g, (size_t)n, 4.0f), *ref = harness_hbuf((size_t)n), *got = harness_hbuf((size_t)n), *dy = harness_hrand(g, (size_t)n, 1.0f);
    cpu_gelu_forward(ref, x, (size_t)n);
    harness_quantize(g, ref, (size_t)n);
    Err err = {{0}};
    dptr dx = harness_dup_x(g, x, (size_t)n), dout = harness_dalloc(g, (size_t)n * g->xs), ddy = harness_dup_x(g, dy, (size_t)n);
    int rc = launch_gelu_forward(&g->ks, g->s, dout, dx, n, &err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) { harness_down(g, got, dout, (size_t)n); harness_cmp(&c, "out", got, ref, (size_t)n, g->tol); }
    harness_finish(g, "gelu_forward", &c, &err, rc);
    memset(ref, 0, (size_t)n * 4);
    cpu_gelu_backward(ref, x, dy, (size_t)n);
    rc = launch_gelu_backward(&g->ks, g->s, ddy, dx, n, &err);
    c = (HarnessCmp){0, 0, ""};
    if (!rc) { harness_down(g, got, ddy, (size_t)n); harness_cmp(&c, "dinp", got, ref, (size_t)n, g->tol); }
    harness_finish(g, "gelu_backward", &c, &err, rc);
    free(x); free(ref); free(got); free(dy);
    harness_dfree_all(g);
}

void kernel_test_classifier(Harness *g) {
    /* the kernel runs over a chunk of rows (the family's CHUNK, at most B*T); the first N hold random logits and
       are checked (host memory stays small on the big configs), the rest are zeros. With the model's soft-cap the
       rows hold raw logits, and the reference is the CPU's cap, its cross-entropy, then the cap's backward */
    int R = g->plan->classifier_rows, N = R < 128 ? R : 128, V = g->V, Vp = g->Vp;
    size_t n = (size_t)N * Vp;
    float cap = (float)g->plan->model.logit_softcap;
    float *raw = harness_hrand(g, n, cap > 0 ? 3.0f * cap : 4.0f), *logits = xmalloc(n * 4), *losses = harness_hbuf(N);
    float *dl = harness_hbuf(n), *got = harness_hbuf(n), *gl = harness_hbuf(N);
    int32_t *tg = xcalloc((size_t)g->BT, 4);
    for (int i = 0; i < g->BT; i++) tg[i] = (int32_t)(rng_next(&g->rng) % (uint64_t)V);
    float dloss = 1.0f / g->BT;
    harness_quantize(g, raw, n);                 /* the logits as the GPU holds them */
    memcpy(logits, raw, n * 4);
    if (cap > 0) { cpu_softcap_forward(logits, n, cap); harness_quantize(g, logits, n); }
    cpu_softmax_crossentropy(losses, dl, logits, tg, dloss, N, V, Vp);
    if (cap > 0) cpu_softcap_backward(dl, logits, n, cap);
    Err err = {{0}};
    dptr dlog = harness_dalloc(g, (size_t)R * Vp * g->xs), dloss_d = harness_dalloc(g, (size_t)R * 4), dtg = harness_dup_raw(g, tg, (size_t)R * 4);
    harness_up(g, dlog, raw, n);
    int rc = launch_classifier_forward(&g->ks, g->s, dloss_d, dlog, dtg, dloss, 0, &err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) {   /* without dlogits the row keeps its logits, capped in place where the model caps */
        cu.cuMemcpyDtoH(gl, dloss_d, (size_t)N * 4);
        harness_down(g, got, dlog, n);
        harness_cmp(&c, "losses", gl, losses, N, g->tol);
        harness_cmp(&c, cap > 0 ? "logits capped" : "logits untouched", got, logits, n, cap > 0 ? g->tol : 0);
    }
    harness_up(g, dlog, raw, n);
    if (!rc) rc = launch_classifier_forward(&g->ks, g->s, dloss_d, dlog, dtg, dloss, 1, &err);
    if (!rc) {
        cu.cuMemcpyDtoH(gl, dloss_d, (size_t)N * 4);
        harness_down(g, got, dlog, n);
        harness_cmp(&c, "losses", gl, losses, N, g->tol);
        harness_cmp(&c, "dlogits", got, dl, n, g->tol);
    }
    harness_finish(g, cap > 0 ? "classifier_forward (soft-cap, softmax, cross-entropy, dlogits)"
                              : "classifier_forward (softmax, cross-entropy, dlogits)", &c, &err, rc);
    free(raw); free(logits); free(losses); free(dl); free(got); free(gl); free(tg);
    harness_dfree_all(g);
}
