/* test_attention: attention against the fp64 reference (tests/gpu/attention_ref.c). On the CPU (CI): the
   reference itself against the CPU backend's attention, so that the GPU paths are held to a reference that is
   checked in turn; and cuDNN attention's refusals that need no GPU. On a GPU: cuDNN attention's forward (out,
   stats) and backward (dq, dk, dv) against the reference, bf16 and fp16, head sizes 64 and 128, T from 64 to
   2048, with one timing line per shape. Without a GPU (or without cuDNN) those say "skip ...: no GPU: ...". */
#include "tests/check.h"
#include "tests/gpu/attention_ref.h"
#include "common/bf16.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/rng.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/cuda/cudnn_attention.h"
#include "runtime/cuda/device.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *rand_buf(uint64_t *rng, size_t n, float scale) {
    float *x = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(rng) - 1.0f);
    return x;
}

/* the reference against cpu_attention_forward/backward on every head of a small shape, HS 16 */
static void test_reference_vs_cpu_backend(void) {
    AttShape s = {2, 37, 64, 4};
    size_t BT = (size_t)s.B * s.T, natt = (size_t)s.B * s.NH * s.T * s.T;
    uint64_t rng = 42;
    float *qkv = rand_buf(&rng, BT * 3 * s.C, 2.0f), *dout = rand_buf(&rng, BT * s.C, 1.0f);
    float *out = xcalloc(BT * s.C, 4), *preatt = xcalloc(natt, 4), *att = xcalloc(natt, 4);
    float *dqkv = xcalloc(BT * 3 * s.C, 4), *dpre = xcalloc(natt, 4), *datt = xcalloc(natt, 4);
    float *stats = xcalloc((size_t)s.B * s.NH * s.T, 4);
    cpu_attention_forward(out, preatt, att, qkv, s.B, s.T, s.C, s.NH);
    cpu_attention_backward(dqkv, dpre, datt, dout, qkv, att, s.B, s.T, s.C, s.NH);
    /* the CPU backend keeps no statistics: log-sum-exp of its scaled scores, per row */
    for (int bh = 0; bh < s.B * s.NH; bh++)
        for (int t = 0; t < s.T; t++) {
            const float *row = preatt + ((size_t)bh * s.T + t) * s.T;
            double m = -INFINITY, z = 0;
            for (int j = 0; j <= t; j++) m = fmax(m, row[j]);
            for (int j = 0; j <= t; j++) z += exp(row[j] - m);
            stats[(size_t)bh * s.T + t] = (float)(m + log(z));
        }
    AttErr e;
    attention_ref_compare(&s, qkv, dout, s.B * s.NH, out, stats, dqkv, &e);
    CHECK(e.out < 1e-5 && e.lse < 1e-5, "forward: out %.2e lse %.2e", e.out, e.lse);
    CHECK(e.dq < 1e-5 && e.dk < 1e-5 && e.dv < 1e-5, "backward: dq %.2e dk %.2e dv %.2e", e.dq, e.dk, e.dv);
    /* and the comparison notices a wrong value */
    dqkv[(size_t)(s.T - 1) * 3 * s.C + s.C] += 0.5f;
    attention_ref_compare(&s, qkv, dout, s.B * s.NH, out, stats, dqkv, &e);
    CHECK(e.dk > 1e-3, "a changed dk went unnoticed (%.2e)", e.dk);
    free(qkv); free(dout); free(out); free(preatt); free(att); free(dqkv); free(dpre); free(datt); free(stats);
}

/* ---- cuDNN attention ---- */

/* fp16 on the host, for the test's inputs and outputs: round to nearest even, with subnormals, overflow to inf */
static uint16_t half_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);      /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);     /* rounds to 65520 or more: inf */
    if (a < 0x38800000u) {                                       /* under 2^-14: a multiple of 2^-24 */
        float v;
        memcpy(&v, &a, sizeof v);
        return (uint16_t)(sign | (uint32_t)lrintf(v * 16777216.0f));
    }
    uint32_t r = a - 0x38000000u;                                /* exponent bias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

static float half_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { float f = ldexpf((float)m, -24); return sign ? -f : f; }
    uint32_t u = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_half_conversion(void) {
    const float exact[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f, 0.333251953125f};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        CHECK(half_to_f32(half_from_f32(exact[i])) == exact[i], "%g does not survive fp16", exact[i]);
    CHECK(half_from_f32(1.0f + 1.0f / 2048) == 0x3c00, "a tie rounds to even (down)");
    CHECK(half_from_f32(1.0f + 3.0f / 2048) == 0x3c02, "a tie rounds to even (up)");
    CHECK(half_from_f32(65520.0f) == 0x7c00 && half_from_f32(65519.0f) == 0x7bff, "overflow to inf at 65520");
    CHECK(half_from_f32(3e-8f) == 0x0001 && half_from_f32(2.9e-8f) == 0x0000, "the smallest subnormal");
    CHECK(isnan(half_to_f32(half_from_f32(NAN))) && isinf(half_to_f32(0xfc00)), "nan and inf");
}

/* Rounds x to prec in place and returns the 16-bit copy to upload: the GPU and the reference see the same values. */
static uint16_t *round_to(Precision prec, float *x, size_t n) {
    uint16_t *h = xcalloc(n, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        h[i] = prec == PREC_FP16 ? half_from_f32(x[i]) : bf16_from_f32(x[i]);
        x[i] = prec == PREC_FP16 ? half_to_f32(h[i]) : bf16_to_f32(h[i]);
    }
    return h;
}

static void widen(Precision prec, const uint16_t *h, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = prec == PREC_FP16 ? half_to_f32(h[i]) : bf16_to_f32(h[i]);
}

/* the environment variable for one test, restored after it */
static char *saved_env;
static void env_set(const char *value) {
    const char *old = getenv("GPT2GEN_CUDNN_LIBRARY");
    saved_env = old ? xstrdup(old) : NULL;
    setenv("GPT2GEN_CUDNN_LIBRARY", value, 1);
}
static void env_restore(void) {
    if (saved_env) setenv("GPT2GEN_CUDNN_LIBRARY", saved_env, 1);
    else unsetenv("GPT2GEN_CUDNN_LIBRARY");
    free(saved_env);
    saved_env = NULL;
}

/* refusals that need no GPU */
static void test_cudnn_hidden(void) {
    char why[1024] = "";
    env_set("none");
    CudnnAttention *a = cudnn_attention_open(1, 128, 2, 64, PREC_BF16, why, sizeof why);
    env_restore();
    CHECK(a == NULL, "GPT2GEN_CUDNN_LIBRARY=none still opened cuDNN");
    CHECK(strstr(why, "GPT2GEN_CUDNN_LIBRARY") != NULL, "the reason does not name the variable: '%s'", why);
    cudnn_attention_close(a);
}

static void test_cudnn_missing_library(void) {
    char why[1024] = "";
    env_set("libcudnn_not_here.so.9");
    CudnnAttention *a = cudnn_attention_open(1, 128, 2, 64, PREC_BF16, why, sizeof why);
    env_restore();
    CHECK(a == NULL, "a missing library opened");
    CHECK(strstr(why, "libcudnn_not_here.so.9") != NULL, "the reason does not name the library: '%s'", why);
    cudnn_attention_close(a);
}

static void test_cudnn_refuses_fp32_and_head_size(void) {
    char why[1024] = "";
    CudnnAttention *a = cudnn_attention_open(1, 128, 2, 64, PREC_FP32, why, sizeof why);
    CHECK(a == NULL && strcmp(why, "cuDNN flash attention needs bf16 or fp16") == 0, "fp32: '%s'", why);
    cudnn_attention_close(a);
    a = cudnn_attention_open(1, 128, 2, 60, PREC_BF16, why, sizeof why);
    CHECK(a == NULL && strstr(why, "head size 60") != NULL, "HS=60: '%s'", why);
    cudnn_attention_close(a);
}

/* the GPU, opened once for all the cases */
static CudaDevice dev;
static int dev_state;          /* 0 not tried, 1 open, -1 none */
static char dev_why[sizeof(((Err *)0)->msg)];

static int gpu_open(void) {
    if (dev_state == 0) {
        Err err;
        if (cuda_device_open(&dev, 0, &err) == 0) dev_state = 1;
        else { dev_state = -1; snprintf(dev_why, sizeof dev_why, "%s", err.msg); }
    }
    return dev_state == 1;
}

/* "cuDNN 9.14.0 (...)" -> 91400, or 0 */
static int version_in(const char *text) {
    const char *p = strstr(text, "cuDNN ");
    int major = 0, minor = 0, patch = 0;
    if (!p || sscanf(p + 6, "%d.%d.%d", &major, &minor, &patch) != 3) return 0;
    return major * 10000 + minor * 100 + patch;
}

typedef struct { int B, T, NH, HS, heads; } AttCase;

/* Tolerances, max |got - ref| / max |ref| per sampled head (inputs are rounded to the precision first, so only
   cuDNN's own roundings count): bf16 keeps 8 bits of mantissa, and P and dS are rounded to bf16 before their
   matmuls: 1e-2 on out, 3e-2 on the gradients; fp16 keeps 11 bits: 3e-3 on out, 1e-2 on the gradients. The
   statistics are fp32 throughout: 1e-3 either way. */
static double tol_out(Precision p) { return p == PREC_FP16 ? 3e-3 : 1e-2; }
static double tol_grad(Precision p) { return p == PREC_FP16 ? 1e-2 : 3e-2; }
#define TOL_LSE 1e-3

static int dev_alloc(CUdeviceptr *p, size_t bytes) {
    Err err;
    if (cuda_check(cu.cuMemAlloc(p, bytes), "cuMemAlloc", &err)) { CHECK(0, "%s (%zu bytes)", err.msg, bytes); *p = 0; return -1; }
    return 0;
}

static void run_case(const AttCase *c, Precision prec) {
    const char *pname = prec == PREC_FP16 ? "fp16" : "bf16";
    const int C = c->NH * c->HS;
    const size_t BT = (size_t)c->B * c->T, n_qkv = BT * 3 * C, n_out = BT * C, n_stats = (size_t)c->B * c->NH * c->T;
    char why[1024] = "";
    double t0 = now_seconds();
    CudnnAttention *a = cudnn_attention_open(c->B, c->T, c->NH, c->HS, prec, why, sizeof why);
    const double open_s = now_seconds() - t0;
    if (!a && c->T % 128 != 0 && strstr(why, "multiple of 128")) {
        /* cuDNN before 9.15.1: T must be a multiple of 128, and the refusal says why */
        char t_is[32];
        snprintf(t_is, sizeof t_is, "T=%d", c->T);
        const int v = version_in(why);
        CHECK(v > 0 && v < 91501 && strstr(why, t_is), "a refusal of T=%d on %d: '%s'", c->T, v, why);
        printf("cudnn %s B=%d T=%d NH=%d HS=%d: refused as expected: %s\n", pname, c->B, c->T, c->NH, c->HS, why);
        return;
    }
    if (!a) { CHECK(0, "cudnn_attention_open(B=%d T=%d NH=%d HS=%d %s): %s", c->B, c->T, c->NH, c->HS, pname, why); return; }
    const int v = version_in(cudnn_attention_describe(a));
    CHECK(c->T % 128 == 0 || v >= 91501, "T=%d opened on %d, which should refuse it", c->T, v);

    uint64_t rng = 1000u + (uint64_t)c->T * 7 + (uint64_t)c->HS * 13 + (uint64_t)c->B * 17 + (uint64_t)prec;
    float *qkv = rand_buf(&rng, n_qkv, 2.0f), *dout = rand_buf(&rng, n_out, 1.0f);
    uint16_t *qkv16 = round_to(prec, qkv, n_qkv), *dout16 = round_to(prec, dout, n_out);
    uint16_t *out16 = xcalloc(n_out, 2), *dqkv16 = xcalloc(n_qkv, 2), *dqkv16_again = xcalloc(n_qkv, 2);
    float *out = xcalloc(n_out, 4), *stats = xcalloc(n_stats, 4), *dqkv = xcalloc(n_qkv, 4);
    CUdeviceptr d_qkv = 0, d_out = 0, d_stats = 0, d_dout = 0, d_dqkv = 0;
    CUevent e0 = NULL, e1 = NULL, e2 = NULL;
    Err err;
    const CUstream s = dev.compute;
    if (dev_alloc(&d_qkv, n_qkv * 2) || dev_alloc(&d_out, n_out * 2) || dev_alloc(&d_stats, n_stats * 4) ||
        dev_alloc(&d_dout, n_out * 2) || dev_alloc(&d_dqkv, n_qkv * 2))
        goto done;
    cu.cuMemcpyHtoD(d_qkv, qkv16, n_qkv * 2);
    cu.cuMemcpyHtoD(d_dout, dout16, n_out * 2);
    cu.cuMemsetD8(d_dqkv, 0xff, n_qkv * 2);   /* NaNs: every element must be written */
    if (cudnn_attention_forward(a, s, d_out, d_stats, d_qkv, &err) ||
        cudnn_attention_backward(a, s, d_dqkv, d_qkv, d_out, d_dout, d_stats, &err) ||
        cuda_check(cu.cuStreamSynchronize(s), "after cuDNN attention", &err)) {
        CHECK(0, "B=%d T=%d NH=%d HS=%d %s: %s", c->B, c->T, c->NH, c->HS, pname, err.msg);
        goto done;
    }
    cu.cuMemcpyDtoH(out16, d_out, n_out * 2);
    cu.cuMemcpyDtoH(stats, d_stats, n_stats * 4);
    cu.cuMemcpyDtoH(dqkv16, d_dqkv, n_qkv * 2);
    widen(prec, out16, out, n_out);
    widen(prec, dqkv16, dqkv, n_qkv);
    AttShape shape = {c->B, c->T, C, c->NH};
    AttErr e;
    attention_ref_compare(&shape, qkv, dout, c->heads, out, stats, dqkv, &e);
    CHECK(e.out < tol_out(prec) && e.lse < TOL_LSE, "B=%d T=%d NH=%d HS=%d %s forward: out %.2e (tolerance %.0e) "
          "stats %.2e (%.0e)", c->B, c->T, c->NH, c->HS, pname, e.out, tol_out(prec), e.lse, TOL_LSE);
    CHECK(e.dq < tol_grad(prec) && e.dk < tol_grad(prec) && e.dv < tol_grad(prec), "B=%d T=%d NH=%d HS=%d %s "
          "backward: dq %.2e dk %.2e dv %.2e (tolerance %.0e)", c->B, c->T, c->NH, c->HS, pname, e.dq, e.dk, e.dv,
          tol_grad(prec));

    /* timing (informational): a few repetitions of each, after the first calls above */
    const int reps = BT * c->T > (size_t)1 << 24 ? 5 : 10;
    float ms_fwd = 0, ms_bwd = 0;
    int bad = cu.cuEventCreate(&e0, CU_EVENT_DEFAULT) || cu.cuEventCreate(&e1, CU_EVENT_DEFAULT) ||
              cu.cuEventCreate(&e2, CU_EVENT_DEFAULT);
    bad = bad || cu.cuEventRecord(e0, s);
    for (int r = 0; r < reps && !bad; r++) bad = cudnn_attention_forward(a, s, d_out, d_stats, d_qkv, &err);
    bad = bad || cu.cuEventRecord(e1, s);
    for (int r = 0; r < reps && !bad; r++) bad = cudnn_attention_backward(a, s, d_dqkv, d_qkv, d_out, d_dout, d_stats, &err);
    bad = bad || cu.cuEventRecord(e2, s) || cu.cuEventSynchronize(e2);
    CHECK(!bad, "timing B=%d T=%d: %s", c->B, c->T, err.msg);
    cu.cuEventElapsedTime(&ms_fwd, e0, e1);
    cu.cuEventElapsedTime(&ms_bwd, e1, e2);
    /* deterministic: the last backward wrote the same bits as the first */
    cu.cuMemcpyDtoH(dqkv16_again, d_dqkv, n_qkv * 2);
    CHECK(memcmp(dqkv16, dqkv16_again, n_qkv * 2) == 0, "B=%d T=%d NH=%d HS=%d %s: the backward is not deterministic",
          c->B, c->T, c->NH, c->HS, pname);
    /* 2 matmuls forward, 5 backward (one of them recomputing the scores), 2*T*T*HS each per (b,h), halved by the mask */
    const double flop = (double)c->B * c->NH * c->T * c->T * c->HS * 2.0 / 2.0;
    printf("cudnn %s B=%d T=%d NH=%d HS=%d: forward %.3f ms (%.0f TFLOP/s), backward %.3f ms (%.0f TFLOP/s), "
           "plans %.1f s, %.1f MiB; errors out %.1e stats %.1e dq %.1e dk %.1e dv %.1e (%s)\n",
           pname, c->B, c->T, c->NH, c->HS, ms_fwd / reps, 2 * flop / (ms_fwd / reps * 1e9), ms_bwd / reps,
           5 * flop / (ms_bwd / reps * 1e9), open_s, cudnn_attention_gpu_bytes(a) / 1048576.0, e.out, e.lse, e.dq,
           e.dk, e.dv, cudnn_attention_describe(a));
    fflush(stdout);
done:
    if (e0) cu.cuEventDestroy(e0);
    if (e1) cu.cuEventDestroy(e1);
    if (e2) cu.cuEventDestroy(e2);
    if (d_qkv) cu.cuMemFree(d_qkv);
    if (d_out) cu.cuMemFree(d_out);
    if (d_stats) cu.cuMemFree(d_stats);
    if (d_dout) cu.cuMemFree(d_dout);
    if (d_dqkv) cu.cuMemFree(d_dqkv);
    cudnn_attention_close(a);
    free(qkv); free(dout); free(qkv16); free(dout16); free(out16); free(dqkv16); free(dqkv16_again);
    free(out); free(stats); free(dqkv);
}

/* SKIP where there is no GPU or no cuDNN; 1 to go on */
static int cudnn_ready(void) {
    if (!gpu_open()) { MARK_SKIPPED("%s", dev_why); return 0; }
    char why[1024] = "";
    CudnnAttention *a = cudnn_attention_open(1, 128, 1, 64, PREC_BF16, why, sizeof why);
    if (!a && (strstr(why, "cuDNN not found") || strstr(why, "cuDNN is hidden"))) {
        MARK_SKIPPED("no cuDNN: %s", why);
        return 0;
    }
    cudnn_attention_close(a);
    return 1;   /* other failures show in the cases */
}

static void run_cases(int HS, Precision prec) {
    if (!cudnn_ready()) return;
    const int NH = 256 / HS;   /* C = 256 */
    const AttCase cases[] = {{1, 64, NH, HS, 4}, {4, 128, NH, HS, 4}, {1, 256, NH, HS, 4}, {4, 1024, NH, HS, 4},
                             {1, 2048, NH, HS, 2}, {4, 2048, NH, HS, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (HS == 128 && cases[i].T == 2048 && cases[i].B == 1) continue;   /* B=4 covers it */
        if (HS == 64 && cases[i].T == 2048 && cases[i].B == 4) continue;
        run_case(&cases[i], prec);
    }
}

static void test_cudnn_bf16_hs64(void) { run_cases(64, PREC_BF16); }
static void test_cudnn_bf16_hs128(void) { run_cases(128, PREC_BF16); }
static void test_cudnn_fp16_hs64(void) { run_cases(64, PREC_FP16); }
static void test_cudnn_fp16_hs128(void) { run_cases(128, PREC_FP16); }

/* gpt2-124M's attention at B=64 (4 heads compared, so the reference stays fast) */
static void test_cudnn_bf16_gpt2_124m_b64(void) {
    if (!cudnn_ready()) return;
    const AttCase c = {64, 1024, 12, 64, 4};
    run_case(&c, PREC_BF16);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_reference_vs_cpu_backend);
    RUN(test_half_conversion);
    RUN(test_cudnn_hidden);
    RUN(test_cudnn_missing_library);
    RUN(test_cudnn_refuses_fp32_and_head_size);
    RUN(test_cudnn_bf16_hs64);
    RUN(test_cudnn_bf16_hs128);
    RUN(test_cudnn_fp16_hs64);
    RUN(test_cudnn_fp16_hs128);
    RUN(test_cudnn_bf16_gpt2_124m_b64);
    if (dev_state == 1) cuda_device_close(&dev);
    return check_summary();
}
