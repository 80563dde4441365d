/* test_gpu: the per-variant GPU tests (tests/gpu/kernel_tests.c, step_test.c) on small configs that cover both precisions,
   head sizes 32 and 64, every recompute level and both attention paths; then the PyTorch golden file's 10 AdamW steps on the CUDA
   backend in fp32 and bf16. Each variant's kernels are generated and compiled with NVRTC first (that part
   runs everywhere); without a GPU the GPU parts say "skip ...: no GPU: ...". */
#include "tests/check.h"
#include "common/bf16.h"
#include <stdio.h>
#include "gen/build.h"
#include "gen/config.h"
#include "gen/plan.h"
#include "runtime/cuda/cuda_api.h"
#include "tests/gpu/kernel_tests.h"
#include "tests/golden.h"

typedef struct { const char *name; const char *sets[12]; } Variant;

static const Variant variants[] = {
    {"gt-fp32", {"name=gt-fp32", "precision=fp32", "train.recompute=0", NULL}},
    {"gt-bf16", {"name=gt-bf16", "precision=bf16", "train.recompute=1", "train.master_weights=true", NULL}},
    {"gt-fp32-hs64", {"name=gt-fp32-hs64", "precision=fp32", "model.n_embd=192", "model.n_head=3", "model.n_layer=2",
                      "train.seq_len=48", "train.batch_size=4", "train.total_batch_size=192", "train.recompute=2", NULL}},
    {"gt-bf16-hs64", {"name=gt-bf16-hs64", "precision=bf16", "model.n_embd=192", "model.n_head=3", "model.n_layer=2",
                      "train.seq_len=48", "train.batch_size=4", "train.total_batch_size=192", "train.recompute=2",
                      "train.master_weights=false", NULL}},
    /* the whole step with cuDNN's attention (T a multiple of 128, for cuDNN before 9.15.1) */
    {"gt-bf16-cudnn", {"name=gt-bf16-cudnn", "precision=bf16", "attention=cudnn", "model.max_seq_len=128",
                       "train.seq_len=128", "train.batch_size=2", "train.total_batch_size=256", NULL}},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

static Config cfgs[N_VARIANTS];
static Plan plans[N_VARIANTS];
static int built[N_VARIANTS];

static void build_variant(int i) {
    const Variant *v = &variants[i];
    int n = 0;
    while (v->sets[n]) n++;
    Err err;
    if (config_load(&cfgs[i], "configs/tiny.lua", v->sets, n, &err)) { CHECK(0, "config: %s", err.msg); return; }
    char arch[16];
    const char *note;
    cuda_pick_arch(NULL, cfgs[i].arch, arch, &note);
    if (plan_make(&plans[i], &cfgs[i], arch, &err)) { CHECK(0, "plan: %s", err.msg); return; }
    if (build_run(&plans[i], 0, 1, NULL, &err)) { CHECK(0, "build (NVRTC): %s", err.msg); return; }
    built[i] = 1;
}

static void gpu_variant(int i) {
    if (!built[i]) SKIP("%s did not build", variants[i].name);
    char why[512];
    if (!cuda_driver_present(why, sizeof why)) SKIP("%s", why);
    int failed = gpu_test_run(&cfgs[i], &plans[i]);
    if (failed < 0) SKIP("no GPU (see the line above)");
    CHECK(failed == 0, "%d GPU test(s) failed for %s (see the FAIL lines above)", failed, variants[i].name);
}

#define VARIANT_TESTS(i, id) \
    static void test_build_##id(void) { build_variant(i); } \
    static void test_gpu_##id(void) { gpu_variant(i); }
VARIANT_TESTS(0, fp32)
VARIANT_TESTS(1, bf16)
VARIANT_TESTS(2, fp32_hs64)
VARIANT_TESTS(3, bf16_hs64)
VARIANT_TESTS(4, bf16_cudnn)

/* The PyTorch golden file on the CUDA backend: its shape as a config, its initial weights, its 10 AdamW steps
   on one batch. fp32 is held to the CPU reference's tolerances (1e-4: only summation orders differ); bf16 to
   5e-2 on the losses (~6) and grad norms, and 1e-2 on the final weight norms (the master weights are fp32, but
   every activation and gradient carries 8 bits of mantissa). */
static void golden_gpu(const char *precision, double loss_tol, double norm_tol, double final_tol) {
    Err err;
    Golden g;
    float *params = NULL;
    char *buf = golden_load(&g, &params, &err);
    if (!buf) { CHECK(0, "%s", err.msg); return; }
    char sets[16][64];
    const char *setp[16];
    int n = 0;
    snprintf(sets[n++], 64, "name=golden-%s", precision);
    snprintf(sets[n++], 64, "precision=%s", precision);
    snprintf(sets[n++], 64, "model.n_layer=%d", g.shape.n_layer);
    snprintf(sets[n++], 64, "model.n_head=%d", g.shape.n_head);
    snprintf(sets[n++], 64, "model.n_embd=%d", g.shape.n_embd);
    snprintf(sets[n++], 64, "model.max_seq_len=%d", g.shape.max_seq_len);
    snprintf(sets[n++], 64, "model.vocab_size=%d", g.shape.vocab_size);
    snprintf(sets[n++], 64, "train.batch_size=%d", g.B);
    snprintf(sets[n++], 64, "train.seq_len=%d", g.T);
    snprintf(sets[n++], 64, "train.total_batch_size=%d", g.B * g.T);
    snprintf(sets[n++], 64, "eval.sample_tokens=%d", g.T / 2);
    for (int i = 0; i < n; i++) setp[i] = sets[i];
    static Config cfg;
    static Plan plan;
    char arch[16], why[512];
    const char *note;
    Backend *be = NULL;
    if (config_load(&cfg, "configs/tiny.lua", setp, n, &err)) { CHECK(0, "config: %s", err.msg); goto out; }
    cuda_pick_arch(NULL, cfg.arch, arch, &note);
    if (plan_make(&plan, &cfg, arch, &err) || build_run(&plan, 0, 1, NULL, &err)) { CHECK(0, "build: %s", err.msg); goto out; }
    if (!cuda_driver_present(why, sizeof why)) { MARK_SKIPPED("%s", why); goto out; }
    BackendOptions o = {g.shape, g.B, g.T, cfg.precision, cfg.train.master_weights, cfg.train.recompute, &plan, 0};
    be = cuda_backend_create(&o, &err);
    if (!be) { CHECK(0, "%s", err.msg); goto out; }
    CHECK_OK(be->set_params(be, params, &err), &err);
    GoldenRun r = golden_run_steps(be, &g);
    CHECK(r.ok, "%s", r.why);
    CHECK(r.worst_loss <= loss_tol, "%s: step losses differ from PyTorch's by up to %.2e", precision, r.worst_loss);
    CHECK(r.worst_norm <= norm_tol, "%s: grad norms differ by up to %.2e relative", precision, r.worst_norm);
    CHECK(r.worst_final <= final_tol, "%s: final weight norms differ by up to %.2e relative", precision, r.worst_final);
out:
    if (be) be->destroy(be);
    free(params);
    free(buf);
}
static void test_golden_gpu_fp32(void) { golden_gpu("fp32", 1e-4, 1e-4, 1e-4); }
static void test_golden_gpu_bf16(void) { golden_gpu("bf16", 5e-2, 5e-2, 1e-2); }

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_build_fp32);
    RUN(test_build_bf16);
    RUN(test_build_fp32_hs64);
    RUN(test_build_bf16_hs64);
    RUN(test_build_bf16_cudnn);
    RUN(test_gpu_fp32);
    RUN(test_gpu_bf16);
    RUN(test_gpu_fp32_hs64);
    RUN(test_gpu_bf16_hs64);
    RUN(test_gpu_bf16_cudnn);
    RUN(test_golden_gpu_fp32);
    RUN(test_golden_gpu_bf16);
    return check_summary();
}
