/* test_eval: multiple-choice evaluation (runtime/eval/). Builds small evaluation sets in llm.c's format itself and
   holds the evaluator against a reference: each completion's mean loss over its own tokens from a forward of exactly
   the row's length (B = 1, no padding, no batching), with the log-softmax in fp64 from the logits. On the CPU the
   scores agree to 1e-5 and every choice is the reference's; where there is a GPU, the CUDA backend's choices in
   fp32 and bf16 are the CPU reference's wherever the reference's margin between the two best completions is above
   the precision's tolerance. And the reader refuses malformed files, naming the field. */
#include "gen/config.h"
#include "tests/check.h"
#include "runtime/eval/evaluate.h"
#include "runtime/gpu.h"
#include "common/files.h"
#include "common/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EXAMPLES = 24 };

static char dir[] = "/tmp/gpt2gen-test-eval-XXXXXX";

/* One example as the file holds it */
typedef struct { int label, k, ctx_len, comp_len[8]; uint16_t toks[8][128], ctx[128]; } Ex;

static void random_examples(Ex *ex, int n, uint64_t seed, int V) {
    for (int i = 0; i < n; i++) {
        Ex *e = &ex[i];
        memset(e, 0, sizeof *e);
        e->k = i % 5 == 3 ? 2 : 4;   /* a few of 2 completions: the format allows any count */
        e->label = (int)(rng_next(&seed) % (uint64_t)e->k);
        e->ctx_len = 1 + (int)(rng_next(&seed) % 24);
        for (int t = 0; t < e->ctx_len; t++) e->ctx[t] = (uint16_t)(rng_next(&seed) % (uint64_t)V);
        for (int j = 0; j < e->k; j++) {
            e->comp_len[j] = 1 + (int)(rng_next(&seed) % 9);
            for (int t = 0; t < e->comp_len[j]; t++) e->toks[j][t] = (uint16_t)(rng_next(&seed) % (uint64_t)V);
        }
    }
}

/* The file of n examples; words of the stream in *w (at most cap), returns the count. */
static size_t encode(const Ex *ex, int n, uint16_t *w, int *longest) {
    size_t at = 0;
    *longest = 0;
    for (int i = 0; i < n; i++) {
        size_t start = at;
        w[at++] = 65535; w[at++] = 0; w[at++] = (uint16_t)i; w[at++] = (uint16_t)ex[i].label; w[at++] = (uint16_t)ex[i].k;
        w[at++] = (uint16_t)ex[i].ctx_len;
        for (int t = 0; t < ex[i].ctx_len; t++) w[at++] = ex[i].ctx[t];
        for (int j = 0; j < ex[i].k; j++) {
            w[at++] = (uint16_t)ex[i].comp_len[j];
            for (int t = 0; t < ex[i].comp_len[j]; t++) w[at++] = ex[i].toks[j][t];
        }
        w[start + 1] = (uint16_t)((at - start) * 2);
        if ((int)((at - start) * 2) > *longest) *longest = (int)((at - start) * 2);
    }
    return at;
}

static void write_set(const char *path, const int32_t *h4, const uint16_t *w, size_t words) {
    int32_t h[256] = {0};
    memcpy(h, h4, 4 * sizeof *h);
    FILE *f = fopen(path, "wb");
    fwrite(h, sizeof h, 1, f);
    fwrite(w, 2, words, f);
    fclose(f);
}

static char *path_of(const char *name) {
    static char p[8][256];
    static int slot;
    char *s = p[slot++ % 8];
    snprintf(s, 256, "%s/%s", dir, name);
    return s;
}

/* the micro model of tests/configs/sample.lua (maxT 96), precision as given */
static int load_cfg(Config *cfg, const char *precision, Err *err) {
    char set[32];
    snprintf(set, sizeof set, "precision=%s", precision);
    const char *sets[] = {set};
    return config_load(cfg, "tests/configs/sample.lua", sets, 1, err);
}

static float *rough_params(const GPT2Shape *s) {
    size_t sz[NUM_PARAM_TENSORS], n = gpt2_param_sizes(s, sz, NULL);
    float *p = xmalloc(n * sizeof(float));
    gpt2_init_params(s, p, 3);
    uint64_t rng = 5;
    for (size_t i = 0; i < n; i++) p[i] += 0.2f * (float)(rng_uniform(&rng) - 0.5);
    return p;
}

/* The reference scores: each row alone, a CPU forward of exactly its length, log-softmax in fp64. */
static int reference_scores(const Config *cfg, const float *params, const Ex *ex, int n, double *scores, Err *err) {
    int V = cfg->model.vocab_size, row = 0;
    float *logits = xmalloc((size_t)V * sizeof *logits);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        for (int j = 0; j < ex[i].k && !rc; j++, row++) {
            int len = ex[i].ctx_len + ex[i].comp_len[j];
            int32_t in[128];
            for (int t = 0; t < len; t++) in[t] = t < ex[i].ctx_len ? ex[i].ctx[t] : ex[i].toks[j][t - ex[i].ctx_len];
            Plan plan;
            StepShape s = step_forward(cfg, 1, len, 0);
            Backend *be = NULL;
            if (plan_make(&plan, cfg, "reference", &s, "sm_90", NULL, err) ||
                !(be = backend_create(&(BackendOptions){&plan, 0, 0, 0, NULL, NULL, NULL}, "cpu", err)) ||
                be->write(be, BACKEND_PARAMS, params, err) ||
                be->run(be, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = in}, err)) {
                rc = -1;
                break;
            }
            double sum = 0;
            for (int t = ex[i].ctx_len - 1; t < len - 1 && !rc; t++) {
                rc = be->read(be, BACKEND_LOGITS, (size_t)t, logits, err);   /* row 0, position t */
                double mx = -INFINITY, z = 0;
                for (int v = 0; v < V; v++) mx = fmax(mx, logits[v]);
                for (int v = 0; v < V; v++) z += exp((double)logits[v] - mx);
                sum += -((double)logits[in[t + 1]] - mx - log(z));
            }
            scores[row] = sum / ex[i].comp_len[j];
            be->destroy(be);
        }
    free(logits);
    return rc;
}

static Ex examples[EXAMPLES];
static double ref[EXAMPLES * 4];
static float *params;
static Config cpu_cfg;
static int have_ref;

static int setup(Err *err) {
    if (have_ref) return 0;
    if (load_cfg(&cpu_cfg, "fp32", err)) return -1;
    random_examples(examples, EXAMPLES, 42, cpu_cfg.model.vocab_size);
    static uint16_t w[1 << 16];
    int longest;
    size_t words = encode(examples, EXAMPLES, w, &longest);
    write_set(path_of("good.bin"), (int32_t[]){20240522, 1, EXAMPLES, longest}, w, words);
    GPT2Shape s = config_shape(&cpu_cfg);
    params = rough_params(&s);
    if (reference_scores(&cpu_cfg, params, examples, EXAMPLES, ref, err)) return -1;
    have_ref = 1;
    return 0;
}

/* Runs the evaluator on good.bin; 0 and r filled, or -1 with err */
static int evaluate(const Config *cfg, const char *which, const char *arch, int rows, EvalResult *r, Err *err) {
    EvalSet set;
    Evaluator e = {0};
    int rc = -1;
    if (evalset_load(&set, path_of("good.bin"), err)) return -1;
    PlanSet ps;
    PlanInputs in = {{0}, NULL, NULL, NULL, NULL};
    snprintf(in.arch, sizeof in.arch, "%s", arch);
    PlanRequest req = {0, 0, rows < set.rows ? rows : set.rows, 0, 0};
    if (planset_make(&ps, cfg, &req, &in, NULL, err)) { evalset_free(&set); return -1; }
    if (!evaluator_open(&e, &ps, &set, NULL, which, 0, NULL, err) &&
        !evaluator_backend(&e)->write(evaluator_backend(&e), BACKEND_PARAMS, params, err))
        rc = evaluator_run(&e, &set, r, NULL, NULL, err);
    evaluator_close(&e);
    planset_free(&ps);
    evalset_free(&set);
    return rc;
}

/* choices against the reference's; examples whose two best reference scores are within tol are not counted */
static int compare_choices(const EvalResult *r, double tol, const char *what) {
    int row = 0, close = 0, wrong = 0;
    for (int i = 0; i < EXAMPLES; row += examples[i].k, i++) {
        int best = 0;
        for (int j = 1; j < examples[i].k; j++) if (ref[row + j] < ref[row + best]) best = j;
        double margin = INFINITY;
        for (int j = 0; j < examples[i].k; j++) if (j != best) margin = fmin(margin, ref[row + j] - ref[row + best]);
        if (margin <= tol) { close++; continue; }
        if (r->choices[i] != best) {
            wrong++;
            printf("  %s: example %d chose %d, the reference %d (margin %.3g)\n", what, i, r->choices[i], best, margin);
        }
    }
    printf("  %s: %d of %d examples compared (%d within the tolerance %.2g of a tie), %d differ; accuracy %.3f\n", what,
           EXAMPLES - close, EXAMPLES, close, tol, wrong, r->accuracy);
    CHECK(close < EXAMPLES / 2, "%s: most examples are compared (%d are near ties)", what, close);
    return wrong;
}

static void test_cpu_equals_reference(void) {
    Err err = {{0}};
    if (setup(&err)) { CHECK(0, "%s", err.msg); return; }
    int total_rows = 0;
    for (int i = 0; i < EXAMPLES; i++) total_rows += examples[i].k;
    for (int rows = 1; rows <= 7; rows += 6) {   /* 7: batches that split examples, and a partial last one */
        EvalResult r;
        if (evaluate(&cpu_cfg, "cpu", "sm_90", rows, &r, &err)) { CHECK(0, "%s", err.msg); return; }
        double worst = 0;
        for (int i = 0; i < total_rows; i++) worst = worse(worst, fabs(r.scores[i] - ref[i]));
        CHECK(worst < 1e-5, "rows %d: scores against the reference: max |diff| %g", rows, worst);
        char what[32];
        snprintf(what, sizeof what, "cpu, %d rows", rows);
        CHECK(compare_choices(&r, 0, what) == 0, "cpu: every choice is the reference's");
        int correct = 0;
        for (int i = 0; i < EXAMPLES; i++) correct += r.choices[i] == examples[i].label;
        CHECK(r.examples == EXAMPLES && r.correct == correct && fabs(r.accuracy - (double)correct / EXAMPLES) < 1e-12,
              "the counts: %d examples, %d correct", r.examples, r.correct);
        evalresult_free(&r);
    }
}

static void test_gpu_equals_cpu(void) {
    char why[512];
    if (!cuda_driver_present(why, sizeof why)) { MARK_SKIPPED("the CUDA backend: %s", why); return; }
    Err err = {{0}};
    if (setup(&err)) { CHECK(0, "%s", err.msg); return; }
    const char *precs[] = {"fp32", "bf16"};
    double tols[] = {1e-3, 0.05};
    char arch[16];
    const char *note;
    cuda_pick_arch(NULL, "", arch, &note);
    for (int p = 0; p < 2; p++) {
        Config cfg;
        EvalResult r;
        if (load_cfg(&cfg, precs[p], &err) || evaluate(&cfg, "cuda", arch, 16, &r, &err)) {
            CHECK(0, "cuda %s: %s", precs[p], err.msg);
            continue;
        }
        int total_rows = 0;
        double worst = 0;
        for (int i = 0; i < EXAMPLES; i++) total_rows += examples[i].k;
        for (int i = 0; i < total_rows; i++) worst = worse(worst, fabs(r.scores[i] - ref[i]));
        printf("  cuda %s: scores against the CPU reference: max |diff| %.3g\n", precs[p], worst);
        CHECK(worst < tols[p], "cuda %s: scores: max |diff| %g, tolerance %g", precs[p], worst, tols[p]);
        char what[32];
        snprintf(what, sizeof what, "cuda %s", precs[p]);
        CHECK(compare_choices(&r, 2 * tols[p], what) == 0, "cuda %s: the choices are the CPU reference's", precs[p]);
        evalresult_free(&r);
    }
}

/* a malformed file: the load (or the model check) fails and the message holds want */
static void refused(const char *name, const int32_t *h, const uint16_t *w, size_t words, const char *want) {
    write_set(path_of(name), h, w, words);
    EvalSet s;
    Err err = {{0}};
    int rc = evalset_load(&s, path_of(name), &err);
    if (!rc) {
        rc = evalset_check_model(&s, cpu_cfg.model.vocab_size, cpu_cfg.model.max_seq_len, "the test's model", &err);
        evalset_free(&s);
    }
    CHECK(rc != 0 && strstr(err.msg, want) && strstr(err.msg, name), "%s: refused naming '%s': %s", name, want,
          rc ? err.msg : "(accepted)");
}

static void test_malformed(void) {
    Err err = {{0}};
    if (setup(&err)) { CHECK(0, "%s", err.msg); return; }
    static uint16_t w[1 << 16], bad[1 << 16];
    int longest;
    size_t words = encode(examples, 3, w, &longest);
    int32_t h[4] = {20240522, 1, 3, longest};
    refused("magic.bin", (int32_t[]){20240520, 1, 3, longest}, w, words, "magic 20240520");
    refused("version.bin", (int32_t[]){20240522, 2, 3, longest}, w, words, "version 2");
    refused("count_more.bin", (int32_t[]){20240522, 1, 4, longest}, w, words, "ends inside example 3");
    refused("count_less.bin", (int32_t[]){20240522, 1, 2, longest}, w, words, "after the 2 examples");
    refused("count_huge.bin", (int32_t[]){20240522, 1, 1 << 30, longest}, w, words, "hold at most");
    refused("truncated.bin", h, w, words - 3, "truncated: example 2");
    refused("longest.bin", (int32_t[]){20240522, 1, 3, 14}, w, words, "more than the header's longest example");
    memcpy(bad, w, words * 2);
    bad[3] = 7;   /* example 0's label */
    refused("label.bin", h, bad, words, "label is 7");
    memcpy(bad, w, words * 2);
    bad[1] += 2;  /* example 0's bytes field one word long */
    refused("bytes.bin", (int32_t[]){20240522, 1, 3, 65535}, bad, words, "its bytes field says");
    memcpy(bad, w, words * 2);
    bad[6] = (uint16_t)(cpu_cfg.model.vocab_size + 3);   /* example 0's first context token */
    refused("vocab.bin", h, bad, words, "past the model's vocabulary");
    /* an example of 90 context and 10 completion tokens: 100 positions, more than maxT 96 */
    Ex *big = xcalloc(1, sizeof *big);
    big->k = 2; big->label = 1; big->ctx_len = 90; big->comp_len[0] = 3; big->comp_len[1] = 10;
    words = encode(big, 1, w, &longest);
    refused("too_long.bin", (int32_t[]){20240522, 1, 1, longest}, w, words, "completion 1 are 100 tokens, more than the model's context of 96");
    free(big);
    refused("empty.bin", h, w, 0, "0 bytes hold at most 0");
    FILE *f = fopen(path_of("short.bin"), "wb");
    fputs("not an eval file", f);
    fclose(f);
    EvalSet s;
    CHECK(evalset_load(&s, path_of("short.bin"), &err) && strstr(err.msg, "16 bytes"), "a short file: %s", err.msg);
    CHECK(evalset_load(&s, path_of("missing.bin"), &err) && strstr(err.msg, "missing.bin"), "a missing file: %s", err.msg);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    RUN(test_cpu_equals_reference);
    RUN(test_malformed);
    RUN(test_gpu_equals_cpu);
    int rc = check_summary();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    free(params);
    return rc;
}
