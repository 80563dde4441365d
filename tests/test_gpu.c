/* test_gpu: the per-variant GPU tests (runtime/cuda/gputest.c) on small configs that cover both precisions,
   head sizes 32 and 64, and every recompute level. Each variant's kernels are generated and compiled with
   NVRTC first (that part runs everywhere); without a GPU the kernel tests say "skip ...: no GPU: ...". */
#include "tests/check.h"
#include "gen/build.h"
#include "gen/config.h"
#include "gen/plan.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/gputest.h"

typedef struct { const char *name; const char *sets[12]; } Variant;

static const Variant variants[] = {
    {"gt-fp32", {"name=gt-fp32", "precision=fp32", "train.recompute=0", NULL}},
    {"gt-bf16", {"name=gt-bf16", "precision=bf16", "train.recompute=1", "train.master_weights=true", NULL}},
    {"gt-fp32-hs64", {"name=gt-fp32-hs64", "precision=fp32", "model.n_embd=192", "model.n_head=3", "model.n_layer=2",
                      "train.seq_len=48", "train.batch_size=4", "train.total_batch_size=192", "train.recompute=2", NULL}},
    {"gt-bf16-hs64", {"name=gt-bf16-hs64", "precision=bf16", "model.n_embd=192", "model.n_head=3", "model.n_layer=2",
                      "train.seq_len=48", "train.batch_size=4", "train.total_batch_size=192", "train.recompute=2",
                      "train.master_weights=false", NULL}},
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
    build_pick_arch(&cfgs[i], NULL, arch, &note);
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

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_build_fp32);
    RUN(test_build_bf16);
    RUN(test_build_fp32_hs64);
    RUN(test_build_bf16_hs64);
    RUN(test_gpu_fp32);
    RUN(test_gpu_bf16);
    RUN(test_gpu_fp32_hs64);
    RUN(test_gpu_bf16_hs64);
    return check_summary();
}
