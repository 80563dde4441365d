/* kernel_tests_attention: both attention paths against the fp64 reference (tune/attention_ref.c) and each other,
   and their timing (see families.h). */
#include "tune/families.h"
#include "tune/attention_ref.h"
#include "runtime/cuda/tune_api.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Attention, both paths: the flash template's kernels and (where cuDNN loads and takes the shape) cuDNN's, each
   against the fp64 reference (tune/attention_ref.c) on sampled heads (every head of the small configs, 4
   spread over the batch at the large ones), every value checked finite (dqkv starts as NaNs, so every element
   must be written), the backward run twice and compared bit for bit (deterministic), and cuDNN against the
   template; cuDNN also with its nondeterministic backward (train.deterministic = false: dQ by atomics), whose
   second backward must agree with the first within the precision's tolerance instead. bf16/fp16: the
   probabilities and dS are rounded to 16 bits before their products. With grouped-query attention both read qkv's
   NKV key/value heads (rows of QKVW): the template in place, cuDNN through the expanded heads as the step runs it
   (AttExpand). A timing line per path (informational). */
static size_t count_nonfinite(const float *x, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}

typedef struct {
    dptr qkv, dy, out, stats, dqkv, ddot, ws;
    float *h_out, *h_stats, *h_dqkv;
    size_t W;          /* qkv's features: (NH + 2 NKV) HS */
    AttExpand gqa;     /* cuDNN's expanded heads with grouped-query attention, else zeros */
} AttBufs;

/* forward, backward and a second backward of one path; 0 when they ran */
static int attention_path(Harness *g, CudnnAttention *cd, const char *path, const float *qkv, const float *dy, AttBufs *a,
                          int heads, int deterministic, Err *err) {
    size_t B = g->B, T = g->T, NH = g->NH, C = g->C, BT = g->BT, W = a->W;
    AttShape shape = {g->B, g->T, g->C, g->NH, gpt2_kv_heads(&g->plan->model)};
    const AttExpand *gqa = cd ? &a->gqa : NULL;
    double tol_out = g->xs == 4 ? 1e-4 : 2e-2, tol_grad = g->xs == 4 ? 1e-4 : 3e-2;
    char name[400];
    cu.cuMemsetD8(a->dqkv, 0xff, BT * W * g->xs);
    int rc = attention_forward(&g->ks, cd, a->ws, g->s, a->out, a->stats, a->qkv, gqa, err) || harness_wait(g, err) ? -1 : 0;
    HarnessCmp c = {0, 0, ""};
    AttErr e;
    if (!rc) {
        harness_down(g, a->h_out, a->out, BT * C);
        cu.cuMemcpyDtoH(a->h_stats, a->stats, B * NH * T * 4);
        attention_ref_compare(&shape, qkv, NULL, heads, a->h_out, a->h_stats, NULL, &e);
        harness_cmp_value(&c, "out", e.out, count_nonfinite(a->h_out, BT * C), tol_out);
        harness_cmp_value(&c, "stats", e.lse, count_nonfinite(a->h_stats, B * NH * T), tol_out);
    }
    snprintf(name, sizeof name, "attention forward, %s (%d head%s against fp64)", path, heads, heads == 1 ? "" : "s");
    harness_finish(g, name, &c, err, rc);
    if (rc) return -1;

    rc = attention_backward(&g->ks, cd, a->ws, g->s, a->dqkv, a->qkv, a->out, a->dy, a->stats, a->ddot, gqa, err) ||
         harness_wait(g, err) ? -1 : 0;
    c = (HarnessCmp){0, 0, ""};
    if (!rc) {
        harness_down(g, a->h_dqkv, a->dqkv, BT * W);
        attention_ref_compare(&shape, qkv, dy, heads, NULL, NULL, a->h_dqkv, &e);
        size_t bad = count_nonfinite(a->h_dqkv, BT * W);
        harness_cmp_value(&c, "dq", e.dq, bad, tol_grad);
        harness_cmp_value(&c, "dk", e.dk, bad, tol_grad);
        harness_cmp_value(&c, "dv", e.dv, bad, tol_grad);
        /* deterministic: a second backward writes the same bits; else the same values to the tolerance */
        float *again = harness_hbuf(BT * W);
        rc = attention_backward(&g->ks, cd, a->ws, g->s, a->dqkv, a->qkv, a->out, a->dy, a->stats, a->ddot, gqa, err) ||
             harness_wait(g, err) ? -1 : 0;
        if (!rc) harness_down(g, again, a->dqkv, BT * W);
        if (!rc && deterministic && memcmp(again, a->h_dqkv, BT * W * sizeof(float)) && !c.bad) {
            c.bad = 1;
            snprintf(c.what, sizeof c.what, "a second backward gave other values: not deterministic");
        }
        if (!rc && !deterministic) harness_cmp(&c, "dqkv of a second backward", again, a->h_dqkv, BT * W, tol_grad);
        free(again);
    }
    snprintf(name, sizeof name, "attention backward, %s (%d head%s against fp64, %s)", path, heads,
             heads == 1 ? "" : "s", deterministic ? "deterministic" : "a second run within the tolerance");
    harness_finish(g, name, &c, err, rc);
    return rc;
}

/* informational: ms per forward and per backward, and the rate counting the causal half of the products
   (2 in the forward, 5 in the backward, as FlashAttention-2 counts them) */
static void attention_timing(Harness *g, CudnnAttention *cd, const char *path, AttBufs *a) {
    Err err = {{0}};
    CUevent e[3];
    for (int i = 0; i < 3; i++) cu.cuEventCreate(&e[i], 0);
    int sync = g->ks.sync_each, reps = 10, rc = 0;
    g->ks.sync_each = 0;
    cu.cuEventRecord(e[0], g->s);
    const AttExpand *gqa = cd ? &a->gqa : NULL;
    for (int r = 0; r < reps && !rc; r++) rc = attention_forward(&g->ks, cd, a->ws, g->s, a->out, a->stats, a->qkv, gqa, &err);
    cu.cuEventRecord(e[1], g->s);
    for (int r = 0; r < reps && !rc; r++)
        rc = attention_backward(&g->ks, cd, a->ws, g->s, a->dqkv, a->qkv, a->out, a->dy, a->stats, a->ddot, gqa, &err);
    cu.cuEventRecord(e[2], g->s);
    g->ks.sync_each = sync;
    float fwd = 0, bwd = 0;
    if (!rc && cu.cuEventSynchronize(e[2]) == CUDA_SUCCESS) {
        cu.cuEventElapsedTime(&fwd, e[0], e[1]);
        cu.cuEventElapsedTime(&bwd, e[1], e[2]);
        fwd /= reps;
        bwd /= reps;
        double mm = 2.0 * g->B * g->NH * (double)g->T * g->T * g->HS / 2;   /* one causal product */
        printf("time %s attention %s B=%d T=%d NH=%d HS=%d: forward %.3f ms (%.0f TFLOP/s), backward %.3f ms "
               "(%.0f TFLOP/s)\n", g->cfg->name, path, g->B, g->T, g->NH, g->HS, fwd, 2 * mm / (fwd * 1e9), bwd,
               5 * mm / (bwd * 1e9));
    } else {
        harness_fail(g, "attention timing", "%s: %s", path, rc ? err.msg : "the timed calls failed");
    }
    for (int i = 0; i < 3; i++) cu.cuEventDestroy(e[i]);
}

/* cuDNN for this shape, or NULL with a skip line saying why (a failure where it should have taken the shape) */
static CudnnAttention *test_cudnn_open(Harness *g, int deterministic) {
    char why[1024] = "";
    CudnnAttention *cd = cudnn_attention_open(g->B, g->T, g->NH, g->HS, g->prec, deterministic, g->env, why, sizeof why);
    if (cd) return cd;
    if (strstr(why, "cuDNN not found") || strstr(why, "cuDNN is hidden") || strstr(why, "needs bf16 or fp16") ||
        (g->T % 128 && strstr(why, "multiple of 128")))
        harness_skip(g, "attention, cuDNN", "%s", why);
    else
        harness_fail(g, "attention, cuDNN", "%s", why);
    return NULL;
}

void kernel_test_attention_paths(Harness *g, int timing) {
    size_t B = g->B, T = g->T, NH = g->NH, C = g->C, BT = g->BT, W = (size_t)gpt2_qkv_width(&g->plan->model);
    int heads = (double)B * NH * T * T * g->HS <= 4e8 ? (int)(B * NH) : 4;
    float *qkv = harness_hrand(g, BT * W, 1.0f), *dy = harness_hrand(g, BT * C, 1.0f);
    AttBufs a = {harness_dup_x(g, qkv, BT * W), harness_dup_x(g, dy, BT * C), harness_dalloc(g, BT * C * g->xs), harness_dalloc(g, B * NH * T * 4),
                 harness_dalloc(g, BT * W * g->xs), harness_dalloc(g, B * NH * T * 4), 0, harness_hbuf(BT * C), harness_hbuf(B * NH * T),
                 harness_hbuf(BT * W), W, {0, 0}};
    if (W != 3 * C) a.gqa = (AttExpand){harness_dalloc(g, BT * 3 * C * g->xs), harness_dalloc(g, BT * 3 * C * g->xs)};
    Err err = {{0}};
    int flash_rc = attention_path(g, NULL, "flash template", qkv, dy, &a, heads, 1, &err);
    if (!flash_rc && timing) attention_timing(g, NULL, "flash template", &a);
    float *f_out = a.h_out, *f_dqkv = a.h_dqkv;
    a.h_out = harness_hbuf(BT * C);
    a.h_dqkv = harness_hbuf(BT * W);
    for (int det = 1; det >= 0; det--) {
        CudnnAttention *cd = test_cudnn_open(g, det);
        if (!cd) break;
        const char *mode = det ? "cuDNN" : "cuDNN, dQ by atomics";
        char path[400];
        snprintf(path, sizeof path, "%s%s", cudnn_attention_describe(cd), det ? "" : ", dQ by atomics");
        size_t ws = cudnn_attention_workspace_bytes(cd);
        a.ws = ws ? harness_dalloc(g, ws) : 0;
        int rc = attention_path(g, cd, path, qkv, dy, &a, heads, det, &err);
        if (!rc && !flash_rc) {   /* the two paths agree with each other as well as with the reference */
            HarnessCmp c = {0, 0, ""};
            double tol = g->xs == 4 ? 1e-4 : 3e-2;
            char name[160];
            harness_cmp(&c, "out", a.h_out, f_out, BT * C, tol);
            harness_cmp(&c, "dqkv", a.h_dqkv, f_dqkv, BT * W, tol);
            snprintf(name, sizeof name, "attention, %s against the flash template (every head)", mode);
            harness_finish(g, name, &c, &err, 0);
        }
        if (!rc && timing) attention_timing(g, cd, mode, &a);
        cudnn_attention_close(cd);
    }
    free(f_out);
    free(f_dqkv);
    free(qkv); free(dy); free(a.h_out); free(a.h_stats); free(a.h_dqkv);
    harness_dfree_all(g);
}

void kernel_test_attention(Harness *g) { kernel_test_attention_paths(g, 0); }
