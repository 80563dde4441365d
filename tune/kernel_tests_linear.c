/* kernel_tests_linear: the linear layers: the plan's cuBLASLt matmuls and their epilogues, and the bias family's
   gradient kernels, against the CPU reference (see families.h). */
#include "tune/families.h"
#include "runtime/cuda/tune_api.h"
#include "runtime/cpu/cpu_ops.h"
#include "kernel_ids.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The plan's linear-layer matmuls (bias, GELU_AUX and DGELU epilogues, accumulation) on a slice of N rows:
   cuBLASLt is not specialized, and the slice keeps the CPU reference quick. */
enum { T_FWD, T_DINP, T_DW, T_GELU, T_DGELU, T_COUNT };

/* rb = b0 + the column sums of d (rows x W), in double: the bias gradients' reference */
static void ref_bias(float *rb, const float *b0, const float *d, int rows, int W) {
    for (int o = 0; o < W; o++) {
        double s = 0;
        for (int r = 0; r < rows; r++) s += d[(size_t)r * W + o];
        rb[o] = b0[o] + (float)s;
    }
}
static int slice_matmuls(G *g, Matmuls *mm, int N, Err *err) {
    PlanMatmul e[T_COUNT] = {g->plan->matmuls[MM_QKV], g->plan->matmuls[MM_QKV_DINP], g->plan->matmuls[MM_QKV_DW],
                             g->plan->matmuls[MM_FC], g->plan->matmuls[MM_FCPROJ_DINP]};
    e[T_FWD].n = e[T_DINP].n = e[T_GELU].n = e[T_DGELU].n = N;
    /* the epilogues are tested whichever path the plan's GELU takes (train.gelu) */
    e[T_GELU].epilogue = EPI_GELU_AUX;
    e[T_DGELU].epilogue = EPI_DGELU;
    e[T_DW].k = N;
    return matmuls_init(mm, e, T_COUNT, g->prec, g->workspace, CUBLASLT_WORKSPACE_BYTES, err);
}

void kernel_test_linear(G *g) {
    int N = g->BT < 256 ? g->BT : 256, C = g->C, OC = 3 * g->C;
    Matmuls mm;
    Err err = {{0}};
    if (slice_matmuls(g, &mm, N, &err)) { fail(g, "matmul", "%s", err.msg); return; }
    float *x = hrand(g, (size_t)N * C, 1.0f), *w = hrand(g, (size_t)OC * C, 0.5f), *b = hrand(g, OC, 1.0f);
    float *ref = hbuf((size_t)N * OC), *got = hbuf((size_t)N * OC);
    dptr dx = dup_x(g, x, (size_t)N * C), dw = dup_x(g, w, (size_t)OC * C), db = dup_x(g, b, OC), dout = dalloc(g, (size_t)N * OC * g->xs);
    cpu_matmul_forward(ref, x, w, b, N, C, OC);
    int rc = matmul_run(&mm, T_FWD, g->s, dout, dw, dx, db, 0, 1.0f, &err) || gpu_wait(g, &err);
    Cmp c = {0, 0, ""};
    if (!rc) { down(g, got, dout, (size_t)N * OC); cmp(&c, "out", got, ref, (size_t)N * OC, g->tol); }
    finish(g, "matmul qkv (cuBLASLt, bias epilogue)", &c, &err, rc);

    float *dy = hrand(g, (size_t)N * OC, 1.0f), *dw0 = hrand(g, (size_t)OC * C, 1.0f);
    float *rdx = hbuf((size_t)N * C), *rdw = xmalloc((size_t)OC * C * 4), *gdx = hbuf((size_t)N * C), *gdw = hbuf((size_t)OC * C);
    memcpy(rdw, dw0, (size_t)OC * C * 4);
    cpu_matmul_backward(rdx, rdw, NULL, dy, x, w, N, C, OC);
    dptr ddy = dup_x(g, dy, (size_t)N * OC), ddx = dalloc(g, (size_t)N * C * g->xs), ddw = dup_x(g, dw0, (size_t)OC * C);
    rc = matmul_run(&mm, T_DINP, g->s, ddx, dw, ddy, 0, 0, 1.0f, &err) || matmul_run(&mm, T_DW, g->s, ddw, dx, ddy, 0, 0, 1.0f, &err) ||
         gpu_wait(g, &err);
    c = (Cmp){0, 0, ""};
    if (!rc) {
        down(g, gdx, ddx, (size_t)N * C); down(g, gdw, ddw, (size_t)OC * C);
        cmp(&c, "dinp", gdx, rdx, (size_t)N * C, g->tol);
        cmp(&c, "dweight (accumulated)", gdw, rdw, (size_t)OC * C, g->tol);
    }
    finish(g, "matmul qkv backward (cuBLASLt, dW accumulated)", &c, &err, rc);

    /* the GELU epilogues: fch = x W^T + b saved as aux, D = GELU(fch); then dinp = (dy Wp) * GELU'(fch) */
    {
        int OC4 = 4 * C;
        float *w4 = hrand(g, (size_t)OC4 * C, 0.5f), *b4 = hrand(g, OC4, 1.0f), *pre = hbuf((size_t)N * OC4), *act = hbuf((size_t)N * OC4);
        float *wp = hrand(g, (size_t)C * OC4, 0.5f), *dyp = hrand(g, (size_t)N * C, 1.0f), *dmid = hbuf((size_t)N * OC4);
        float *dpre = hbuf((size_t)N * OC4), *got4 = hbuf((size_t)N * OC4), *unused = hbuf((size_t)C * OC4);
        cpu_matmul_forward(pre, x, w4, b4, N, C, OC4);
        quantize(g, pre, (size_t)N * OC4);
        cpu_gelu_forward(act, pre, (size_t)N * OC4);
        dptr dw4 = dup_x(g, w4, (size_t)OC4 * C), db4 = dup_x(g, b4, OC4), dpre_d = dalloc(g, (size_t)N * OC4 * g->xs), dact = dalloc(g, (size_t)N * OC4 * g->xs);
        rc = matmul_run(&mm, T_GELU, g->s, dact, dw4, dx, db4, dpre_d, 1.0f, &err) || gpu_wait(g, &err);
        c = (Cmp){0, 0, ""};
        if (!rc) {
            down(g, got4, dpre_d, (size_t)N * OC4); cmp(&c, "pre-activation (aux)", got4, pre, (size_t)N * OC4, g->tol);
            down(g, got4, dact, (size_t)N * OC4); cmp(&c, "GELU", got4, act, (size_t)N * OC4, g->tol);
        }
        finish(g, "matmul fc + GELU epilogue (cuBLASLt GELU_AUX_BIAS)", &c, &err, rc);
        /* DGELU: dmid = dyp (N,C) @ Wp (C,4C), then times GELU'(pre) */
        cpu_matmul_backward(dmid, unused, NULL, dyp, act, wp, N, OC4, C);
        cpu_gelu_backward(dpre, pre, dmid, (size_t)N * OC4);
        dptr dwp = dup_x(g, wp, (size_t)C * OC4), ddyp = dup_x(g, dyp, (size_t)N * C), dd = dalloc(g, (size_t)N * OC4 * g->xs);
        up(g, dpre_d, pre, (size_t)N * OC4);
        rc = matmul_run(&mm, T_DGELU, g->s, dd, dwp, ddyp, 0, dpre_d, 1.0f, &err) || gpu_wait(g, &err);
        c = (Cmp){0, 0, ""};
        double tol = g->xs == 4 ? 1e-4 : 3e-2;   /* bf16: GELU' of a rounded product */
        if (!rc) { down(g, got4, dd, (size_t)N * OC4); cmp(&c, "dinp", got4, dpre, (size_t)N * OC4, tol); }
        finish(g, "matmul fcproj backward + DGELU epilogue (cuBLASLt DGELU)", &c, &err, rc);
        free(w4); free(b4); free(pre); free(act); free(wp); free(dyp); free(dmid); free(dpre); free(got4); free(unused);
    }
    matmuls_destroy(&mm);

    /* bias gradient over all B*T rows, for each width the model uses */
    int widths[3] = {C, 3 * C, 4 * C};
    c = (Cmp){0, 0, ""};
    rc = 0;
    size_t splits = g->plan->kernels[K_BIAS_BACKWARD_PARTIAL].dims.grid[1];
    for (int wi = 0; wi < 3 && !rc; wi++) {
        int W = widths[wi];
        size_t n = (size_t)g->BT * W;
        float *d = hrand(g, n, 1.0f), *b0 = hrand(g, W, 1.0f), *rb = xmalloc((size_t)W * 4), *gb = hbuf(W);
        ref_bias(rb, b0, d, g->BT, W);
        dptr dd = dup_x(g, d, n), dbias = dup_x(g, b0, W), scratch = dalloc(g, splits * W * 4);
        rc = launch_bias_backward_partial(&g->ks, g->s, scratch, dd, W, &err) ||
             launch_bias_backward_reduce(&g->ks, g->s, dbias, scratch, W, &err);
        if (!rc) { down(g, gb, dbias, W); cmp(&c, W == C ? "dbias C" : W == 3 * C ? "dbias 3C" : "dbias 4C", gb, rb, W, g->tol); }
        free(d); free(b0); free(rb); free(gb);
    }
    finish(g, "bias_backward", &c, &err, rc);

    /* the GELU backward with the fc bias gradient folded in (train.gelu = "kernel"): dinout *= GELU'(pre) in place,
       dbias += the column sums of the result, over all B*T rows at width 4C */
    {
        int W = 4 * C;
        size_t n = (size_t)g->BT * W;
        float *pre = hrand(g, n, 4.0f), *d = hrand(g, n, 1.0f), *b0 = hrand(g, W, 1.0f), *rd = hbuf(n), *rb = xmalloc((size_t)W * 4);
        float *gd = hbuf(n), *gb = hbuf(W);
        cpu_gelu_backward(rd, pre, d, n);
        quantize(g, rd, n);   /* the sums are of the stored gradient */
        ref_bias(rb, b0, rd, g->BT, W);
        dptr dpre = dup_x(g, pre, n), dd = dup_x(g, d, n), dbias = dup_x(g, b0, W), scratch = dalloc(g, splits * W * 4);
        rc = launch_gelu_backward_bias_partial(&g->ks, g->s, scratch, dd, dpre, W, &err) ||
             launch_bias_backward_reduce(&g->ks, g->s, dbias, scratch, W, &err);
        c = (Cmp){0, 0, ""};
        if (!rc) {
            down(g, gd, dd, n); down(g, gb, dbias, W);
            cmp(&c, "dinp", gd, rd, n, g->tol);
            cmp(&c, "dbias 4C", gb, rb, W, g->tol);
        }
        finish(g, "gelu_backward_bias_partial (GELU backward + fc bias gradient)", &c, &err, rc);
        free(pre); free(d); free(b0); free(rd); free(rb); free(gd); free(gb);
    }
    free(x); free(w); free(b); free(ref); free(got); free(dy); free(dw0); free(rdx); free(rdw); free(gdx); free(gdw);
    dfree_all(g);
}

/* rows [0, r0) and [r1, M) of an (M, N) tensor h, packed together at its start (as the reference holds them): h */
static float *checked_rows(float *h, int M, int N, int r0, int r1) {
    memmove(h + (size_t)r0 * N, h + (size_t)r1 * N, (size_t)(M - r1) * N * sizeof(float));
    return h;
}

/* templates/fc_gemm.cu (train.gelu = "fused") against the CPU: the fc matmul with its bias and the GELU, the fcproj
   weight's transpose, the fcproj dinp with the GELU backward, and the fc bias gradient from its partials. The kernels
   are specialized to all B*T rows; the CPU checks the first 256 and the last 128 of them (every 128-row tile computes
   the same way; the last one may be partial), and the bias gradient (a sum over all rows) against the sums of the
   gradient the kernel stored, in double. */
void kernel_test_fc_gemm(G *g) {
    static const int ids[] = {K_FC_GELU_FORWARD, K_FCPROJ_DGELU_BACKWARD, K_TRANSPOSE_FCPROJ, K_FC_BIAS_REDUCE};
    const char *name = "fc_gemm (fused fc matmul + GELU; fcproj dinp + GELU backward + fc bias gradient)";
    const char *no = wl_fc_gemm_unavailable(g);
    if (no) {
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) g->skipped[ids[i]] = 1;
        skip(g, name, "%s (here %s, %s)", no, g->plan->arch, precision_name(g->plan->step.precision));
        return;
    }
    int M = g->BT, C = g->C, N = 4 * C;
    /* the rows the CPU checks: [0, r0) and [r1, M) */
    int r0 = M < 256 ? M : 256, r1 = M - 128 > r0 ? M - 128 : r0, rows = r0 + (M - r1);
    size_t nx = (size_t)M * C, nn = (size_t)M * N;
    Err err = {{0}};
    float *x = hrand(g, nx, 1.0f), *w = hrand(g, (size_t)N * C, 0.5f), *b = hrand(g, N, 1.0f);
    float *pre = hbuf((size_t)rows * N), *act = hbuf((size_t)rows * N), *got = hbuf(nn);
    dptr dx = dup_x(g, x, nx), dw = dup_x(g, w, (size_t)N * C), db = dup_x(g, b, N);
    dptr dpre = dalloc(g, nn * g->xs), dact = dalloc(g, nn * g->xs);
    cpu_matmul_forward(pre, x, w, b, r0, C, N);
    if (M > r1) cpu_matmul_forward(pre + (size_t)r0 * N, x + (size_t)r1 * C, w, b, M - r1, C, N);
    quantize(g, pre, (size_t)rows * N);
    cpu_gelu_forward(act, pre, (size_t)rows * N);
    int rc = fc_gemm_forward(&g->ks, g->s, dpre, dact, dx, dw, db, &err);
    Cmp c = {0, 0, ""};
    if (!rc) {
        down(g, got, dpre, nn); cmp(&c, "pre-activation", checked_rows(got, M, N, r0, r1), pre, (size_t)rows * N, g->tol);
        down(g, got, dact, nn); cmp(&c, "GELU", checked_rows(got, M, N, r0, r1), act, (size_t)rows * N, g->tol);
    }
    finish(g, "fc_gelu_forward (fc matmul + bias + GELU, fused)", &c, &err, rc);

    /* backward: dpre = (dy (M, C) @ Wp (C, N)) * GELU'(pre), Wp transposed first; pre random over GELU's bend */
    float *wp = hrand(g, (size_t)C * N, 0.5f), *dy = hrand(g, nx, 1.0f), *pre_in = hrand(g, nn, 4.0f);
    float *b0 = hrand(g, N, 1.0f), *dmid = hbuf((size_t)rows * N), *rd = hbuf((size_t)rows * N), *unused = hbuf((size_t)C * N);
    float *wt = hbuf((size_t)N * C), *gwt = hbuf((size_t)N * C), *rb = hbuf(N), *gb = hbuf(N), *pre_rows = hbuf((size_t)rows * N);
    for (int k = 0; k < C; k++)
        for (int n = 0; n < N; n++) wt[(size_t)n * C + k] = wp[(size_t)k * N + n];
    cpu_matmul_backward(dmid, unused, NULL, dy, act, wp, r0, N, C);
    if (M > r1) cpu_matmul_backward(dmid + (size_t)r0 * N, unused, NULL, dy + (size_t)r1 * C, act, wp, M - r1, N, C);
    memcpy(pre_rows, pre_in, (size_t)r0 * N * sizeof(float));
    memcpy(pre_rows + (size_t)r0 * N, pre_in + (size_t)r1 * N, (size_t)(M - r1) * N * sizeof(float));
    cpu_gelu_backward(rd, pre_rows, dmid, (size_t)rows * N);
    size_t tiles = ((size_t)M + FC_GEMM_TILE_ROWS - 1) / FC_GEMM_TILE_ROWS;
    dptr dwp = dup_x(g, wp, (size_t)C * N), dwt = dalloc(g, (size_t)N * C * g->xs), ddy = dup_x(g, dy, nx);
    dptr dpin = dup_x(g, pre_in, nn), dd = dalloc(g, nn * g->xs), scratch = dalloc(g, tiles * N * 4), dbias = dup_x(g, b0, N);
    rc = launch_transpose_fcproj(&g->ks, g->s, dwt, dwp, &err) ||
         fc_gemm_backward(&g->ks, g->s, dd, scratch, ddy, dwt, dpin, &err) ||
         launch_fc_bias_reduce(&g->ks, g->s, dbias, scratch, &err);
    c = (Cmp){0, 0, ""};
    double tol = 3e-2;   /* GELU' of a rounded product, as cuBLASLt's DGELU epilogue test */
    if (!rc) {
        down(g, gwt, dwt, (size_t)N * C);
        cmp(&c, "fcproj weight transposed", gwt, wt, (size_t)N * C, 0.0);
        down(g, got, dd, nn);
        ref_bias(rb, b0, got, M, N);   /* the sums are of the stored gradient, all M rows */
        cmp(&c, "dpre", checked_rows(got, M, N, r0, r1), rd, (size_t)rows * N, tol);
        down(g, gb, dbias, N);
        cmp(&c, "fc dbias", gb, rb, N, g->tol);
    }
    finish(g, "fcproj_dgelu_backward (fcproj dinp + GELU backward + fc bias gradient, fused)", &c, &err, rc);
    free(x); free(w); free(b); free(pre); free(act); free(got); free(wp); free(dy); free(pre_in); free(b0); free(dmid);
    free(rd); free(unused); free(wt); free(gwt); free(rb); free(gb); free(pre_rows);
    dfree_all(g);
}
