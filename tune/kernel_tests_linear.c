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
static int slice_matmuls(Harness *g, Matmuls *mm, int N, Err *err) {
    PlanMatmul e[T_COUNT] = {g->plan->matmuls[MM_QKV], g->plan->matmuls[MM_QKV_DINP], g->plan->matmuls[MM_QKV_DW],
                             g->plan->matmuls[MM_FC], g->plan->matmuls[MM_FCPROJ_DINP]};
    e[T_FWD].n = e[T_DINP].n = e[T_GELU].n = e[T_DGELU].n = N;
    /* the epilogues are tested whichever path the plan's GELU takes (train.gelu), and whatever MLP the model has */
    e[T_GELU].epilogue = EPI_GELU_AUX;
    e[T_GELU].bias = 1;
    e[T_DGELU].epilogue = EPI_DGELU;
    e[T_DW].k = N;
    return matmuls_init(mm, e, T_COUNT, g->prec, g->workspace, CUBLASLT_WORKSPACE_BYTES, err);
}

/* the qkv matmul's inputs on a slice of N rows: x (N, C), the weight (OC, C) and the bias (none where the model has
   none: b NULL, db 0), on the host and the device */
typedef struct { int N, C, OC; float *x, *w, *b; dptr dx, dw, db; } QkvSlice;

/* out = x W^T + b through the bias epilogue */
static void linear_qkv_forward(Harness *g, Matmuls *mm, const QkvSlice *q, Err *err) {
    int N = q->N, C = q->C, OC = q->OC;
    float *ref = harness_hbuf((size_t)N * OC), *got = harness_hbuf((size_t)N * OC);
    dptr dout = harness_dalloc(g, (size_t)N * OC * g->xs);
    cpu_matmul_forward(ref, q->x, q->w, q->b, N, C, OC);
    int rc = matmul_run(mm, T_FWD, g->s, dout, q->dw, q->dx, q->db, 0, 1.0f, err) || harness_wait(g, err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) { harness_down(g, got, dout, (size_t)N * OC); harness_cmp(&c, "out", got, ref, (size_t)N * OC, g->tol); }
    harness_finish(g, q->db ? "matmul qkv (cuBLASLt, bias epilogue)" : "matmul qkv (cuBLASLt, no bias)", &c, err, rc);
    free(ref); free(got);
}

/* dinp = dy W, and dW += dy^T x accumulated onto a random dW */
static void linear_qkv_backward(Harness *g, Matmuls *mm, const QkvSlice *q, Err *err) {
    int N = q->N, C = q->C, OC = q->OC;
    float *dy = harness_hrand(g, (size_t)N * OC, 1.0f), *dw0 = harness_hrand(g, (size_t)OC * C, 1.0f);
    float *rdx = harness_hbuf((size_t)N * C), *rdw = xmalloc((size_t)OC * C * 4), *gdx = harness_hbuf((size_t)N * C), *gdw = harness_hbuf((size_t)OC * C);
    memcpy(rdw, dw0, (size_t)OC * C * 4);
    cpu_matmul_backward(rdx, rdw, NULL, dy, q->x, q->w, N, C, OC);
    dptr ddy = harness_dup_x(g, dy, (size_t)N * OC), ddx = harness_dalloc(g, (size_t)N * C * g->xs), ddw = harness_dup_x(g, dw0, (size_t)OC * C);
    int rc = matmul_run(mm, T_DINP, g->s, ddx, q->dw, ddy, 0, 0, 1.0f, err) || matmul_run(mm, T_DW, g->s, ddw, q->dx, ddy, 0, 0, 1.0f, err) ||
             harness_wait(g, err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        harness_down(g, gdx, ddx, (size_t)N * C); harness_down(g, gdw, ddw, (size_t)OC * C);
        harness_cmp(&c, "dinp", gdx, rdx, (size_t)N * C, g->tol);
        harness_cmp(&c, "dweight (accumulated)", gdw, rdw, (size_t)OC * C, g->tol);
        /* the dinp entry with beta 1 (SwiGLU's second fc dinp, OP_MATMUL_DINP_ACC): dinp += dy W again, twice dy W */
        rc = matmul_run_acc(mm, T_DINP, g->s, ddx, q->dw, ddy, 1.0f, err) || harness_wait(g, err);
        for (size_t i = 0; i < (size_t)N * C; i++) rdx[i] *= 2.0f;
        if (!rc) { harness_down(g, gdx, ddx, (size_t)N * C); harness_cmp(&c, "dinp accumulated", gdx, rdx, (size_t)N * C, g->tol); }
    }
    harness_finish(g, "matmul qkv backward (cuBLASLt, dW accumulated; dinp accumulated by matmul_run_acc)", &c, err, rc);
    free(dy); free(dw0); free(rdx); free(rdw); free(gdx); free(gdw);
}

/* the GELU epilogues: fch = x W^T + b saved as aux, D = GELU(fch); then dinp = (dy Wp) * GELU'(fch) */
static void linear_gelu_epilogues(Harness *g, Matmuls *mm, const QkvSlice *q, Err *err) {
    int N = q->N, C = q->C, OC4 = gpt2_ffn(&g->plan->model);   /* 4C but in GPT-2's relatives */
    float *w4 = harness_hrand(g, (size_t)OC4 * C, 0.5f), *b4 = harness_hrand(g, OC4, 1.0f), *pre = harness_hbuf((size_t)N * OC4), *act = harness_hbuf((size_t)N * OC4);
    float *wp = harness_hrand(g, (size_t)C * OC4, 0.5f), *dyp = harness_hrand(g, (size_t)N * C, 1.0f), *dmid = harness_hbuf((size_t)N * OC4);
    float *dpre = harness_hbuf((size_t)N * OC4), *got4 = harness_hbuf((size_t)N * OC4), *unused = harness_hbuf((size_t)C * OC4);
    cpu_matmul_forward(pre, q->x, w4, b4, N, C, OC4);
    harness_quantize(g, pre, (size_t)N * OC4);
    cpu_gelu_forward(act, pre, (size_t)N * OC4);
    dptr dw4 = harness_dup_x(g, w4, (size_t)OC4 * C), db4 = harness_dup_x(g, b4, OC4), dpre_d = harness_dalloc(g, (size_t)N * OC4 * g->xs), dact = harness_dalloc(g, (size_t)N * OC4 * g->xs);
    int rc = matmul_run(mm, T_GELU, g->s, dact, dw4, q->dx, db4, dpre_d, 1.0f, err) || harness_wait(g, err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        harness_down(g, got4, dpre_d, (size_t)N * OC4); harness_cmp(&c, "pre-activation (aux)", got4, pre, (size_t)N * OC4, g->tol);
        harness_down(g, got4, dact, (size_t)N * OC4); harness_cmp(&c, "GELU", got4, act, (size_t)N * OC4, g->tol);
    }
    harness_finish(g, "matmul fc + GELU epilogue (cuBLASLt GELU_AUX_BIAS)", &c, err, rc);
    /* DGELU: dmid = dyp (N,C) @ Wp (C,4C), then times GELU'(pre) */
    cpu_matmul_backward(dmid, unused, NULL, dyp, act, wp, N, OC4, C);
    cpu_gelu_backward(dpre, pre, dmid, (size_t)N * OC4);
    dptr dwp = harness_dup_x(g, wp, (size_t)C * OC4), ddyp = harness_dup_x(g, dyp, (size_t)N * C), dd = harness_dalloc(g, (size_t)N * OC4 * g->xs);
    harness_up(g, dpre_d, pre, (size_t)N * OC4);
    rc = matmul_run(mm, T_DGELU, g->s, dd, dwp, ddyp, 0, dpre_d, 1.0f, err) || harness_wait(g, err);
    c = (HarnessCmp){0, 0, ""};
    double tol = g->xs == 4 ? 1e-4 : 3e-2;   /* bf16: GELU' of a rounded product */
    if (!rc) { harness_down(g, got4, dd, (size_t)N * OC4); harness_cmp(&c, "dinp", got4, dpre, (size_t)N * OC4, tol); }
    harness_finish(g, "matmul fcproj backward + DGELU epilogue (cuBLASLt DGELU)", &c, err, rc);
    free(w4); free(b4); free(pre); free(act); free(wp); free(dyp); free(dmid); free(dpre); free(got4); free(unused);
}

/* bias gradient over all B*T rows, for each width the model uses */
static void test_bias_backward(Harness *g, size_t splits, Err *err) {
    int C = g->C, widths[3] = {C, 3 * C, 4 * C};
    HarnessCmp c = (HarnessCmp){0, 0, ""};
    int rc = 0;
    for (int wi = 0; wi < 3 && !rc; wi++) {
        int W = widths[wi];
        size_t n = (size_t)g->BT * W;
        float *d = harness_hrand(g, n, 1.0f), *b0 = harness_hrand(g, W, 1.0f), *rb = xmalloc((size_t)W * 4), *gb = harness_hbuf(W);
        ref_bias(rb, b0, d, g->BT, W);
        dptr dd = harness_dup_x(g, d, n), dbias = harness_dup_x(g, b0, W), scratch = harness_dalloc(g, splits * W * 4);
        rc = launch_bias_backward_partial(&g->ks, g->s, scratch, dd, W, err) ||
             launch_bias_backward_reduce(&g->ks, g->s, dbias, scratch, W, err);
        if (!rc) { harness_down(g, gb, dbias, W); harness_cmp(&c, W == C ? "dbias C" : W == 3 * C ? "dbias 3C" : "dbias 4C", gb, rb, W, g->tol); }
        free(d); free(b0); free(rb); free(gb);
    }
    harness_finish(g, "bias_backward", &c, err, rc);
}

/* the GELU backward with the fc bias gradient folded in (train.gelu = "kernel"): dinout *= GELU'(pre) in place,
   dbias += the column sums of the result, over all B*T rows at width 4C */
static void test_gelu_backward_bias(Harness *g, size_t splits, Err *err) {
    int W = 4 * g->C;
    size_t n = (size_t)g->BT * W;
    float *pre = harness_hrand(g, n, 4.0f), *d = harness_hrand(g, n, 1.0f), *b0 = harness_hrand(g, W, 1.0f), *rd = harness_hbuf(n), *rb = xmalloc((size_t)W * 4);
    float *gd = harness_hbuf(n), *gb = harness_hbuf(W);
    cpu_gelu_backward(rd, pre, d, n);
    harness_quantize(g, rd, n);   /* the sums are of the stored gradient */
    ref_bias(rb, b0, rd, g->BT, W);
    dptr dpre = harness_dup_x(g, pre, n), dd = harness_dup_x(g, d, n), dbias = harness_dup_x(g, b0, W), scratch = harness_dalloc(g, splits * W * 4);
    int rc = launch_gelu_backward_bias_partial(&g->ks, g->s, scratch, dd, dpre, W, err) ||
             launch_bias_backward_reduce(&g->ks, g->s, dbias, scratch, W, err);
    HarnessCmp c = (HarnessCmp){0, 0, ""};
    if (!rc) {
        harness_down(g, gd, dd, n); harness_down(g, gb, dbias, W);
        harness_cmp(&c, "dinp", gd, rd, n, g->tol);
        harness_cmp(&c, "dbias 4C", gb, rb, W, g->tol);
    }
    harness_finish(g, "gelu_backward_bias_partial (GELU backward + fc bias gradient)", &c, err, rc);
    free(pre); free(d); free(b0); free(rd); free(rb); free(gd); free(gb);
}

void kernel_test_linear(Harness *g) {
    int N = g->BT < 256 ? g->BT : 256, C = g->C, OC = gpt2_qkv_width(&g->plan->model), bias = !g->plan->model.no_bias;
    Matmuls mm;
    Err err = {{0}};
    if (slice_matmuls(g, &mm, N, &err)) { harness_fail(g, "matmul", "%s", err.msg); return; }
    QkvSlice q = {N, C, OC, NULL, NULL, NULL, 0, 0, 0};
    q.x = harness_hrand(g, (size_t)N * C, 1.0f), q.w = harness_hrand(g, (size_t)OC * C, 0.5f), q.b = bias ? harness_hrand(g, OC, 1.0f) : NULL;
    q.dx = harness_dup_x(g, q.x, (size_t)N * C), q.dw = harness_dup_x(g, q.w, (size_t)OC * C), q.db = bias ? harness_dup_x(g, q.b, OC) : 0;
    linear_qkv_forward(g, &mm, &q, &err);
    linear_qkv_backward(g, &mm, &q, &err);
    linear_gelu_epilogues(g, &mm, &q, &err);
    matmuls_destroy(&mm);
    size_t splits = g->plan->kernels[K_BIAS_BACKWARD_PARTIAL].dims.grid[1];
    test_bias_backward(g, splits, &err);
    test_gelu_backward_bias(g, splits, &err);
    free(q.x); free(q.w); free(q.b);
    harness_dfree_all(g);
}

/* rows [0, r0) and [r1, M) of an (M, N) tensor h, packed together at its start (as the reference holds them): h */
static float *checked_rows(float *h, int M, int N, int r0, int r1) {
    memmove(h + (size_t)r0 * N, h + (size_t)r1 * N, (size_t)(M - r1) * N * sizeof(float));
    return h;
}

/* the rows fc_gemm's test checks on the CPU: [0, r0) and [r1, M) of the M = B*T, rows of them; C and N = 4C; the
   activation ReLU^2 (a relative's, FC_RELU2) or the GELU; the fc bias, or none (a relative without biases) */
typedef struct { int M, C, N, r0, r1, rows, relu2, bias; } FcRows;

/* the activation of n pre-activations, and dpre = dmid * its derivative, as the CPU has them */
static void fc_act(const FcRows *f, float *act, const float *pre, size_t n) {
    if (f->relu2) cpu_relu2_forward(act, pre, n);
    else cpu_gelu_forward(act, pre, n);
}
static void fc_act_backward(const FcRows *f, float *dpre, const float *pre, const float *dmid, size_t n) {
    if (!f->relu2) { cpu_gelu_backward(dpre, pre, dmid, n); return; }
    memcpy(dpre, dmid, n * sizeof(float));
    cpu_relu2_backward(dpre, pre, n);
}

/* backward: dpre = (dy (M, C) @ Wp (C, N)) * GELU'(pre), Wp transposed first; pre random over GELU's bend. act: the
   forward's GELU of the rows checked; got: scratch of M*N */
static void fc_gemm_test_backward(Harness *g, const FcRows *f, const float *act, float *got, Err *err) {
    int M = f->M, C = f->C, N = f->N, r0 = f->r0, r1 = f->r1, rows = f->rows;
    size_t nx = (size_t)M * C, nn = (size_t)M * N;
    float *wp = harness_hrand(g, (size_t)C * N, 0.5f), *dy = harness_hrand(g, nx, 1.0f), *pre_in = harness_hrand(g, nn, 4.0f);
    float *b0 = harness_hrand(g, N, 1.0f), *dmid = harness_hbuf((size_t)rows * N), *rd = harness_hbuf((size_t)rows * N), *unused = harness_hbuf((size_t)C * N);
    float *wt = harness_hbuf((size_t)N * C), *gwt = harness_hbuf((size_t)N * C), *rb = harness_hbuf(N), *gb = harness_hbuf(N), *pre_rows = harness_hbuf((size_t)rows * N);
    for (int k = 0; k < C; k++)
        for (int n = 0; n < N; n++) wt[(size_t)n * C + k] = wp[(size_t)k * N + n];
    cpu_matmul_backward(dmid, unused, NULL, dy, act, wp, r0, N, C);
    if (M > r1) cpu_matmul_backward(dmid + (size_t)r0 * N, unused, NULL, dy + (size_t)r1 * C, act, wp, M - r1, N, C);
    memcpy(pre_rows, pre_in, (size_t)r0 * N * sizeof(float));
    memcpy(pre_rows + (size_t)r0 * N, pre_in + (size_t)r1 * N, (size_t)(M - r1) * N * sizeof(float));
    fc_act_backward(f, rd, pre_rows, dmid, (size_t)rows * N);
    size_t tiles = ((size_t)M + FC_GEMM_TILE_ROWS - 1) / FC_GEMM_TILE_ROWS;
    dptr dwp = harness_dup_x(g, wp, (size_t)C * N), dwt = harness_dalloc(g, (size_t)N * C * g->xs), ddy = harness_dup_x(g, dy, nx);
    dptr dpin = harness_dup_x(g, pre_in, nn), dd = harness_dalloc(g, nn * g->xs), scratch = harness_dalloc(g, tiles * N * 4), dbias = harness_dup_x(g, b0, N);
    int rc = launch_transpose_fcproj(&g->ks, g->s, dwt, dwp, err) ||
             fc_gemm_backward(&g->ks, g->s, dd, scratch, ddy, dwt, dpin, err) ||
             (f->bias && launch_fc_bias_reduce(&g->ks, g->s, dbias, scratch, err));
    HarnessCmp c = {0, 0, ""};
    double tol = 3e-2;   /* GELU' of a rounded product, as cuBLASLt's DGELU epilogue test */
    if (!rc) {
        harness_down(g, gwt, dwt, (size_t)N * C);
        harness_cmp(&c, "fcproj weight transposed", gwt, wt, (size_t)N * C, 0.0);
        harness_down(g, got, dd, nn);
        ref_bias(rb, b0, got, M, N);   /* the sums are of the stored gradient, all M rows */
        harness_cmp(&c, "dpre", checked_rows(got, M, N, r0, r1), rd, (size_t)rows * N, tol);
        harness_down(g, gb, dbias, N);
        if (f->bias) harness_cmp(&c, "fc dbias", gb, rb, N, g->tol);
    }
    harness_finish(g, f->relu2 ? "fcproj_dgelu_backward (fcproj dinp + ReLU^2 backward, fused)"
                               : "fcproj_dgelu_backward (fcproj dinp + GELU backward + fc bias gradient, fused)", &c, err, rc);
    free(wp); free(dy); free(pre_in); free(b0); free(dmid);
    free(rd); free(unused); free(wt); free(gwt); free(rb); free(gb); free(pre_rows);
}

/* templates/fc_gemm.cu (train.gelu = "fused") against the CPU: the fc matmul with its bias and the GELU, the fcproj
   weight's transpose, the fcproj dinp with the GELU backward, and the fc bias gradient from its partials. The kernels
   are specialized to all B*T rows; the CPU checks the first 256 and the last 128 of them (every 128-row tile computes
   the same way; the last one may be partial), and the bias gradient (a sum over all rows) against the sums of the
   gradient the kernel stored, in double. */
void kernel_test_fc_gemm(Harness *g) {
    static const int ids[] = {K_FC_GELU_FORWARD, K_FCPROJ_DGELU_BACKWARD, K_TRANSPOSE_FCPROJ, K_FC_BIAS_REDUCE};
    const char *name = "fc_gemm (fused fc matmul + GELU; fcproj dinp + GELU backward + fc bias gradient)";
    const char *no = wl_fc_gemm_unavailable(g);
    if (no) {
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) g->skipped[ids[i]] = 1;
        harness_skip(g, name, "%s (here %s, %s)", no, g->plan->arch, precision_name(g->plan->step.precision));
        return;
    }
    int M = g->BT, C = g->C, N = 4 * C;
    /* the rows the CPU checks: [0, r0) and [r1, M) */
    int r0 = M < 256 ? M : 256, r1 = M - 128 > r0 ? M - 128 : r0, rows = r0 + (M - r1);
    size_t nx = (size_t)M * C, nn = (size_t)M * N;
    Err err = {{0}};
    FcRows f = {M, C, N, r0, r1, rows, g->plan->model.mlp == MLP_RELU2, !g->plan->model.no_bias};
    float *x = harness_hrand(g, nx, 1.0f), *w = harness_hrand(g, (size_t)N * C, 0.5f), *b = harness_hrand(g, N, 1.0f);
    float *pre = harness_hbuf((size_t)rows * N), *act = harness_hbuf((size_t)rows * N), *got = harness_hbuf(nn);
    dptr dx = harness_dup_x(g, x, nx), dw = harness_dup_x(g, w, (size_t)N * C), db = harness_dup_x(g, b, N);
    dptr dpre = harness_dalloc(g, nn * g->xs), dact = harness_dalloc(g, nn * g->xs);
    cpu_matmul_forward(pre, x, w, f.bias ? b : NULL, r0, C, N);
    if (M > r1) cpu_matmul_forward(pre + (size_t)r0 * N, x + (size_t)r1 * C, w, f.bias ? b : NULL, M - r1, C, N);
    harness_quantize(g, pre, (size_t)rows * N);
    fc_act(&f, act, pre, (size_t)rows * N);
    int rc = fc_gemm_forward(&g->ks, g->s, dpre, dact, dx, dw, db, &err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        harness_down(g, got, dpre, nn); harness_cmp(&c, "pre-activation", checked_rows(got, M, N, r0, r1), pre, (size_t)rows * N, g->tol);
        harness_down(g, got, dact, nn);
        harness_cmp(&c, f.relu2 ? "ReLU^2" : "GELU", checked_rows(got, M, N, r0, r1), act, (size_t)rows * N, g->tol);
    }
    harness_finish(g, f.relu2 ? "fc_gelu_forward (fc matmul + ReLU^2, fused)" : "fc_gelu_forward (fc matmul + bias + GELU, fused)",
                   &c, &err, rc);

    fc_gemm_test_backward(g, &f, act, got, &err);
    if (!f.bias) {   /* the family is in the plan for its fused matmuls: the bias reduce has no bias to sum into */
        g->skipped[K_FC_BIAS_REDUCE] = 1;
        harness_skip(g, "fc_bias_reduce", "the model has no biases");
    }
    free(x); free(w); free(b); free(pre); free(act); free(got);
    harness_dfree_all(g);
}
