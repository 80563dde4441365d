/* test_attention: attention against the fp64 reference (tune/attention_ref.c). On the CPU (CI): the
   reference itself against the CPU backend's attention, so that the GPU paths are held to a reference that is
   checked in turn. On the GPU: the flash-attention kernels (templates/attention.cu) generated for a range of
   shapes (head size 64 and 128, T from 64 to 2048 with T not a multiple of 64 too, B from 1 to 64; bf16, fp16
   and fp32), forward
   output and statistics and dq/dk/dv against the reference, with a timing line per shape. Each shape's kernels
   are generated and compiled first (that part runs everywhere). cuDNN's attention runs beside the template at
   each shape where it loads and takes it (see tune/kernel_tests_attention.c); its refusals that need no GPU are
   tested here, in CI too. */
#include "tests/check.h"
#include "tune/attention_ref.h"
#include "common/err.h"
#include "common/rng.h"
#include "runtime/cpu/cpu_ops.h"
#include "gen/build.h"
#include "gen/config.h"
#include "gen/plan.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/gpu.h"
#include "runtime/cuda/cudnn_attention.h"
#include "tune/kernel_tests.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *rand_buf(uint64_t *rng, size_t n, float scale) {
    float *x = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(rng) - 1.0f);
    return x;
}

/* the CPU backend keeps no statistics: the log-sum-exp of its scaled scores (preatt, BH heads of T x T), per row */
static void cpu_stats(float *stats, const float *preatt, int BH, int T) {
    for (int bh = 0; bh < BH; bh++)
        for (int t = 0; t < T; t++) {
            const float *row = preatt + ((size_t)bh * T + t) * T;
            double m = -INFINITY, z = 0;
            for (int j = 0; j <= t; j++) m = fmax(m, row[j]);
            for (int j = 0; j <= t; j++) z += exp(row[j] - m);
            stats[(size_t)bh * T + t] = (float)(m + log(z));
        }
}

/* the reference against cpu_attention_forward/backward on every head of a small shape, HS 16 */
static void test_reference_vs_cpu_backend(void) {
    AttShape s = {2, 37, 64, 4, 4};
    size_t BT = (size_t)s.B * s.T, natt = (size_t)s.B * s.NH * s.T * s.T;
    uint64_t rng = 42;
    float *qkv = rand_buf(&rng, BT * 3 * s.C, 2.0f), *dout = rand_buf(&rng, BT * s.C, 1.0f);
    float *out = xcalloc(BT * s.C, 4), *preatt = xcalloc(natt, 4), *att = xcalloc(natt, 4);
    float *dqkv = xcalloc(BT * 3 * s.C, 4), *dpre = xcalloc(natt, 4), *datt = xcalloc(natt, 4);
    float *stats = xcalloc((size_t)s.B * s.NH * s.T, 4);
    cpu_attention_forward(out, preatt, att, qkv, s.B, s.T, s.C, s.NH);
    cpu_attention_backward(dqkv, dpre, datt, dout, qkv, att, s.B, s.T, s.C, s.NH);
    cpu_stats(stats, preatt, s.B * s.NH, s.T);
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

/* grouped-query attention (6 query heads on 2 key/value heads, and multi-query: 1): the reference against the CPU
   backend's cpu_attention_*_gqa on every head, a key/value head's dk and dv the sums over its query heads */
static void test_reference_gqa_vs_cpu_backend(void) {
    for (int NKV = 2; NKV >= 1; NKV--) {
        AttShape s = {2, 29, 96, 6, NKV};
        CpuHeads g = {s.B, s.T, s.NH, NKV, s.C / s.NH};
        size_t BT = (size_t)s.B * s.T, W = (size_t)s.C + 2 * (size_t)NKV * g.HS, natt = (size_t)s.B * s.NH * s.T * s.T;
        uint64_t rng = 43;
        float *qkv = rand_buf(&rng, BT * W, 2.0f), *dout = rand_buf(&rng, BT * s.C, 1.0f);
        float *out = xcalloc(BT * s.C, 4), *preatt = xcalloc(natt, 4), *att = xcalloc(natt, 4);
        float *dqkv = xcalloc(BT * W, 4), *dpre = xcalloc(natt, 4), *datt = xcalloc(natt, 4);
        float *stats = xcalloc((size_t)s.B * s.NH * s.T, 4);
        cpu_attention_forward_gqa(out, preatt, att, qkv, g);
        cpu_attention_backward_gqa(dqkv, dpre, datt, dout, qkv, att, g);
        cpu_stats(stats, preatt, s.B * s.NH, s.T);
        AttErr e;
        attention_ref_compare(&s, qkv, dout, s.B * s.NH, out, stats, dqkv, &e);
        CHECK(e.out < 1e-5 && e.lse < 1e-5, "NKV %d forward: out %.2e lse %.2e", NKV, e.out, e.lse);
        CHECK(e.dq < 1e-5 && e.dk < 1e-5 && e.dv < 1e-5, "NKV %d backward: dq %.2e dk %.2e dv %.2e", NKV, e.dq, e.dk, e.dv);
        /* a key/value head's dv is the sum over its group: a change to the last group's notices */
        dqkv[(BT - 1) * W + s.C + (size_t)(2 * NKV - 1) * g.HS] += 0.5f;
        attention_ref_compare(&s, qkv, dout, s.B * s.NH, out, stats, dqkv, &e);
        CHECK(e.dv > 1e-3, "NKV %d: a changed dv went unnoticed (%.2e)", NKV, e.dv);
        free(qkv); free(dout); free(out); free(preatt); free(att); free(dqkv); free(dpre); free(datt); free(stats);
    }
}

/* ---- cuDNN attention ---- */

/* refusals that need no GPU: GPT2GEN_CUDNN_LIBRARY=value does not open, with a reason that holds want */
static void expect_library_refused(const char *value, const char *want) {
    char why[1024] = "";
    Env env;
    env_defaults(&env);
    env.cudnn_library = value;
    CudnnAttention *a = cudnn_attention_open(1, 128, 2, 64, PREC_BF16, 1, &env, why, sizeof why);
    CHECK(a == NULL, "GPT2GEN_CUDNN_LIBRARY=%s opened cuDNN", value);
    CHECK(strstr(why, want) != NULL, "GPT2GEN_CUDNN_LIBRARY=%s: the reason does not name %s: '%s'", value, want, why);
    cudnn_attention_close(a);
}
static void test_cudnn_hidden(void) { expect_library_refused("none", "GPT2GEN_CUDNN_LIBRARY"); }
static void test_cudnn_missing_library(void) { expect_library_refused("libcudnn_not_here.so.9", "libcudnn_not_here.so.9"); }

static void test_cudnn_refuses_fp32_and_head_size(void) {
    char why[1024] = "";
    CudnnAttention *a = cudnn_attention_open(1, 128, 2, 64, PREC_FP32, 1, NULL, why, sizeof why);
    CHECK(a == NULL && strcmp(why, "cuDNN flash attention needs bf16 or fp16") == 0, "fp32: '%s'", why);
    cudnn_attention_close(a);
    a = cudnn_attention_open(1, 128, 2, 60, PREC_BF16, 1, NULL, why, sizeof why);
    CHECK(a == NULL && strstr(why, "head size 60") != NULL, "HS=60: '%s'", why);
    cudnn_attention_close(a);
}

/* one shape of the GPU tests: the tiny config with this attention shape (one layer, a small vocabulary), NKV
   key/value heads (NH: multi-head attention) */
/* tune: NULL, or "KEY=VALUE" tunables of the attention family, separated by spaces (at most 5) */
static void flash_gqa(const char *precision, int B, int T, int NH, int NKV, int HS, const char *tune) {
    char sets[16][128];
    const char *setp[16];
    int n = 0;
    char kv[32] = "";
    if (NKV != NH) snprintf(kv, sizeof kv, "-kv%d", NKV);
    snprintf(sets[n++], 128, "name=att-%s-b%d-t%d-h%d%s-hs%d%s%s", precision, B, T, NH, kv, HS, tune ? "-" : "",
             tune ? tune : "");
    for (char *c = sets[0] + 5; *c; c++)
        if (*c == '=' || *c == ' ') *c = '-';   /* a name of letters, digits and -_. */
    for (const char *t = tune; t && *t && n < 6;) {
        size_t len = strcspn(t, " ");
        snprintf(sets[n++], 128, "tune.attention.%.*s", (int)len, t);
        t += len + (t[len] == ' ');
    }
    snprintf(sets[n++], 128, "precision=%s", precision);
    snprintf(sets[n++], 128, "model.n_layer=1");
    snprintf(sets[n++], 128, "model.n_head=%d", NH);
    if (NKV != NH) snprintf(sets[n++], 128, "model.n_kv_head=%d", NKV);
    snprintf(sets[n++], 128, "model.n_embd=%d", NH * HS);
    snprintf(sets[n++], 128, "model.max_seq_len=%d", T);
    snprintf(sets[n++], 128, "model.vocab_size=256");
    snprintf(sets[n++], 128, "train.batch_size=%d", B);
    snprintf(sets[n++], 128, "train.seq_len=%d", T);
    snprintf(sets[n++], 128, "train.total_batch_size=%d", B * T);
    for (int i = 0; i < n; i++) setp[i] = sets[i];
    static Config cfg;
    static Plan plan;
    Err err;
    char arch[16], why[512];
    const char *note;
    if (config_load(&cfg, "configs/tiny.lua", setp, n, &err)) { CHECK(0, "config: %s", err.msg); return; }
    cfg.run.eval.sample_tokens = T / 2 > 0 ? T / 2 : 1;
    cuda_pick_arch(NULL, cfg.run.arch, arch, &note);
    if (tune && strstr(tune, "_SM=90") && strcmp(arch, "sm_90"))
        SKIP("FWD_SM or BWD_SM 90 (wgmma) needs a Hopper GPU (sm_90); this machine's arch is %s", arch);
    if (plan_make_train(&plan, &cfg, arch, NULL, &err) || build_run(&plan, 0, 1, NULL, NULL, &err)) { CHECK(0, "build: %s", err.msg); return; }
    if (!cuda_driver_present(why, sizeof why)) SKIP("%s", why);
    int failed = kernel_tests_attention_run(&cfg, &plan, NULL);
    if (failed < 0) SKIP("no GPU (see the line above)");
    CHECK(failed == 0, "%d attention test(s) failed for %s (see the FAIL lines above)", failed, cfg.name);
}
static void flash_tiles(const char *precision, int B, int T, int NH, int HS, const char *tune) {
    flash_gqa(precision, B, T, NH, NH, HS, tune);
}
static void flash_shape(const char *precision, int B, int T, int NH, int HS) { flash_tiles(precision, B, T, NH, HS, NULL); }

/* Grouped-query attention read in place (the dK/dV kernel a block per key/value head, walking its group's query
   heads): groups of 3 and multi-query attention, in each precision; at bf16's defaults (on Hopper wgmma's), on
   mma.sync with key and query tiles of other sizes than each other, and both directions on mma.sync; with T a
   multiple of no tile. cuDNN's path beside it runs on the expanded heads (kv_expand, kv_reduce), as the step does. */
static void test_flash_gqa(void) {
    static const char *const tiles[] = {NULL, "BWD_TILE=32 BWD_INNER=128", "BWD_TILE=128 BWD_INNER=32"};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        flash_gqa("bf16", 2, 200, 6, 2, 64, tiles[i]);
        if (check_cur_skipped) return;
        flash_gqa("fp16", 1, 300, 4, 1, 128, tiles[i]);
    }
    flash_gqa("fp32", 1, 100, 4, 2, 64, NULL);
    flash_gqa("bf16", 2, 256, 8, 2, 64, "FWD_SM=80 BWD_SM=80");
}

/* gpt2-124M's attention with other tile sizes than the defaults: the forward on mma.sync with warps of 32 rows (no
   other test has them), and the backward on mma.sync (BWD_INNER=32 takes the shape defaults' BWD_TILE 128 and
   BWD_WARP_ROWS 32: what a GPU before Hopper runs at this shape). BWD_TILE=128 BWD_INNER=32 and BWD_WARP_ROWS=32
   BWD_INNER=32, with or without the other, are those same tiles; the two forwards and backwards together, each
   tested here alone. */
static void test_flash_tiles_gpt2_124m(void) {
    static const char *const tiles[] = {"Q_TILE=128 Q_WARP_ROWS=32", "Q_TILE=128 Q_WARP_ROWS=32 KV_TILE=32",
                                        "Q_TILE=64 Q_WARP_ROWS=32", "BWD_INNER=32"};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        flash_tiles("bf16", 64, 1024, 12, 64, tiles[i]);
        if (check_cur_skipped) return;
    }
}

/* The backward's tiles of key rows and of query rows in other sizes than each other; with T a multiple of neither,
   the last tiles are partial and a key tile can start inside a query tile. */
static void test_flash_backward_tiles_odd_t(void) {
    static const char *const tiles[] = {"BWD_TILE=32 BWD_INNER=128", "BWD_TILE=128 BWD_INNER=32", "BWD_TILE=16 BWD_INNER=64",
                                        "BWD_TILE=64 BWD_INNER=16"};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        flash_tiles("bf16", 2, 200, 3, 64, tiles[i]);
        if (check_cur_skipped) return;
        flash_tiles("fp16", 1, 300, 2, 128, tiles[i]);
    }
    /* a warp per 32 rows (head size 64 only: see gen/kernels.c); in bf16 at T=200 the shape defaults give the first
       BWD_TILE 128, the tiles of tiles[1] above at the same shape: not twice */
    static const char *const tiles32[] = {"BWD_WARP_ROWS=32 BWD_INNER=32", "BWD_TILE=128 BWD_WARP_ROWS=32 BWD_INNER=16",
                                          "BWD_TILE=32 BWD_WARP_ROWS=32 BWD_INNER=32"};
    for (size_t i = 0; i < sizeof tiles32 / sizeof tiles32[0]; i++) {
        flash_tiles("fp16", 1, 300, 2, 64, tiles32[i]);
        if (check_cur_skipped) return;
        if (i > 0) flash_tiles("bf16", 2, 200, 3, 64, tiles32[i]);
        flash_tiles("fp32", 1, 100, 2, 64, tiles32[i]);
    }
}

/* The forward and backward on Hopper's wgmma (FWD_SM, BWD_SM 90, head size 64): the forward with one, two and three
   warpgroups a block and key tiles of 64 and 128 rows, the backward pipelined; T a multiple of 64 and not (partial
   tiles), and a single tile (T = 64). tiles[1] at T = 2048 is sm_90's default there (test_flash_fp16_b1_t2048_h2_hs64
   runs it), and gpt2-124M's shape adds no path to these (its time beside the defaults' is `gpt2gen tune`'s to
   measure). */
static void test_flash_wgmma(void) {
    static const char *const tiles[] = {"FWD_SM=90 BWD_SM=90", "FWD_SM=90 BWD_SM=90 Q_TILE=128",
                                        "FWD_SM=90 KV_TILE=128", "FWD_SM=90 Q_TILE=192"};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        flash_tiles("bf16", 2, 200, 3, 64, tiles[i]);
        if (check_cur_skipped) return;
        flash_tiles("fp16", 1, 300, 2, 64, tiles[i]);
        flash_tiles("bf16", 1, 64, 2, 64, tiles[i]);
        if (i != 1) flash_tiles("fp16", 1, 2048, 2, 64, tiles[i]);
    }
}

#define SHAPE(prec, B, T, NH, HS) \
    static void test_flash_##prec##_b##B##_t##T##_h##NH##_hs##HS(void) { flash_shape(#prec, B, T, NH, HS); }
/* The shapes at their default tiles. Not here: gpt2-124M's (B=64 T=1024 NH=12, bf16), which `gpt2gen test
   configs/gpt2-124M.lua` runs (tests/gpu.sh), and in fp16 takes the kernels of fp16's T=2048 here; and T=2048 at head
   size 128, the tiles and full tiles of T=1024's. */
#define SHAPES(X, prec) \
    X(prec, 1, 64, 2, 64) X(prec, 2, 100, 3, 64) X(prec, 3, 200, 2, 128) X(prec, 4, 256, 4, 128) \
    X(prec, 2, 1024, 2, 128) X(prec, 1, 2048, 2, 64)
#define OTHER_PRECISIONS(X) \
    X(fp16, 2, 100, 3, 64) X(fp16, 4, 256, 4, 128) X(fp16, 1, 2048, 2, 64) \
    X(fp32, 2, 100, 3, 64) X(fp32, 1, 256, 2, 128)
SHAPES(SHAPE, bf16)
OTHER_PRECISIONS(SHAPE)
#define RUN_SHAPE(prec, B, T, NH, HS) RUN(test_flash_##prec##_b##B##_t##T##_h##NH##_hs##HS);

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_reference_vs_cpu_backend);
    RUN(test_reference_gqa_vs_cpu_backend);
    RUN(test_cudnn_hidden);
    RUN(test_cudnn_missing_library);
    RUN(test_cudnn_refuses_fp32_and_head_size);
    SHAPES(RUN_SHAPE, bf16)
    OTHER_PRECISIONS(RUN_SHAPE)
    RUN(test_flash_wgmma);
    RUN(test_flash_gqa);
    RUN(test_flash_backward_tiles_odd_t);
    RUN(test_flash_tiles_gpt2_124m);
    return check_summary();
}
