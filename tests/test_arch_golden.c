/* test_arch_golden: the CPU backend held to the PyTorch golden files of GPT-2's relatives, tests/reference/arch_*.bin,
   which tests/reference/arch_torch.py writes (float64 PyTorch on the CPU, a model written from the papers and
   transformers' documented behaviour; its header gives the file format). For each case (Llama-shaped, nanochat-shaped,
   and LayerNorm with the new ops and biases) from the file's initial weights and tokens: the logits and the loss, every
   gradient, and three AdamW steps (the loss before each, the loss after the last, the weights after it), each to 1e-5
   relative to the largest value of its tensor. A case whose file is not committed yet is skipped, naming the file and
   the command that writes it. GPT2GEN_REFERENCE_DIR replaces tests/reference. */
#include "tests/check.h"
#include "tests/plans.h"
#include "common/files.h"
#include "common/gpt2.h"
#include "runtime/backend.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { AG_MAGIC = 0x41524743, AG_VERSION = 1, AG_INTS = 64, AG_DOUBLES = 8, AG_FIXED = AG_INTS * 4 + AG_DOUBLES * 8 };
static const double TOL = 1e-5;

typedef struct {
    GPT2Shape s;
    int B, T, steps;
    size_t n;
    BackendAdamW adamw;
    const int32_t *inputs, *targets;
    const float *params, *logits, *loss, *grads, *losses, *final_loss, *final;
} ArchGolden;

/* the shape and the run from the header's ints and doubles (arch_torch.py's format) */
static int read_header(const char *path, const int32_t *h, const double *d, ArchGolden *g, Err *err) {
    if (h[0] != AG_MAGIC || h[1] != AG_VERSION)
        return err_set(err, "%s: magic %#x version %d, expected %#x version %d", path, (unsigned)h[0], h[1], AG_MAGIC, AG_VERSION);
    GPT2Shape s = {h[2], h[3], h[4], h[5], h[6], h[7], .n_kv_head = h[8], .n_ffn = h[9], .norm = h[10], .position = h[11],
                   .mlp = h[12], .qk_norm = h[13], .no_bias = !h[14], .untied = !h[15], .norm_eps = d[0],
                   .rope_theta = d[1], .logit_softcap = d[2]};
    g->s = s;
    g->B = h[16]; g->T = h[17]; g->steps = h[18];
    g->adamw = (BackendAdamW){(float)d[3], (float)d[4], (float)d[5], (float)d[6], (float)d[7]};
    int small = s.max_seq_len > 0 && s.max_seq_len <= 64 && s.vocab_size > 0 && s.padded_vocab_size >= s.vocab_size &&
                s.padded_vocab_size <= 1024 && s.n_layer > 0 && s.n_layer <= 4 && s.n_head > 0 && s.n_embd % s.n_head == 0 &&
                s.n_embd <= 256 && s.n_kv_head > 0 && s.n_head % s.n_kv_head == 0 && s.n_ffn > 0 && s.n_ffn <= 1024 &&
                (unsigned)s.norm <= NORM_RMSNORM && (unsigned)s.position <= POS_ROPE && (unsigned)s.mlp <= MLP_SWIGLU &&
                g->B > 0 && g->B <= 8 && g->T > 0 && g->T <= s.max_seq_len && g->steps > 0 && g->steps <= 16;
    if (!small || h[20] != NUM_PARAM_TENSORS)
        return err_set(err, "%s: a header out of the tiny range arch_torch.py writes (or %d tensors, expected %d)", path,
                       h[20], NUM_PARAM_TENSORS);
    return 0;
}

/* g's arrays inside buf (len bytes), checked: the exact length, and the tensor sizes of our layout for the shape */
static int golden_read(const char *path, const char *buf, size_t len, ArchGolden *g, Err *err) {
    if (len < AG_FIXED) return err_set(err, "%s: %zu bytes, shorter than its %d-byte header", path, len, AG_FIXED);
    if (read_header(path, (const int32_t *)buf, (const double *)(buf + AG_INTS * 4), g, err)) return -1;
    size_t sz[NUM_PARAM_TENSORS], n = gpt2_param_sizes(&g->s, sz, NULL), BT = (size_t)g->B * g->T;
    g->n = n;
    size_t want = AG_FIXED + 8 * NUM_PARAM_TENSORS + 4 * (2 * BT + 3 * n + BT * (size_t)g->s.vocab_size + (size_t)g->steps + 2);
    if (len != want) return err_set(err, "%s: %zu bytes, expected %zu for its header", path, len, want);
    const char *p = buf + AG_FIXED;
    const int64_t *sizes = (const int64_t *)p;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (sizes[i] != (int64_t)sz[i])
            return err_set(err, "%s: tensor %s has %lld elements there, our layout %zu", path, gpt2_param_names[i],
                           (long long)sizes[i], sz[i]);
    p += 8 * NUM_PARAM_TENSORS;
    g->inputs = (const int32_t *)p; p += 4 * BT;
    g->targets = (const int32_t *)p; p += 4 * BT;
    g->params = (const float *)p; p += 4 * n;
    g->logits = (const float *)p; p += 4 * BT * (size_t)g->s.vocab_size;
    g->loss = (const float *)p; p += 4;
    g->grads = (const float *)p; p += 4 * n;
    g->losses = (const float *)p; p += 4 * (size_t)g->steps;
    g->final_loss = (const float *)p; p += 4;
    g->final = (const float *)p;
    for (size_t i = 0; i < BT; i++)
        if (g->inputs[i] < 0 || g->inputs[i] >= g->s.vocab_size || g->targets[i] < 0 || g->targets[i] >= g->s.vocab_size)
            return err_set(err, "%s: token %zu of the inputs or targets is out of range", path, i);
    return 0;
}

/* max |got - want| / max |want| over n values */
static double rel_err(const float *got, const float *want, size_t n) {
    double d = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = worse(d, fabs((double)got[i] - want[i]));
        m = fabs(want[i]) > m ? fabs(want[i]) : m;
    }
    return d / m;
}

/* every tensor of got against want, each relative to its own largest value; prints the worst */
static void check_tensors(const char *name, const char *what, const GPT2Shape *s, const float *got, const float *want) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(s, sz, off);
    double worst = 0;
    int at = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (!sz[i]) continue;
        double e = rel_err(got + off[i], want + off[i], sz[i]);
        CHECK(e <= TOL, "%s: %s of %s: relative error %.3g, more than %g", name, what, gpt2_param_names[i], e, TOL);
        if (!(e <= worst)) worst = e, at = i;
    }
    printf("  %-8s %-22s worst tensor %-8s relative error %.2e\n", name, what, gpt2_param_names[at], worst);
}

static void check_value(const char *name, const char *what, float got, float want) {
    double e = fabs((double)got - want) / fabs((double)want);
    CHECK(e <= TOL, "%s: %s %.8g, the reference's %.8g: relative error %.3g", name, what, got, want, e);
    printf("  %-8s %-22s %.7f relative error %.2e\n", name, what, got, e);
}

/* the initial forward and backward: logits, loss, gradients */
static int check_start(const char *name, Backend *be, const ArchGolden *g, Err *err) {
    size_t BT = (size_t)g->B * g->T, V = (size_t)g->s.vocab_size, Vp = (size_t)g->s.padded_vocab_size;
    float loss = 0, *row = xmalloc(Vp * sizeof *row), *logits = xmalloc(BT * V * sizeof *logits);
    float *grads = xmalloc(g->n * sizeof *grads);
    int rc = be->write(be, BACKEND_PARAMS, g->params, err) || be->run(be, &(BackendRun){.phase = BACKEND_ZERO_GRADS}, err) ||
             be->run(be, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = g->inputs, .targets = g->targets, .loss = &loss}, err);
    for (size_t i = 0; i < BT && !rc; i++) {
        rc = be->read(be, BACKEND_LOGITS, i, row, err);
        memcpy(logits + i * V, row, V * sizeof *row);
    }
    rc = rc || be->run(be, &(BackendRun){.phase = BACKEND_BACKWARD, .grad_scale = 1.0f}, err) || be->read(be, BACKEND_GRADS, 0, grads, err);
    if (!rc) {
        double e = rel_err(logits, g->logits, BT * V);
        CHECK(e <= TOL, "%s: logits: relative error %.3g, more than %g", name, e, TOL);
        printf("  %-8s %-22s relative error %.2e\n", name, "logits", e);
        check_value(name, "loss", loss, *g->loss);
        check_tensors(name, "gradients", &g->s, grads, g->grads);
    }
    free(row); free(logits); free(grads);
    return rc ? -1 : 0;
}

/* AdamW steps 1..steps, each after the gradients of the loss before it; then the loss and the weights after */
static int check_steps(const char *name, Backend *be, const ArchGolden *g, Err *err) {
    float *after = xmalloc(g->n * sizeof *after), loss = 0;
    int rc = 0;
    for (int t = 1; t <= g->steps && !rc; t++) {
        rc = be->run(be, &(BackendRun){.phase = BACKEND_UPDATE, .adamw = g->adamw, .grad_scale = 1.0f, .step = t}, err) ||
             be->run(be, &(BackendRun){.phase = BACKEND_ZERO_GRADS}, err) ||
             be->run(be, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = g->inputs, .targets = g->targets, .loss = &loss}, err);
        if (rc) break;
        char what[32];
        snprintf(what, sizeof what, t < g->steps ? "loss before step %d" : "loss after step %d", t < g->steps ? t + 1 : t);
        check_value(name, what, loss, t < g->steps ? g->losses[t] : *g->final_loss);
        if (t < g->steps) rc = be->run(be, &(BackendRun){.phase = BACKEND_BACKWARD, .grad_scale = 1.0f}, err);
    }
    if (!rc && !(rc = be->read(be, BACKEND_PARAMS, 0, after, err))) check_tensors(name, "weights after AdamW", &g->s, after, g->final);
    free(after);
    return rc ? -1 : 0;
}

static void run_case(const char *name) {
    const char *dir = getenv("GPT2GEN_REFERENCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/arch_%s.bin", dir && *dir ? dir : "tests/reference", name);
    if (!file_exists(path))
        SKIP("%s is not committed yet: write it where PyTorch is (python3 tests/reference/arch_torch.py tests/reference) "
             "and commit it", path);
    Err err = {{0}};
    size_t len;
    ArchGolden g;
    char *buf = read_file_max(path, 8u << 20, &len, &err);
    if (!buf || golden_read(path, buf, len, &g, &err)) { CHECK(0, "%s", err.msg); free(buf); return; }
    BackendOptions o = {.plan = test_plan(&g.s, g.B, g.T)};
    Backend *be = cpu_backend_create(&o, &err);
    CHECK(be != NULL, "%s: %s", name, err.msg);
    if (be && (check_start(name, be, &g, &err) || check_steps(name, be, &g, &err))) CHECK(0, "%s: %s", name, err.msg);
    if (be) be->destroy(be);
    free(buf);
}

static void test_llama(void) { run_case("llama"); }
static void test_nanochat(void) { run_case("nanochat"); }
static void test_mixed(void) { run_case("mixed"); }

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_llama);
    RUN(test_nanochat);
    RUN(test_mixed);
    return check_summary();
}
