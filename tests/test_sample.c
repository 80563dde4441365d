/* test_sample: sampling with the key/value cache on the CPU backend (runtime/sample/sampler.h), against the full
   forward: at every position of a continuation the decode step's logits equal the forward's over the same prefix;
   and the draw's rule (runtime/sample/sampling.h): greedy, temperature, top-k, top-p, seeds, end-of-text, rows
   independent of each other. */
#include "tests/check.h"
#include "runtime/sample/sampler.h"
#include "common/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static Config cfg;
enum { PROMPT = 8, CONT = 64 };

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

/* a sampler of rows rows on the CPU backend holding the rough weights (tests/configs/sample.lua: maxT 96) */
static int open_sampler(Sampler *s, int rows, Err *err) {
    if (!cfg.name[0] && config_load(&cfg, "tests/configs/sample.lua", NULL, 0, err)) return -1;
    if (sampler_open(s, &cfg, NULL, rows, NULL, "cpu", "sm_90", 0, NULL, err)) return -1;
    GPT2Shape m = config_shape(&cfg);
    float *p = rough_params(&m);
    int rc = sampler_backend(s)->set_params(sampler_backend(s), p, err);
    free(p);
    return rc;
}

static void prompt_tokens(int32_t *p, int n, uint64_t seed, int V) {
    for (int i = 0; i < n; i++) p[i] = (int32_t)(rng_next(&seed) % (uint64_t)V);
}

/* Two rows of different prompts: the prefill of 7 positions, then 64 greedy decode steps, one call each; every
   step's logits against the forward of the whole sequence (a forward plan of 96 positions) at that position. The
   rows are independent: each equals the forward of its own sequence. */
static void test_decode_equals_forward(void) {
    Err err = {{0}};
    Sampler s;
    if (open_sampler(&s, 2, &err)) { CHECK(0, "%s", err.msg); sampler_close(&s); return; }
    GPT2Shape m = config_shape(&cfg);
    int V = m.vocab_size, maxT = m.max_seq_len, Tp = sampler_bucket(PROMPT - 1, maxT);
    Plan pre, full;
    StepShape fs = step_forward(&cfg, 2, maxT, 1);
    Backend *pb = NULL, *fb = NULL;
    if (plan_make_prefill(&pre, &cfg, 2, Tp, 1, "sm_90", &err) || plan_make(&full, &cfg, "forward", &fs, "sm_90", &err) ||
        !(pb = backend_create(&(BackendOptions){&pre, 0, 0, 0, s.decode, NULL, s.decode}, "cpu", &err)) ||
        !(fb = backend_create(&(BackendOptions){&full, 0, 0, 0, s.decode, NULL, NULL}, "cpu", &err))) {
        CHECK(0, "%s", err.msg);
        goto out;
    }
    int32_t *seq = xcalloc((size_t)2 * maxT, 4), *in = xcalloc((size_t)2 * Tp, 4);
    prompt_tokens(seq, PROMPT, 1, V);
    prompt_tokens(seq + maxT, PROMPT, 2, V);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < PROMPT - 1; t++) in[b * Tp + t] = seq[b * maxT + t];
    float *dec = xmalloc((size_t)2 * CONT * V * 4), *ref = xmalloc((size_t)V * 4);
    int rc = pb->forward(pb, in, NULL, NULL, &err);
    uint64_t rng[2] = {1, 2};
    for (int i = 0; i < CONT && !rc; i++) {
        int pos = PROMPT - 1 + i;
        int32_t tok[2] = {seq[pos], seq[maxT + pos]}, drawn[2];
        DecodeRun run = {tok, pos, 1, {0, 0, 1}, rng, drawn, NULL, NULL};
        rc = s.decode->decode(s.decode, &run, &err) != 1;
        for (int b = 0; b < 2 && !rc; b++) {
            rc = s.decode->get_logits(s.decode, b, 0, dec + ((size_t)b * CONT + i) * V, &err);
            seq[b * maxT + pos + 1] = drawn[b];
        }
    }
    CHECK(!rc, "%s", err.msg);
    if (!rc) rc = fb->forward(fb, seq, NULL, NULL, &err);
    double worst = 0;
    for (int b = 0; b < 2 && !rc; b++)
        for (int i = 0; i < CONT && !rc; i++) {
            rc = fb->get_logits(fb, b, PROMPT - 1 + i, ref, &err);
            for (int v = 0; v < V && !rc; v++) worst = fmax(worst, fabs((double)ref[v] - dec[((size_t)b * CONT + i) * V + v]));
        }
    CHECK(!rc, "%s", err.msg);
    CHECK(worst < 1e-5, "decode vs full forward: max |diff| %g over 2 rows x %d positions", worst, CONT);
    CHECK(memcmp(seq, seq + maxT, PROMPT * 4) != 0, "the rows' prompts differ");
    free(seq); free(in); free(dec); free(ref);
out:
    if (pb) pb->destroy(pb);
    if (fb) fb->destroy(fb);
    sampler_close(&s);
}

static int generate(Sampler *s, const SampleSettings *ss, uint64_t seed, int eot, int32_t *drawn, int cached) {
    Err err = {{0}};
    int32_t prompt[PROMPT];
    prompt_tokens(prompt, PROMPT, 5, cfg.model.vocab_size);
    uint64_t rng[4];
    for (int b = 0; b < s->rows; b++) rng[b] = sample_row_seed(seed, b);
    SampleStats st;
    int n = cached ? sampler_generate(s, prompt, PROMPT, 32, ss, rng, eot, drawn, NULL, NULL, &st, &err)
                   : sampler_generate_uncached(s, prompt, PROMPT, 32, ss, rng, eot, drawn, NULL, NULL, &st, &err);
    CHECK(n >= 0, "%s", err.msg);
    return n;
}

/* The sampler end to end: the cache and the full re-run agree; top-k 1 is greedy; a seed repeats and another
   differs; end-of-text stops; a row of a batch is what the same row seed gives alone. */
static void test_sampler(void) {
    Err err = {{0}};
    Sampler s, s3;
    if (open_sampler(&s, 1, &err) || open_sampler(&s3, 3, &err)) { CHECK(0, "%s", err.msg); return; }
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
    /* rows: row r of a batch of 3 with seed 11 equals one row with row r's generator */
    generate(&s3, &hot, 11, -1, batch, 1);
    for (int r = 0; r < 3; r++) {
        int32_t prompt[PROMPT];
        prompt_tokens(prompt, PROMPT, 5, cfg.model.vocab_size);
        uint64_t rng = sample_row_seed(11, r);
        SampleStats st;
        CHECK(sampler_generate(&s, prompt, PROMPT, 32, &hot, &rng, -1, c, NULL, NULL, &st, &err) == 32, "%s", err.msg);
        int same = 1;
        for (int i = 0; i < 32; i++) same &= batch[i * 3 + r] == c[i];
        CHECK(same, "row %d of the batch differs from the same row alone", r);
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
    sampler_close(&s);
    sampler_close(&s3);
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

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_decode_equals_forward);
    RUN(test_sampler);
    RUN(test_draw_rule);
    return check_summary();
}
