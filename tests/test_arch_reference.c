/* test_arch_reference: GPT-2's relatives on the CPU backend held to a reference outside our code
   (tests/reference/arch_reference.py: numpy, float64, written from the papers and transformers' documented
   behaviour). For each architecture of a tiny model this program writes the weights (our checkpoint order), the
   tokens, and what the CPU backend computes (the logits, the mean loss, the gradients, one AdamW step, and the
   logits of decode steps against the key/value cache) to a file; the script checks each to 1e-5 relative and
   prints one line per check. It needs python3 with numpy, and skips without it. */
#include "tests/check.h"
#include "tests/plans.h"
#include "common/gpt2.h"
#include "common/rng.h"
#include "runtime/backend.h"
#include "runtime/sample/sampling.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

enum { RB = 2, RT = 8, ARCH_MAGIC = 0x41524348, ARCH_VERSION = 1 };
static const BackendAdamW ADAMW = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};

typedef struct { const char *name; GPT2Shape s; } Arch;

/* maxT 16, V 60 (Vp 128), L 2, NH 4, C 32: head size 8 (but the last) */
#define TINY_BASE .max_seq_len = 16, .vocab_size = 60, .padded_vocab_size = 128, .n_layer = 2, .n_head = 4, .n_embd = 32
static const Arch ARCHS[] = {
    {"gpt2", {TINY_BASE}},
    {"llama", {TINY_BASE, .norm = NORM_RMSNORM, .position = POS_ROPE, .mlp = MLP_SWIGLU, .n_kv_head = 2, .n_ffn = 64,
               .no_bias = 1, .untied = 1, .norm_eps = 1e-6, .rope_theta = 500.0}},
    {"nanochat", {TINY_BASE, .norm = NORM_RMSNORM, .position = POS_ROPE, .mlp = MLP_RELU2, .qk_norm = 1, .no_bias = 1,
                  .untied = 1, .logit_softcap = 3.0}},
    {"mqa-layernorm-swiglu-bias", {TINY_BASE, .mlp = MLP_SWIGLU, .n_kv_head = 1, .n_ffn = 96, .qk_norm = 1,
                                   .position = POS_ROPE, .logit_softcap = 5.0}},
    {"gpt2-nobias-untied-relu2", {TINY_BASE, .mlp = MLP_RELU2, .no_bias = 1, .untied = 1, .n_ffn = 32}},
    /* head size 64: QK-norm's op also rotates (gpt2_qk_norm_rotates), with no rope op of its own */
    {"nanochat-hs64", {.max_seq_len = 16, .vocab_size = 60, .padded_vocab_size = 128, .n_layer = 2, .n_head = 2,
                       .n_embd = 128, .norm = NORM_RMSNORM, .position = POS_ROPE, .mlp = MLP_RELU2, .qk_norm = 1,
                       .no_bias = 1, .untied = 1, .n_kv_head = 1}},
};

/* init, then every real entry moved by N(0, 0.1): norms' weights away from 1, nonzero biases, every path nonlinear */
static void rough_params(const GPT2Shape *s, float *p, size_t n, uint64_t seed) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS], real = (size_t)s->vocab_size * s->n_embd;
    gpt2_param_sizes(s, sz, off);
    gpt2_init_params(s, p, seed);
    uint64_t rng = seed + 5;
    for (size_t i = 0; i < n; i++) {
        int pad = (i >= off[P_WTE] + real && i < off[P_WTE] + sz[P_WTE]) ||
                  (sz[P_LMHEAD] && i >= off[P_LMHEAD] + real && i < off[P_LMHEAD] + sz[P_LMHEAD]);
        if (!pad) p[i] += 0.1f * rng_normal(&rng);
    }
}

static void put(FILE *f, const void *p, size_t bytes) { fwrite(p, 1, bytes, f); }

/* the header: the shape and every architecture field, then B, T */
static void put_header(FILE *f, const GPT2Shape *s) {
    int32_t h[20] = {ARCH_MAGIC, ARCH_VERSION, s->max_seq_len, s->vocab_size, s->padded_vocab_size, s->n_layer, s->n_head,
                     s->n_embd, gpt2_kv_heads(s), gpt2_ffn(s), s->norm, s->position, s->mlp, s->qk_norm, s->no_bias,
                     s->untied, RB, RT, NUM_PARAM_TENSORS, 0};
    double d[6] = {gpt2_norm_eps(s), gpt2_rope_theta(s), s->logit_softcap, ADAMW.lr, ADAMW.beta1, ADAMW.beta2};
    double d2[2] = {ADAMW.eps, ADAMW.weight_decay};
    put(f, h, sizeof h);
    put(f, d, sizeof d);
    put(f, d2, sizeof d2);
}

/* decode steps of row 0's tokens against the cache, one position at a time: each step's logits (RT x Vp) */
static int decode_logits(Backend *train, const GPT2Shape *s, const int32_t *tok, float *out, Err *err) {
    BackendOptions o = {.plan = test_plan_shared(s, STEP_DECODE, 1, 1, 1), .weights = train};
    Backend *dec = cpu_backend_create(&o, err);
    if (!dec) return -1;
    int rc = 0;
    for (int t = 0; t < RT && !rc; t++) {
        uint64_t rng = 1;
        int32_t drawn;
        DecodeRun d = {.tokens = &tok[t], .pos = t, .steps = 1, .s = {0.0f, 0, 1.0f}, .rng = &rng, .drawn = &drawn};
        rc = dec->run(dec, &(BackendRun){.phase = BACKEND_DECODE, .decode = &d}, err) != 1 ||
             dec->read(dec, BACKEND_LOGITS, 0, out + (size_t)t * s->padded_vocab_size, err);
    }
    dec->destroy(dec);
    return rc ? -1 : 0;
}

/* one architecture's dump: header, tokens, sizes, params, logits, loss, grads, params after AdamW, decode logits */
static int dump(const Arch *a, const char *path, Err *err) {
    const GPT2Shape *s = &a->s;
    size_t sz[NUM_PARAM_TENSORS], n = gpt2_param_sizes(s, sz, NULL), N = (size_t)RB * RT, Vp = s->padded_vocab_size;
    BackendOptions o = {.plan = test_plan(s, RB, RT)};
    Backend *be = cpu_backend_create(&o, err);
    if (!be) return -1;
    float *params = xmalloc(n * sizeof(float)), *grads = xmalloc(n * sizeof(float)), *after = xmalloc(n * sizeof(float));
    float *logits = xmalloc(N * Vp * sizeof(float)), *dec = xmalloc((size_t)RT * Vp * sizeof(float)), loss = 0;
    int32_t inp[RB * RT], tgt[RB * RT];
    uint64_t rng = 42;
    for (size_t i = 0; i < N; i++) { inp[i] = (int32_t)(rng_next(&rng) % 60); tgt[i] = (int32_t)(rng_next(&rng) % 60); }
    rough_params(s, params, n, 7);
    int rc = be->write(be, BACKEND_PARAMS, params, err) || be->run(be, &(BackendRun){.phase = BACKEND_ZERO_GRADS}, err) ||
             be->run(be, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = inp, .targets = tgt, .loss = &loss}, err);
    for (size_t i = 0; i < N && !rc; i++) rc = be->read(be, BACKEND_LOGITS, i, logits + i * Vp, err);
    rc = rc || be->run(be, &(BackendRun){.phase = BACKEND_BACKWARD, .grad_scale = 1.0f}, err) ||
         be->read(be, BACKEND_GRADS, 0, grads, err) ||
         be->run(be, &(BackendRun){.phase = BACKEND_UPDATE, .adamw = ADAMW, .grad_scale = 1.0f, .step = 1}, err) ||
         be->read(be, BACKEND_PARAMS, 0, after, err) || be->write(be, BACKEND_PARAMS, params, err) ||
         decode_logits(be, s, inp, dec, err);
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!rc && !f) rc = err_set(err, "cannot write %s", path);
    if (f) {
        int64_t sizes[NUM_PARAM_TENSORS];
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) sizes[i] = (int64_t)sz[i];
        put_header(f, s);
        put(f, inp, sizeof inp); put(f, tgt, sizeof tgt); put(f, sizes, sizeof sizes);
        put(f, params, n * 4); put(f, logits, N * Vp * 4); put(f, &loss, 4); put(f, grads, n * 4); put(f, after, n * 4);
        put(f, dec, (size_t)RT * Vp * 4);
        if (fclose(f)) rc = err_set(err, "cannot write %s", path);
    }
    be->destroy(be);
    free(params); free(grads); free(after); free(logits); free(dec);
    return rc;
}

static void test_architectures(void) {
    if (system("python3 -c 'import numpy' 2>/dev/null")) SKIP("python3 cannot import numpy");
    char dir[] = "/tmp/test_arch_reference.XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++) {
        char path[256], cmd[512];
        snprintf(path, sizeof path, "%s/%s.bin", dir, ARCHS[i].name);
        Err err = {{0}};
        int rc = dump(&ARCHS[i], path, &err);
        CHECK(rc == 0, "%s: %s", ARCHS[i].name, err.msg);
        if (rc) continue;
        snprintf(cmd, sizeof cmd, "python3 tests/reference/arch_reference.py %s", path);
        printf("  %s\n", ARCHS[i].name);
        fflush(stdout);
        CHECK(system(cmd) == 0, "%s: the CPU backend differs from the numpy reference (lines above)", ARCHS[i].name);
        unlink(path);
    }
    rmdir(dir);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_architectures);
    return check_summary();
}
