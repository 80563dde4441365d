/* test_attention: attention against the fp64 reference (tests/gpu/attention_ref.c). On the CPU (CI): the
   reference itself against the CPU backend's attention, so that the GPU paths are held to a reference that is
   checked in turn. On the GPU: the flash-attention kernels (templates/attention.cu) generated for a range of
   shapes (head size 64 and 128, T from 64 to 2048 with T not a multiple of 64 too, B from 1 to 64), forward
   output and statistics and dq/dk/dv against the reference, with a timing line per shape. Each shape's kernels
   are generated and compiled first (that part runs everywhere). */
#include "tests/check.h"
#include "tests/gpu/attention_ref.h"
#include "common/err.h"
#include "common/rng.h"
#include "runtime/cpu/cpu_ops.h"
#include "gen/build.h"
#include "gen/config.h"
#include "gen/plan.h"
#include "runtime/cuda/cuda_api.h"
#include "tests/gpu/kernel_tests.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

/* one shape of the GPU tests: the tiny config with this attention shape (one layer, a small vocabulary) */
static void flash_shape(const char *precision, int B, int T, int NH, int HS) {
    char sets[10][64];
    const char *setp[10];
    int n = 0;
    snprintf(sets[n++], 64, "name=att-%s-b%d-t%d-h%d-hs%d", precision, B, T, NH, HS);
    snprintf(sets[n++], 64, "precision=%s", precision);
    snprintf(sets[n++], 64, "model.n_layer=1");
    snprintf(sets[n++], 64, "model.n_head=%d", NH);
    snprintf(sets[n++], 64, "model.n_embd=%d", NH * HS);
    snprintf(sets[n++], 64, "model.max_seq_len=%d", T);
    snprintf(sets[n++], 64, "model.vocab_size=256");
    snprintf(sets[n++], 64, "train.batch_size=%d", B);
    snprintf(sets[n++], 64, "train.seq_len=%d", T);
    snprintf(sets[n++], 64, "train.total_batch_size=%d", B * T);
    for (int i = 0; i < n; i++) setp[i] = sets[i];
    static Config cfg;
    static Plan plan;
    Err err;
    char arch[16], why[512];
    const char *note;
    if (config_load(&cfg, "configs/tiny.lua", setp, n, &err)) { CHECK(0, "config: %s", err.msg); return; }
    cfg.eval.sample_tokens = T / 2 > 0 ? T / 2 : 1;
    cuda_pick_arch(NULL, cfg.arch, arch, &note);
    if (plan_make(&plan, &cfg, arch, &err) || build_run(&plan, 0, 1, NULL, &err)) { CHECK(0, "build: %s", err.msg); return; }
    if (!cuda_driver_present(why, sizeof why)) SKIP("%s", why);
    int failed = gpu_attention_test_run(&cfg, &plan);
    if (failed < 0) SKIP("no GPU (see the line above)");
    CHECK(failed == 0, "%d attention test(s) failed for %s (see the FAIL lines above)", failed, cfg.name);
}

#define SHAPE(prec, B, T, NH, HS) \
    static void test_flash_##prec##_b##B##_t##T##_h##NH##_hs##HS(void) { flash_shape(#prec, B, T, NH, HS); }
#define SHAPES(X, prec) \
    X(prec, 1, 64, 2, 64) X(prec, 2, 100, 3, 64) X(prec, 3, 200, 2, 128) X(prec, 4, 256, 4, 128) \
    X(prec, 2, 1024, 2, 128) X(prec, 1, 2048, 2, 64) X(prec, 1, 2048, 1, 128) X(prec, 64, 1024, 12, 64)
SHAPES(SHAPE, bf16)
SHAPE(fp32, 2, 100, 3, 64)
SHAPE(fp32, 1, 256, 2, 128)
#define RUN_SHAPE(prec, B, T, NH, HS) RUN(test_flash_##prec##_b##B##_t##T##_h##NH##_hs##HS);

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_reference_vs_cpu_backend);
    SHAPES(RUN_SHAPE, bf16)
    RUN_SHAPE(fp32, 2, 100, 3, 64)
    RUN_SHAPE(fp32, 1, 256, 2, 128)
    return check_summary();
}
