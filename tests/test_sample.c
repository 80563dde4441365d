/* test_sample: sampling with the key/value cache (runtime/sample/sampler.h) on the CPU backend and, where there is
   a GPU, on the CUDA backend in fp32, bf16 (head sizes 32 and 64) and fp16, and GPT-2's relatives (Llama- and
   nanochat-shaped: their decode linears with RMSNorm, SwiGLU or ReLU^2): at every position of a 64-token
   continuation the decode step's logits equal the full forward's over the same prefix (CPU 1e-5; GPU fp32 1e-4 and
   16-bit 3e-2 of the largest logit), rows are independent, greedy is the same on the CPU and the GPU in fp32 for 64
   tokens; and the draw's rule (runtime/sample/sampling.h): greedy, temperature, top-k, top-p, seeds, end-of-text. */
#include "gen/config.h"
#include "tests/check.h"
#include "runtime/sample/sampler.h"
#include "runtime/gpu.h"
#include "common/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PROMPT = 8, CONT = 64 };

/* A model to sample from: a config, the backend kind, the arch, the tolerance of its logits against the forward */
typedef struct { const char *name, *which; const char *sets[12]; double tol; Config cfg; char arch[16]; } Model;
static Model cpu_model = {.name = "cpu", .which = "cpu", .tol = 1e-5, .arch = "sm_90"};
/* GPT-2's relatives at head size 64: Llama-shaped (RMSNorm, RoPE, SwiGLU, multi-query, no biases, an untied head) and
   nanochat-shaped (RoPE, ReLU^2, QK-norm, no biases, an untied head, the logit soft-cap) */
#define LLAMA_SETS "model.n_embd=128", "model.n_head=2", "model.n_kv_head=1", "model.norm=rmsnorm", "model.position=rope", \
                   "model.mlp=swiglu", "model.n_ffn=256", "model.bias=false", "model.tie_embeddings=false"
#define NANO_SETS "model.n_embd=128", "model.n_head=2", "model.norm=rmsnorm", "model.position=rope", "model.mlp=relu2", \
                  "model.qk_norm=true", "model.bias=false", "model.tie_embeddings=false", "model.logit_softcap=15"
static Model cpu_relatives[] = {
    {.name = "cpu-llama", .which = "cpu", .sets = {LLAMA_SETS, NULL}, .tol = 1e-5, .arch = "sm_90"},
    {.name = "cpu-nano", .which = "cpu", .sets = {NANO_SETS, NULL}, .tol = 1e-5, .arch = "sm_90"},
};
static Model gpu_models[] = {
    {.name = "cuda-fp32", .which = "cuda", .sets = {"precision=fp32", NULL}, .tol = 1e-4},
    {.name = "cuda-bf16", .which = "cuda", .sets = {"precision=bf16", NULL}, .tol = 3e-2},
    {.name = "cuda-bf16-hs64", .which = "cuda", .sets = {"precision=bf16", "model.n_embd=192", "model.n_head=3",
                                                         "model.n_layer=2", NULL}, .tol = 3e-2},
    {.name = "cuda-fp16", .which = "cuda", .sets = {"precision=fp16", NULL}, .tol = 3e-2},
    {.name = "cuda-fp32-llama", .which = "cuda", .sets = {"precision=fp32", LLAMA_SETS, NULL}, .tol = 1e-4},
    {.name = "cuda-bf16-llama", .which = "cuda", .sets = {"precision=bf16", LLAMA_SETS, NULL}, .tol = 3e-2},
    {.name = "cuda-bf16-nano", .which = "cuda", .sets = {"precision=bf16", NANO_SETS, NULL}, .tol = 3e-2},
};

/* weights away from the fresh init (zero biases), so that every path of the model matters */
static float *rough_params(const GPT2Shape *s) {
    size_t sz[NUM_PARAM_TENSORS], n = gpt2_param_sizes(s, sz, NULL);
    float *p = xmalloc(n * sizeof(float));
    gpt2_init_params(s, p, 7);
    uint64_t rng = 99;
    for (size_t i = 0; i < (size_t)s->vocab_size * s->n_embd; i++) p[i] += 0.3f * (float)(rng_uniform(&rng) - 0.5);
    for (size_t i = (size_t)s->padded_vocab_size * s->n_embd; i < n; i++) p[i] += 0.1f * (float)(rng_uniform(&rng) - 0.5);
    return p;
}

/* tests/configs/sample.lua (maxT 96) with the model's overrides; the CUDA arch of this GPU */
static int load_model(Model *m, Err *err) {
    if (m->cfg.name[0]) return 0;
    int n = 0;
    while (m->sets[n]) n++;
    if (config_load(&m->cfg, "tests/configs/sample.lua", m->sets, n, err)) return -1;
    if (strcmp(m->which, "cpu")) {
        const char *note;
        cuda_pick_arch(NULL, "", m->arch, &note);
    }
    return 0;
}

/* a sampler of rows rows holding the rough weights */
static int open_sampler(Model *m, Sampler *s, int rows, Err *err) {
    memset(s, 0, sizeof *s);
    if (load_model(m, err)) return -1;
    PlanSet *ps = xcalloc(1, sizeof *ps);
    PlanInputs in = {{0}, NULL, NULL, NULL, NULL};
    snprintf(in.arch, sizeof in.arch, "%s", m->arch);
    if (planset_make(ps, &m->cfg, &(PlanRequest){0, rows, 0, 1, 0}, &in, NULL, err)) { free(ps); return -1; }
    if (sampler_open(s, ps, NULL, m->which, 0, NULL, err)) return -1;
    GPT2Shape shape = config_shape(&m->cfg);
    float *p = rough_params(&shape);
    int rc = sampler_backend(s)->write(sampler_backend(s), BACKEND_PARAMS, p, err);
    free(p);
    return rc;
}

/* sampler_close, and the plans open_sampler made */
static void close_sampler(Sampler *s) {
    PlanSet *ps = (PlanSet *)s->plans;
    sampler_close(s);
    if (ps) planset_free(ps);
    free(ps);
}

static void prompt_tokens(int32_t *p, int n, uint64_t seed, int V) {
    for (int i = 0; i < n; i++) p[i] = (int32_t)(rng_next(&seed) % (uint64_t)V);
}

/* a GPU model's tests skip without a GPU */
static int no_gpu(const Model *m) {
    char why[512];
    if (!strcmp(m->which, "cpu") || cuda_driver_present(why, sizeof why)) return 0;
    MARK_SKIPPED("%s: %s", m->name, why);
    return 1;
}

/* Two rows of different prompts: the prefill of 7 positions, then 64 greedy decode steps, one call each; every
   step's logits against the forward of the whole sequence (a forward plan of 96 positions) at that position. The
   rows are independent: each equals the forward of its own sequence. */
static void decode_equals_forward(Model *md) {
    if (no_gpu(md)) return;
    Err err = {{0}};
    Sampler s;
    if (open_sampler(md, &s, 2, &err)) { CHECK(0, "%s: %s", md->name, err.msg); close_sampler(&s); return; }
    const Config *cfgp = &md->cfg;
    GPT2Shape m = config_shape(cfgp);
    int V = m.vocab_size, maxT = m.max_seq_len, Tp = s.plans->bucket_T[planset_bucket(s.plans, PROMPT - 1)];
    Plan pre, full;
    StepShape fs = step_forward(cfgp, 2, maxT, 1);
    Backend *pb = NULL, *fb = NULL;
    if (plan_make_prefill(&pre, cfgp, 2, Tp, 1, md->arch, NULL, &err) || plan_make(&full, cfgp, "forward", &fs, md->arch, NULL, &err) ||
        !(pb = backend_create(&(BackendOptions){&pre, 0, 0, 0, s.decode, NULL, s.decode}, md->which, &err)) ||
        !(fb = backend_create(&(BackendOptions){&full, 0, 0, 0, s.decode, NULL, NULL}, md->which, &err))) {
        CHECK(0, "%s: %s", md->name, err.msg);
        goto out;
    }
    int32_t *seq = xcalloc((size_t)2 * maxT, 4), *in = xcalloc((size_t)2 * Tp, 4);
    prompt_tokens(seq, PROMPT, 1, V);
    prompt_tokens(seq + maxT, PROMPT, 2, V);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < PROMPT - 1; t++) in[b * Tp + t] = seq[b * maxT + t];
    float *dec = xmalloc((size_t)2 * CONT * V * 4), *ref = xmalloc((size_t)V * 4);
    int rc = pb->run(pb, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = in}, &err);
    uint64_t rng[2] = {1, 2};
    for (int i = 0; i < CONT && !rc; i++) {
        int pos = PROMPT - 1 + i;
        int32_t tok[2] = {seq[pos], seq[maxT + pos]}, drawn[2];
        DecodeRun run = {tok, pos, 1, {0, 0, 1}, rng, drawn, NULL, NULL};
        rc = s.decode->run(s.decode, &(BackendRun){.phase = BACKEND_DECODE, .decode = &run}, &err) != 1;
        for (int b = 0; b < 2 && !rc; b++) {
            rc = s.decode->read(s.decode, BACKEND_LOGITS, (size_t)b, dec + ((size_t)b * CONT + i) * V, &err);   /* T = 1 */
            seq[b * maxT + pos + 1] = drawn[b];
        }
    }
    CHECK(!rc, "%s: %s", md->name, err.msg);
    if (!rc) rc = fb->run(fb, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = seq}, &err);
    double worst = 0, top = 0;
    for (int b = 0; b < 2 && !rc; b++)
        for (int i = 0; i < CONT && !rc; i++) {
            rc = fb->read(fb, BACKEND_LOGITS, (size_t)b * fb->plan->step.T + PROMPT - 1 + i, ref, &err);
            for (int v = 0; v < V && !rc; v++) {
                worst = worse(worst, fabs((double)ref[v] - dec[((size_t)b * CONT + i) * V + v]));
                top = fmax(top, fabs((double)ref[v]));
            }
        }
    CHECK(!rc, "%s: %s", md->name, err.msg);
    /* the CPU: absolute (the same ops in the same order); the GPU: relative to the largest logit */
    double d = strcmp(md->which, "cpu") ? worst / fmax(top, 1e-30) : worst;
    printf("  %s: decode vs full forward over 2 rows x %d positions: max |diff| %.3g of max |logit| %.3g\n", md->name,
           CONT, worst, top);
    CHECK(d <= md->tol, "%s: decode vs full forward: max |diff| %g (max |logit| %g), tolerance %g", md->name, worst, top,
          md->tol);
    CHECK(memcmp(seq, seq + maxT, PROMPT * 4) != 0, "the rows' prompts differ");
    free(seq); free(in); free(dec); free(ref);
out:
    if (pb) pb->destroy(pb);
    if (fb) fb->destroy(fb);
    close_sampler(&s);
}

/* up to n_new tokens after the fixed prompt (fewer where end-of-text eot comes), cached or by full re-runs */
static int generate_n(Sampler *s, const SampleSettings *ss, uint64_t seed, int eot, int32_t *drawn, int cached,
                      int n_new) {
    Err err = {{0}};
    int32_t prompt[PROMPT];
    prompt_tokens(prompt, PROMPT, 5, s->plans->decode->model.vocab_size);
    uint64_t rng[4];
    for (int b = 0; b < s->rows; b++) rng[b] = sample_row_seed(seed, b);
    SampleStats st;
    int n = cached ? sampler_generate(s, prompt, PROMPT, n_new, ss, rng, eot, drawn, NULL, NULL, &st, &err)
                   : sampler_generate_uncached(s, prompt, PROMPT, n_new, ss, rng, eot, drawn, NULL, NULL, &st, &err);
    CHECK(n >= 0, "%s", err.msg);
    return n;
}
static int generate(Sampler *s, const SampleSettings *ss, uint64_t seed, int eot, int32_t *drawn, int cached) {
    return generate_n(s, ss, seed, eot, drawn, cached, 32);
}

/* The sampler end to end: the cache and the full re-run agree; top-k 1 is greedy; a seed repeats and another
   differs; end-of-text stops; a row of a batch is what the same row seed gives alone. */
static void sampler_properties(Model *md) {
    if (no_gpu(md)) return;
    Err err = {{0}};
    Sampler s, s3;
    if (open_sampler(md, &s, 1, &err) || open_sampler(md, &s3, 3, &err)) { CHECK(0, "%s: %s", md->name, err.msg); return; }
    int32_t a[32], b[32], c[32], batch[3 * 32];
    SampleSettings greedy = {0, 0, 1}, k1 = {1, 1, 1}, hot = {1, 40, 0.9f};
    CHECK(generate(&s, &greedy, 1, -1, a, 1) == 32 && generate(&s, &greedy, 1, -1, b, 0) == 32 && !memcmp(a, b, sizeof a),
          "greedy: the cache and the full re-run draw the same 32 tokens");
    CHECK(generate(&s, &k1, 9, -1, c, 1) == 32 && !memcmp(a, c, sizeof a), "top-k 1 is greedy");
    generate(&s, &hot, 3, -1, b, 1);
    generate(&s, &hot, 3, -1, c, 1);
    CHECK(!memcmp(b, c, sizeof b), "the same seed gives the same tokens");
    generate(&s, &hot, 4, -1, c, 1);
    CHECK(memcmp(b, c, sizeof b) != 0, "another seed gives other tokens");
    /* end-of-text: the greedy token of step 5, which first comes at step k: the steps end there */
    int k = 0;
    while (a[k] != a[5]) k++;
    CHECK(generate(&s, &greedy, 1, a[5], c, 1) == k + 1 && c[k] == a[5], "end-of-text %d stops after step %d", a[5], k);
    CHECK(generate(&s, &greedy, 1, a[5], c, 0) == k + 1, "end-of-text stops the full re-run too");
    /* rows: row r of a batch of 3 with seed 11 does not depend on the other rows: it is what the same batch draws
       with the other rows' generators changed, and on the CPU (the same numbers at any batch size) what one row with
       row r's generator draws. On the GPU a batch of 3 and a batch of 1 are two plans (cuBLASLt, and decode_ln_linear with decode_linear_residual),
       whose 16-bit roundings can tip a near-tie of the draw (docs/sampling-eval-hf.md, "Sampling"). */
    generate(&s3, &hot, 11, -1, batch, 1);
    int32_t prompt[PROMPT], other[3 * 32];
    prompt_tokens(prompt, PROMPT, 5, md->cfg.model.vocab_size);
    for (int r = 0; r < 3; r++) {
        SampleStats st;
        uint64_t rng3[3];
        for (int b = 0; b < 3; b++) rng3[b] = b == r ? sample_row_seed(11, r) : sample_row_seed(99 + r, b);
        CHECK(sampler_generate(&s3, prompt, PROMPT, 32, &hot, rng3, -1, other, NULL, NULL, &st, &err) == 32, "%s", err.msg);
        int same = 1, alone = 1;
        for (int i = 0; i < 32; i++) same &= batch[i * 3 + r] == other[i * 3 + r];
        CHECK(same, "row %d of the batch changes with the other rows' generators", r);
        if (strcmp(md->which, "cpu")) continue;
        uint64_t rng = sample_row_seed(11, r);
        CHECK(sampler_generate(&s, prompt, PROMPT, 32, &hot, &rng, -1, c, NULL, NULL, &st, &err) == 32, "%s", err.msg);
        for (int i = 0; i < 32; i++) alone &= batch[i * 3 + r] == c[i];
        CHECK(alone, "row %d of the batch differs from the same row alone", r);
    }
    int differ = 0;
    for (int i = 0; i < 32; i++) differ |= batch[i * 3] != batch[i * 3 + 1];
    CHECK(differ, "two rows of a batch drew the same 32 tokens");
    /* the numbers a prompt must fit */
    int32_t p[96] = {0};
    uint64_t rng = 1;
    SampleStats st;
    CHECK(sampler_generate(&s, p, 90, 10, &greedy, &rng, -1, c, NULL, NULL, &st, &err) < 0 && strstr(err.msg, "100 positions") &&
          strstr(err.msg, "96"), "a prompt too long: %s", err.msg);
    close_sampler(&s);
    close_sampler(&s3);
}

/* sample_draw: frequencies at temperature 1 and 0.5 within 4 sigma of the softmax; top-k keeps the k highest;
   top-p the smallest set of highest holding p; greedy takes the lowest id among equal maxima */
static void test_draw_rule(void) {
    float z[5] = {0.1f, 3.0f, -1.0f, 2.9f, 0.0f};
    uint64_t rng = 1;
    SampleSettings s = {0, 0, 1};
    CHECK(sample_draw(z, 5, &s, &rng) == 1 && rng == 1, "greedy: the argmax, no random number drawn");
    float tie[4] = {1, 2, 2, 0};
    CHECK(sample_draw(tie, 4, &s, &rng) == 1, "greedy: the lowest of equal maxima");
    for (int pass = 0; pass < 2; pass++) {
        float temp = pass ? 0.5f : 1.0f;
        SampleSettings t = {temp, 0, 1};
        int counts[5] = {0};
        for (int i = 0; i < 20000; i++) counts[sample_draw(z, 5, &t, &rng)]++;
        double sum = 0;
        for (int i = 0; i < 5; i++) sum += exp(z[i] / temp);
        for (int i = 0; i < 5; i++) {
            double p = exp(z[i] / temp) / sum, sd = sqrt(20000 * p * (1 - p));
            CHECK(fabs(counts[i] - 20000 * p) < 4 * sd + 1, "temperature %g, token %d: %d draws, expected %.0f", temp, i,
                  counts[i], 20000 * p);
        }
    }
    /* probabilities 0.5, 0.3, 0.15, 0.05 */
    float q[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    struct { int k; float p; int kept; } cases[] = {{2, 1, 2}, {3, 1, 3}, {0, 0.75f, 2}, {0, 0.85f, 3}, {0, 0.4f, 1}, {2, 0.9f, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        SampleSettings t = {1, cases[c].k, cases[c].p};
        int counts[4] = {0};
        for (int i = 0; i < 4000; i++) counts[sample_draw(q, 4, &t, &rng)]++;
        int kept = 0, ok = 1;
        for (int i = 0; i < 4; i++) {
            kept += counts[i] > 0;
            ok &= (counts[i] > 0) == (i < cases[c].kept);
        }
        CHECK(ok, "top_k %d top_p %g: ids drawn %d %d %d %d, expected the first %d", cases[c].k, cases[c].p, counts[0],
              counts[1], counts[2], counts[3], cases[c].kept);
    }
    CHECK(sample_row_seed(1, 0) != sample_row_seed(1, 1) && sample_row_seed(1, 0) != sample_row_seed(2, 0), "row seeds differ");
}

/* greedy on the GPU in fp32 draws the CPU's 64 tokens from the same weights */
static void test_greedy_cpu_equals_gpu(void) {
    if (no_gpu(&gpu_models[0])) return;
    Err err = {{0}};
    Sampler c, g;
    int32_t a[64], b[64];
    SampleSettings greedy = {0, 0, 1};
    if (open_sampler(&cpu_model, &c, 1, &err) || open_sampler(&gpu_models[0], &g, 1, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    int na = generate_n(&c, &greedy, 1, -1, a, 1, 64), nb = generate_n(&g, &greedy, 1, -1, b, 1, 64), same = 0;
    while (same < 64 && a[same] == b[same]) same++;
    CHECK(na == 64 && nb == 64 && same == 64, "greedy in fp32: the GPU's tokens follow the CPU's for %d of 64", same);
    close_sampler(&c);
    close_sampler(&g);
}

static void test_decode_equals_forward_cpu(void) {
    decode_equals_forward(&cpu_model);
    for (size_t i = 0; i < sizeof cpu_relatives / sizeof cpu_relatives[0]; i++) decode_equals_forward(&cpu_relatives[i]);
}
static void test_sampler_cpu(void) { sampler_properties(&cpu_model); }
static void test_decode_equals_forward_cuda(void) {
    for (size_t i = 0; i < sizeof gpu_models / sizeof gpu_models[0]; i++) decode_equals_forward(&gpu_models[i]);
}
static void test_sampler_cuda_bf16(void) { sampler_properties(&gpu_models[1]); }

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_decode_equals_forward_cpu);
    RUN(test_sampler_cpu);
    RUN(test_draw_rule);
    RUN(test_decode_equals_forward_cuda);
    RUN(test_sampler_cuda_bf16);
    RUN(test_greedy_cpu_equals_gpu);
    return check_summary();
}
