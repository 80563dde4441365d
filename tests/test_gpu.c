/* test_gpu: the per-variant GPU tests (tune/kernel_tests.c, step_test.c; and the decode family's on a decode plan of
   3 rows) on small configs that cover the three
   precisions, head sizes 32 and 64 (128 for GPT-2's relatives: Llama- and nanochat-shaped), every recompute level and
   both attention paths; then the PyTorch golden file's
   10 AdamW steps on the CUDA backend in fp32, bf16 and fp16 (with the loss scaler), and an injected overflow in
   fp16 that the loss scaler skips and recovers from; and a one-row forward plan beside the training plan, on its
   weights, giving the training plan's logits row by row. Each variant's kernels are generated and compiled with NVRTC
   first (that part runs everywhere); without a GPU the GPU parts say "skip ...: no GPU: ...". */
#include "tests/check.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "gen/build.h"
#include "gen/config.h"
#include "gen/plan.h"
#include "runtime/gpu.h"
#include "tune/kernel_tests.h"
#include "tests/golden.h"
#include "tests/plan_facts.h"

typedef struct { const char *name; const char *sets[20]; } Variant;

static const Variant variants[] = {
    /* CHUNK_ROWS: the classifier a chunk of rows at a time (512 rows in 4 chunks of 128; 192 in 3 of 64; 256 in 4 of
       64); the LayerNorm backward held to 768 threads a multiprocessor in blocks of 256 (BWD_SM_THREADS: three
       blocks, as in the tuner's sweep) in gt-bf16 */
    {"gt-fp32", {"name=gt-fp32", "precision=fp32", "train.recompute=0", "tune.classifier.CHUNK_ROWS=128", NULL}},
    {"gt-bf16", {"name=gt-bf16", "precision=bf16", "train.recompute=1", "train.master_weights=true",
                 "tune.classifier.CHUNK_ROWS=160", "tune.classifier.SECOND_PASS=2", "tune.layernorm.BWD_BLOCK_SIZE=256",
                 "tune.layernorm.BWD_SM_THREADS=768", NULL}},
    /* train.gelu: cuBLASLt's GELU epilogues here and where "auto" picks them (C < 1024), split (our forward kernel,
       the DGELU epilogue backward) in gt-fp16-hs64 and gt-bf16-cudnn, our kernels in gt-fp16 (with the bias family's
       blocks of 256 and slices of rows that ROWS_IN_FLIGHT does not divide); the backward on one stream in gt-bf16-hs64
       (train.streams); the LayerNorm backward's sums in shared memory (BWD_SUMS 2, the default above C = 768) and
       the classifier's row read twice (50304 columns: more than 16 packets a thread at 256 threads) UNROLL packets
       at a time in gt-fp32-hs64 (too long for shared memory in fp32) and gt-bf16-hs64 (SECOND_PASS 1), in registers
       in gt-fp16-hs64 (1024 threads, SECOND_PASS 1), in shared memory (SECOND_PASS 2) in gt-bf16 and gt-fp16 */
    {"gt-fp32-hs64", {"name=gt-fp32-hs64", "precision=fp32", "model.n_embd=192", "model.n_head=3", "model.n_layer=2",
                      "train.seq_len=48", "train.batch_size=4", "train.total_batch_size=192", "train.recompute=2",
                      "train.gelu=epilogue", "tune.layernorm.BWD_SUMS=2", "tune.classifier.UNROLL=1", NULL}},
    {"gt-bf16-hs64", {"name=gt-bf16-hs64", "precision=bf16", "model.n_embd=192", "model.n_head=3", "model.n_layer=2",
                      "train.seq_len=48", "train.batch_size=4", "train.total_batch_size=192", "train.recompute=2",
                      "train.master_weights=false", "train.gelu=epilogue", "tune.layernorm.BWD_SUMS=2",
                      "tune.classifier.UNROLL=4", "tune.classifier.SECOND_PASS=1", "train.streams=1", NULL}},
    {"gt-fp16", {"name=gt-fp16", "precision=fp16", "train.recompute=1", "tune.classifier.BLOCK_SIZE=128",
                 "tune.classifier.SECOND_PASS=2",
                 "train.gelu=kernel", "tune.bias.BLOCK_SIZE=256", "tune.bias.ROW_SPLITS=7", NULL}},
    {"gt-fp16-hs64", {"name=gt-fp16-hs64", "precision=fp16", "model.n_embd=192", "model.n_head=3", "model.n_layer=2",
                      "train.seq_len=48", "train.batch_size=4", "train.total_batch_size=192", "train.recompute=2",
                      "tune.classifier.CHUNK_ROWS=64", "tune.classifier.BLOCK_SIZE=1024",
                      "tune.classifier.SECOND_PASS=1", "train.gelu=split", NULL}},
    /* the whole step with cuDNN's attention (T a multiple of 128, for cuDNN before 9.15.1) */
    {"gt-bf16-cudnn", {"name=gt-bf16-cudnn", "precision=bf16", "attention=cudnn", "model.max_seq_len=128",
                       "train.seq_len=128", "train.batch_size=2", "train.total_batch_size=256",
                       "tune.classifier.CHUNK_ROWS=96", "train.gelu=split", NULL}},
    /* and its nondeterministic backward (dQ by atomics) */
    {"gt-fp16-cudnn", {"name=gt-fp16-cudnn", "precision=fp16", "attention=cudnn", "model.max_seq_len=128",
                       "train.seq_len=128", "train.batch_size=2", "train.total_batch_size=256",
                       "train.deterministic=false", NULL}},
    /* the template on Hopper's wgmma (FWD_SM and BWD_SM 90; built and run on an sm_90 GPU only): the forward with two
       warpgroups a block, T = 100 (the second 64-row tile partial) */
    {"gt-bf16-wgmma", {"name=gt-bf16-wgmma", "precision=bf16", "attention=flash", "model.n_embd=192", "model.n_head=3",
                       "model.n_layer=2", "model.max_seq_len=100", "train.seq_len=100", "train.batch_size=2",
                       "train.total_batch_size=200", "tune.attention.FWD_SM=90", "tune.attention.BWD_SM=90",
                       "tune.attention.Q_TILE=128", NULL}},
    /* the GELU fused into our own fc-shaped matmuls (train.gelu = "fused": templates/fc_gemm.cu, Hopper only), at the
       family's defaults (a producer warpgroup's TMA copies on mbarriers, persistent blocks, 256-column tiles, the
       forward's epilogue in two passes, the tiles stored by TMA) in pairs of blocks that multicast B's tiles
       (CLUSTER 2), 4 persistent blocks (each through 3 pairs of tiles): 300 rows (the third 128-row tile partial:
       zeros loaded, rows not stored; the second pair's second block wholly past the matrix), k = n_embd = 160 (the
       third 64-column k-block partial) */
    {"gt-bf16-fused", {"name=gt-bf16-fused", "precision=bf16", "train.gelu=fused", "model.n_embd=160", "model.n_head=5",
                       "model.n_layer=2", "model.max_seq_len=100", "train.seq_len=100", "train.batch_size=3",
                       "train.total_batch_size=300", "tune.fc_gemm.CLUSTER=2", "tune.fc_gemm.GRID=4", NULL}},
    /* and in fp16 with both warpgroups loading by cp.async, two blocks a multiprocessor and the epilogue's 4-byte
       accesses straight from the registers: 128 rows (one tile), k = 256 (four k-blocks through three stages: one
       refilled) */
    {"gt-fp16-fused", {"name=gt-fp16-fused", "precision=fp16", "train.gelu=fused", "model.n_embd=256", "model.n_head=4",
                       "model.n_layer=2", "train.seq_len=64", "train.batch_size=2", "train.total_batch_size=128",
                       "tune.fc_gemm.WARPGROUPS=2", "tune.fc_gemm.SM_BLOCKS=2", "tune.fc_gemm.TILE_N=128",
                       "tune.fc_gemm.STAGES=3", "tune.fc_gemm.EPI_BYTES=4", NULL}},
    /* and in fp16 at the family's defaults with 4 persistent blocks, each through 2 of the 2 x 4 tiles of 128 x 256: 200
       rows (the second tile partial), k = 256 (four k-blocks through three stages: one refilled) */
    {"gt-fp16-fused-persistent", {"name=gt-fp16-fused-persistent", "precision=fp16", "train.gelu=fused",
                                  "model.n_embd=256", "model.n_head=4", "model.n_layer=2", "model.max_seq_len=100",
                                  "train.seq_len=100", "train.batch_size=2", "train.total_batch_size=200",
                                  "tune.fc_gemm.GRID=4", NULL}},
    /* and in bf16 with each consumer warpgroup on whole 128 x 128 tiles of its own, the two in turn (TILE_WARPGROUPS 1):
       300 rows and 1792 columns make 3 x 14 tiles, through 8 persistent blocks (6 tiles for some, 5 for others: the
       second warpgroup with one tile fewer than the first in some), k = 448 (each tile's 7 k-blocks through 3 stages:
       the other warpgroup's tile's k-blocks lie between a warpgroup's tiles in the ring, and each stage goes through
       several phases a tile) */
    {"gt-bf16-fused-pingpong", {"name=gt-bf16-fused-pingpong", "precision=bf16", "train.gelu=fused", "model.n_embd=448",
                                "model.n_head=7", "model.n_layer=2", "model.max_seq_len=100", "train.seq_len=100",
                                "train.batch_size=3", "train.total_batch_size=300", "tune.fc_gemm.TILE_WARPGROUPS=1",
                                "tune.fc_gemm.TILE_N=128", "tune.fc_gemm.STAGES=3", "tune.fc_gemm.GRID=8", NULL}},
    /* GPT-2's relatives (docs/model.md, "Architectures"). Llama-shaped: RMSNorm, RoPE, SwiGLU, grouped-query attention
       (4 query heads, 2 kv heads) at head size 64, no biases, an untied head; recompute 2 (which keeps the RMSNorm
       outputs: only LayerNorm's are made again) */
    {"gt-llama-bf16", {"name=gt-llama-bf16", "precision=bf16", "model.n_embd=256", "model.n_head=4", "model.n_kv_head=2",
                       "model.norm=rmsnorm", "model.position=rope", "model.mlp=swiglu", "model.n_ffn=384",
                       "model.bias=false", "model.tie_embeddings=false", "train.recompute=2", NULL}},
    /* multi-query (4:1) at head size 128 in fp16, the classifier in chunks, biases kept */
    {"gt-llama-fp16", {"name=gt-llama-fp16", "precision=fp16", "model.n_embd=512", "model.n_head=4", "model.n_kv_head=1",
                       "model.n_layer=2", "model.norm=rmsnorm", "model.position=rope", "model.mlp=swiglu",
                       "model.n_ffn=640", "model.tie_embeddings=false", "tune.classifier.CHUNK_ROWS=128", NULL}},
    /* nanochat-shaped: RoPE, ReLU^2, QK-norm, no biases, an untied head and the logit soft-cap, head size 128 */
    {"gt-nano-fp32", {"name=gt-nano-fp32", "precision=fp32", "model.n_embd=256", "model.n_head=2", "model.norm=rmsnorm",
                      "model.position=rope", "model.mlp=relu2", "model.qk_norm=true", "model.bias=false",
                      "model.tie_embeddings=false", "model.logit_softcap=15", "train.recompute=1", NULL}},
    /* and through cuDNN's attention in bf16 */
    {"gt-nano-bf16-cudnn", {"name=gt-nano-bf16-cudnn", "precision=bf16", "attention=cudnn", "model.n_embd=256",
                            "model.n_head=2", "model.norm=rmsnorm", "model.position=rope", "model.mlp=relu2",
                            "model.qk_norm=true", "model.bias=false", "model.tie_embeddings=false",
                            "model.logit_softcap=15", "model.max_seq_len=128", "train.seq_len=128",
                            "train.batch_size=2", "train.total_batch_size=256", NULL}},
    /* GPT-2's block with two keys of a relative: LayerNorm at eps 1e-6 (layernorm.cu's NORM_EPS; at GPT-2's init the
       residual's variance is near 4e-4, so 1e-5 in its place moves the norm by about 1%) and a GELU MLP of 3C (the
       epilogues at n_ffn, the GELU recompute over B*T*n_ffn) */
    {"gt-gelu-eps-fp32", {"name=gt-gelu-eps-fp32", "precision=fp32", "model.n_embd=256", "model.n_head=4",
                          "model.norm_eps=1e-6", "model.n_ffn=768", "train.recompute=1", NULL}},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

static Config cfgs[N_VARIANTS];
static Plan plans[N_VARIANTS], decodes[N_VARIANTS];   /* decodes: 3 rows, the decode family's kernels */
/* the first variants (each precision, head sizes 32 and 64) also as a decode step of 2 rows in one persistent kernel
   (RunSpec.decode, sm_90 only): the decode_step family */
#define N_PERSISTENT 6
static Config pcfgs[N_PERSISTENT];
static Plan persists[N_PERSISTENT];
static int built[N_VARIANTS];
/* the GPU tests' settings: the defaults, but for GPT2GEN_GPU_SHARED (tests/gpu/pool.sh's parallel jobs share the GPU:
   the step test's "plan memory" then leaves out the GPU's free memory) */
static Env test_env;

/* the rows of a variant's decode plan: 3 (cuBLASLt's linears), or 10 on the decode linears (sample --decode linears:
   a block of 8 rows and one of 2) in gt-bf16 and gt-llama-bf16 */
static int decode_rows(int i, Config *cfg) {
    if (strcmp(variants[i].name, "gt-bf16") && strcmp(variants[i].name, "gt-llama-bf16")) return 3;
    cfg->run.decode = DECODE_LINEARS;
    return 10;
}

static void build_variant(int i) {
    const Variant *v = &variants[i];
    int n = 0;
    while (v->sets[n]) n++;
    Err err;
    if (cuda_backend_built(&err)) SKIP("%s", err.msg);   /* CUBINs are of no use to a CPU-only gpt2gen */
    if (config_load(&cfgs[i], "configs/tiny.lua", v->sets, n, &err)) { CHECK(0, "config: %s", err.msg); return; }
    char arch[16];
    const char *note;
    cuda_pick_arch(NULL, cfgs[i].run.arch, arch, &note);
    for (int k = 0; k < n; k++)
        if ((strstr(v->sets[k], "_SM=90") || !strcmp(v->sets[k], "train.gelu=fused")) && strcmp(arch, "sm_90"))
            SKIP("%s: Hopper's wgmma (FWD_SM and BWD_SM 90, train.gelu = \"fused\") needs a Hopper GPU (sm_90); this "
                 "machine's arch is %s", v->name, arch);
    /* GPU 0's facts: the attention path a run here takes (cuDNN for "auto" off wgmma, where it serves); without a GPU
       the plans are only compiled, as for a GPU where cuDNN serves (the cudnn variants ask for it by name) */
    CudaFacts facts;
    FakeMachine elsewhere;
    char why[512];
    const PlanFacts *pf = cuda_driver_present(why, sizeof why) ? cuda_plan_facts(&facts, NULL, 0)
                                                                : fake_machine(&elsewhere, 1, NULL);
    if (plan_make_train(&plans[i], &cfgs[i], arch, pf, &err) ||
        plan_make_decode(&decodes[i], &cfgs[i], decode_rows(i, &cfgs[i]), 0, arch, &err)) {
        CHECK(0, "plan: %s", err.msg);
        return;
    }
    const Plan *all[3] = {&plans[i], &decodes[i], NULL};
    int n_plans = 2;
    if (i < N_PERSISTENT) {
        pcfgs[i] = cfgs[i];
        pcfgs[i].run.decode = DECODE_PERSISTENT;
        if (plan_make_decode(&persists[i], &pcfgs[i], 2, 0, arch, &err)) { CHECK(0, "plan: %s", err.msg); return; }
        if (persists[i].decode_persistent) all[n_plans++] = &persists[i];
    }
    if (build_plans(all, n_plans, 0, 1, NULL, NULL, &err)) {
        CHECK(0, "build (NVRTC): %s", err.msg);
        return;
    }
    built[i] = 1;
}

static void gpu_variant(int i) {
    if (!built[i]) SKIP("%s did not build", variants[i].name);
    char why[512];
    if (!cuda_driver_present(why, sizeof why)) SKIP("%s", why);
    int failed = kernel_tests_run(&cfgs[i], &plans[i], &test_env);
    int f2 = failed < 0 ? 0 : kernel_tests_run(&cfgs[i], &decodes[i], &test_env);
    if (failed < 0 || f2 < 0) SKIP("no GPU (see the line above)");
    failed += f2;
    if (i < N_PERSISTENT && persists[i].decode_persistent) {
        int f3 = kernel_tests_run(&pcfgs[i], &persists[i], &test_env);
        failed += f3 < 0 ? 0 : f3;
    }
    CHECK(failed == 0, "%d GPU test(s) failed for %s (see the FAIL lines above)", failed, variants[i].name);
}

#define VARIANT_TESTS(i, id) \
    static void test_build_##id(void) { build_variant(i); } \
    static void test_gpu_##id(void) { gpu_variant(i); }
VARIANT_TESTS(0, fp32)
VARIANT_TESTS(1, bf16)
VARIANT_TESTS(2, fp32_hs64)
VARIANT_TESTS(3, bf16_hs64)
VARIANT_TESTS(4, fp16)
VARIANT_TESTS(5, fp16_hs64)
VARIANT_TESTS(6, bf16_cudnn)
VARIANT_TESTS(7, fp16_cudnn)
VARIANT_TESTS(8, bf16_wgmma)
VARIANT_TESTS(9, bf16_fused)
VARIANT_TESTS(10, fp16_fused)
VARIANT_TESTS(11, fp16_fused_persistent)
VARIANT_TESTS(12, bf16_fused_pingpong)
VARIANT_TESTS(13, llama_bf16)
VARIANT_TESTS(14, llama_fp16)
VARIANT_TESTS(15, nano_fp32)
VARIANT_TESTS(16, nano_bf16_cudnn)
VARIANT_TESTS(17, gelu_eps_fp32)

/* Several plans of one model on the GPU (gen/plan.h): variant i's training plan and its one-row sampling plan,
   two CUDA backends in one process, the second on the first's weights, each with its own kernels (B baked in)
   and arena. For every row, the one-row plan's logits at every position are the training plan's forward of
   that row: the kernels and cuBLASLt's algorithms differ with the shape, so the tolerance is the precision's
   (relative to the largest logit: fp32 1e-4, 16-bit 3e-2); the forward plan's arena is smaller. */
static void forward_plan_gpu(int i) {
    if (!built[i]) SKIP("%s did not build", variants[i].name);
    static Plan sample;
    Err err = {{0}};
    char why[512];
    if (!cuda_driver_present(why, sizeof why)) SKIP("%s", why);
    StepShape one = step_forward(&cfgs[i], 1, plans[i].step.T, 1);
    CudaFacts facts;
    if (plan_make(&sample, &cfgs[i], "eval", &one, plans[i].arch, cuda_plan_facts(&facts, NULL, 0), &err) ||
        build_run(&sample, 0, 1, NULL, NULL, &err)) {
        CHECK(0, "the one-row plan: %s", err.msg);
        return;
    }
    Backend *tb = cuda_backend_create(&(BackendOptions){.plan = &plans[i]}, &err);
    Backend *sb = tb ? cuda_backend_create(&(BackendOptions){.plan = &sample, .weights = tb}, &err) : NULL;
    if (!tb || !sb) { CHECK(0, "%s", err.msg); if (tb) tb->destroy(tb); return; }
    const GPT2Shape *m = &plans[i].model;
    int B = plans[i].step.B, T = plans[i].step.T, V = m->vocab_size;
    size_t np = tb->num_params, BT = (size_t)B * T;
    float *p = xmalloc(np * 4), *a = xmalloc((size_t)V * 4), *b = xmalloc((size_t)V * 4);
    int32_t *tok = xmalloc(BT * 4);
    gpt2_init_params(m, p, 4242);
    for (size_t k = 0; k < BT; k++) tok[k] = (int32_t)((k * 2654435761u + 17) % (size_t)V);
    double worst = 0, top = 0;
    BackendRun all_rows = {.phase = BACKEND_FORWARD, .inputs = tok};
    int rc = tb->write(tb, BACKEND_PARAMS, p, &err) || tb->run(tb, &all_rows, &err);
    for (int r = 0; r < B && !rc; r++) {
        /* the training backend's logits of row r first: the one-row forward does not touch them */
        rc = sb->run(sb, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = tok + (size_t)r * T}, &err);
        for (int t = 0; t < T && !rc; t++) {
            rc = tb->read(tb, BACKEND_LOGITS, (size_t)r * T + t, a, &err) || sb->read(sb, BACKEND_LOGITS, (size_t)t, b, &err);
            for (int v = 0; v < V && !rc; v++) { worst = worse(worst, fabs((double)a[v] - b[v])); top = fmax(top, fabs((double)a[v])); }
        }
    }
    double rel = worst / fmax(top, 1e-30), tol = plans[i].step.precision == PREC_FP32 ? 1e-4 : 3e-2;
    CHECK(!rc, "%s", err.msg);
    printf("  %s: one-row plan vs B=%d plan, every row and position: max |diff| %.3g of max |logit| %.3g (%.2e; "
           "arenas %.1f and %.1f MiB)\n", variants[i].name, B, worst, top, rel, cuda_backend_arena_bytes(sb) / 1048576.0,
           cuda_backend_arena_bytes(tb) / 1048576.0);
    CHECK(rc || rel <= tol, "%s: the one-row plan's logits differ from the training plan's by %.2e relative (tolerance %.0e)",
          variants[i].name, rel, tol);
    CHECK(cuda_backend_arena_bytes(sb) < cuda_backend_arena_bytes(tb), "the one-row plan's arena is not the smaller");
    sb->destroy(sb);
    tb->destroy(tb);
    free(p); free(a); free(b); free(tok);
}
static void test_gpu_forward_plan_fp32(void) { forward_plan_gpu(0); }
static void test_gpu_forward_plan_bf16(void) { forward_plan_gpu(1); }
static void test_gpu_forward_plan_bf16_cudnn(void) { forward_plan_gpu(6); }
static void test_gpu_forward_plan_llama_bf16(void) { forward_plan_gpu(13); }
static void test_gpu_forward_plan_nano_fp32(void) { forward_plan_gpu(15); }

/* The PyTorch golden file on the CUDA backend: its shape as a config, its initial weights, its 10 AdamW steps
   on one batch. fp32 is held to the CPU reference's tolerances (1e-4: only summation orders differ); bf16 to
   5e-2 on the losses (~6) and grad norms, and 1e-2 on the final weight norms (the master weights are fp32, but
   every activation and gradient carries 8 bits of mantissa); fp16, with the dynamic loss scaler at its default
   initial scale, to 1e-2 on the losses and grad norms and 5e-3 on the final weight norms (11 bits of mantissa,
   3 more than bf16; the golden file is PyTorch in fp32, which the fp32 run above matches to 1e-4). */
static void golden_gpu(const char *precision, double loss_tol, double norm_tol, double final_tol) {
    Err err;
    if (cuda_backend_built(&err)) SKIP("%s", err.msg);
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
    cuda_pick_arch(NULL, cfg.run.arch, arch, &note);
    CudaFacts facts;
    if (plan_make_train(&plan, &cfg, arch, cuda_plan_facts(&facts, NULL, 0), &err) || build_run(&plan, 0, 1, NULL, NULL, &err)) {
        CHECK(0, "build: %s", err.msg);
        goto out;
    }
    if (!cuda_driver_present(why, sizeof why)) { MARK_SKIPPED("%s", why); goto out; }
    BackendOptions o = {&plan, 0, 0, 0, NULL, NULL, NULL};
    be = cuda_backend_create(&o, &err);
    if (!be) { CHECK(0, "%s", err.msg); goto out; }
    CHECK_OK(be->write(be, BACKEND_PARAMS, params, &err), &err);
    LossScaler ls;
    loss_scale_init(&ls, cfg.model.precision == PREC_FP16, cfg.run.train.loss_scale, cfg.run.train.loss_scale_interval);
    GoldenRun r = golden_run_steps(be, &g, &ls);
    CHECK(r.ok, "%s", r.why);
    printf("  %s: worst |loss - fp32 reference| %.2e, grad norm %.2e relative, final weight norms %.2e relative; "
           "%d overflow(s), loss scale at the end %.0f\n", precision, r.worst_loss, r.worst_norm, r.worst_final, r.skips, ls.scale);
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
static void test_golden_gpu_fp16(void) { golden_gpu("fp16", 1e-2, 1e-2, 5e-3); }

/* The loss scaler on the CUDA backend in fp16 (the gt-fp16 variant): a step whose loss gradient is multiplied by
   infinity (what GPT2GEN_TEST_OVERFLOW does in training) has a non-finite gradient norm, so the scaler skips it
   and halves the scale, and the weights are untouched; the next step, at the halved scale, has the same unscaled
   gradient norm as a clean step at the full scale (scaling by powers of two: only fp16 rounding differs, 1e-2),
   its update is applied and the loss falls. */
static void test_gpu_fp16_overflow(void) {
    int i = 0;
    while (i < N_VARIANTS && strcmp(variants[i].name, "gt-fp16")) i++;
    if (i == N_VARIANTS || !built[i]) SKIP("the gt-fp16 variant did not build");
    char why[512];
    if (!cuda_driver_present(why, sizeof why)) SKIP("%s", why);
    const Config *c = &cfgs[i];
    GPT2Shape shape = config_shape(c);
    BackendOptions o = {&plans[i], 0, 0, 0, NULL, NULL, NULL};
    Err err;
    Backend *be = cuda_backend_create(&o, &err);
    if (!be) { CHECK(0, "%s", err.msg); return; }
    size_t n = be->num_params, BT = (size_t)plans[i].step.B * plans[i].step.T;
    float *p0 = xmalloc(n * 4), *p1 = xmalloc(n * 4);
    int32_t *in = xmalloc(BT * 4), *tg = xmalloc(BT * 4);
    for (size_t k = 0; k < BT; k++) { in[k] = (int32_t)(k * 7919 % (size_t)shape.vocab_size); tg[k] = (int32_t)((k * 104729 + 1) % (size_t)shape.vocab_size); }
    gpt2_init_params(&shape, p0, 1337);
    LossScaler ls;
    loss_scale_init(&ls, 1, c->run.train.loss_scale, c->run.train.loss_scale_interval);
    float loss0 = 0, loss1 = 0, clean_norm = 0, bad_norm = 0, norm = 0;
    BackendRun zero = {.phase = BACKEND_ZERO_GRADS}, fwd = {.phase = BACKEND_FORWARD, .inputs = in, .targets = tg, .loss = &loss0},
               back = {.phase = BACKEND_BACKWARD, .grad_scale = ls.scale};
    int rc = be->write(be, BACKEND_PARAMS, p0, &err) || be->run(be, &zero, &err) || be->run(be, &fwd, &err) ||
             be->run(be, &back, &err) || backend_grad_norm(be, &clean_norm, &err);
    clean_norm /= ls.scale;
    /* the injected overflow */
    back.grad_scale = ls.scale * INFINITY;
    rc = rc || be->run(be, &zero, &err) || be->run(be, &fwd, &err) || be->run(be, &back, &err) ||
         backend_grad_norm(be, &bad_norm, &err);
    LossScaleVerdict v = loss_scale_after(&ls, bad_norm);
    CHECK(!rc, "%s", err.msg);
    CHECK(v == LOSS_SCALE_SKIP && ls.scale == (float)(c->run.train.loss_scale / 2) && ls.skipped == 1,
          "overflow (norm %f): verdict %d, scale %.0f, %d skipped; expected a skip and the scale halved", bad_norm, (int)v, ls.scale, ls.skipped);
    rc = rc || be->read(be, BACKEND_PARAMS, 0, p1, &err);
    CHECK(!rc && !memcmp(p0, p1, n * 4), "the weights changed across a skipped step");
    /* recovery at the halved scale */
    float S = ls.scale;
    back.grad_scale = S;
    rc = rc || be->run(be, &zero, &err) || be->run(be, &fwd, &err) || be->run(be, &back, &err) ||
         backend_grad_norm(be, &norm, &err);
    v = loss_scale_after(&ls, norm);
    norm /= S;
    CHECK(!rc && v == LOSS_SCALE_APPLY && fabs(norm - clean_norm) <= 1e-2 * clean_norm,
          "after the overflow: verdict %d, unscaled norm %f at scale %.0f, %f at the full scale", (int)v, norm, S, clean_norm);
    BackendRun update = {.phase = BACKEND_UPDATE, .adamw = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f}, .grad_scale = 1.0f / S, .step = 1};
    fwd.loss = &loss1;
    rc = rc || be->run(be, &update, &err) || be->run(be, &fwd, &err);
    CHECK(!rc && loss1 < loss0, "the loss did not fall after the recovered step: %f -> %f (%s)", loss0, loss1, rc ? err.msg : "");
    printf("  overflow: norm %f -> skipped, scale %.0f -> %.0f; then norm %f (full scale: %f), loss %.6f -> %.6f\n", bad_norm,
           c->run.train.loss_scale, S, norm, clean_norm, loss0, loss1);
    be->destroy(be);
    free(p0); free(p1); free(in); free(tg);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    Env read;
    Err err;
    env_defaults(&test_env);
    if (env_read(&read, &err)) {
        fprintf(stderr, "test_gpu: %s\n", err.msg);
        return 2;
    }
    test_env.gpu_shared = read.gpu_shared;
    RUN(test_build_fp32);
    RUN(test_build_bf16);
    RUN(test_build_fp32_hs64);
    RUN(test_build_bf16_hs64);
    RUN(test_build_fp16);
    RUN(test_build_fp16_hs64);
    RUN(test_build_bf16_cudnn);
    RUN(test_build_fp16_cudnn);
    RUN(test_build_bf16_wgmma);
    RUN(test_build_bf16_fused);
    RUN(test_build_fp16_fused);
    RUN(test_build_fp16_fused_persistent);
    RUN(test_build_bf16_fused_pingpong);
    RUN(test_build_llama_bf16);
    RUN(test_build_llama_fp16);
    RUN(test_build_nano_fp32);
    RUN(test_build_nano_bf16_cudnn);
    RUN(test_build_gelu_eps_fp32);
    RUN(test_gpu_fp32);
    RUN(test_gpu_bf16);
    RUN(test_gpu_fp32_hs64);
    RUN(test_gpu_bf16_hs64);
    RUN(test_gpu_fp16);
    RUN(test_gpu_fp16_hs64);
    RUN(test_gpu_bf16_cudnn);
    RUN(test_gpu_fp16_cudnn);
    RUN(test_gpu_bf16_wgmma);
    RUN(test_gpu_bf16_fused);
    RUN(test_gpu_fp16_fused);
    RUN(test_gpu_fp16_fused_persistent);
    RUN(test_gpu_bf16_fused_pingpong);
    RUN(test_gpu_llama_bf16);
    RUN(test_gpu_llama_fp16);
    RUN(test_gpu_nano_fp32);
    RUN(test_gpu_nano_bf16_cudnn);
    RUN(test_gpu_gelu_eps_fp32);
    RUN(test_gpu_forward_plan_fp32);
    RUN(test_gpu_forward_plan_bf16);
    RUN(test_gpu_forward_plan_bf16_cudnn);
    RUN(test_gpu_forward_plan_llama_bf16);
    RUN(test_gpu_forward_plan_nano_fp32);
    RUN(test_golden_gpu_fp32);
    RUN(test_golden_gpu_bf16);
    RUN(test_golden_gpu_fp16);
    RUN(test_gpu_fp16_overflow);
    return check_summary();
}
