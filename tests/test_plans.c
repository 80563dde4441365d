/* test_plans: several plans of one model in one process (gen/plan.h): the training plan and forward plans of
   other shapes, side by side, each with its own backend and activations, sharing the training backend's weights.
   The reference for a forward plan's logits is the training plan's own forward over the same rows: the model is
   the same function of each row, whatever B is. */
#include "gen/config.h"
#include "tests/check.h"
#include "tests/plans.h"
#include "runtime/backend.h"
#include "common/files.h"
#include "common/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static Config cfg;
static Plan train, one_row;

/* tests/configs/micro.lua: B=4 rows of T=32; the forward plan: one row of 32, on the training weights */
static int make_plans(Err *err) {
    if (config_load(&cfg, "tests/configs/micro.lua", NULL, 0, err) || plan_make_train(&train, &cfg, "sm_90", NULL, err)) return -1;
    StepShape s = step_forward(&cfg, 1, cfg.run.train.seq_len, 1);
    return plan_make(&one_row, &cfg, "eval", &s, "sm_90", NULL, err);
}

/* weights away from the fresh init (which has zero biases), so that every path of the forward matters */
static float *rough_params(const GPT2Shape *s, size_t *n) {
    size_t sz[NUM_PARAM_TENSORS];
    *n = gpt2_param_sizes(s, sz, NULL);
    float *p = xmalloc(*n * sizeof(float));
    gpt2_init_params(s, p, 7);
    uint64_t rng = 99;
    for (size_t i = 0; i < (size_t)s->vocab_size * s->n_embd; i++) p[i] += 0.1f * (float)(rng_uniform(&rng) - 0.5);
    for (size_t i = (size_t)s->padded_vocab_size * s->n_embd; i < *n; i++) p[i] += 0.1f * (float)(rng_uniform(&rng) - 0.5);
    return p;
}

/* the largest |a - b| over every position of row b of the training backend's forward and the one-row backend's */
static double row_difference(Backend *tb, Backend *fb, const int32_t *tokens, int b, Err *err) {
    int T = train.step.T, V = cfg.model.vocab_size;
    float *x = xmalloc((size_t)V * 4), *y = xmalloc((size_t)V * 4);
    double worst = -1;
    if (fb->run(fb, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = tokens + (size_t)b * T}, err) == 0) {
        worst = 0;
        for (int t = 0; t < T && worst >= 0; t++) {
            if (tb->read(tb, BACKEND_LOGITS, (size_t)b * T + t, x, err) || fb->read(fb, BACKEND_LOGITS, (size_t)t, y, err)) {
                worst = -1;
                break;
            }
            for (int v = 0; v < V; v++) worst = worse(worst, fabs((double)x[v] - y[v]));
        }
    }
    free(x);
    free(y);
    return worst;
}

/* The done-when of a plan per shape: a training plan and a batch-1 forward plan of the same model, both run on the
   CPU backend in one process; the batch-1 plan's logits for each row equal the training plan's forward for that
   row (1e-5: fp32, the same operations in the same order per row, so in practice they agree to the bit), before
   and after a training step moved the shared weights. */
static void test_batch1_forward_equals_training_rows(void) {
    Err err = {{0}};
    if (make_plans(&err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(one_row.step.kind == STEP_FORWARD && one_row.step.B == 1 && train.step.B == 4, "the plans' shapes");
    Backend *tb = backend_create(&(BackendOptions){.plan = &train}, "cpu", &err);
    Backend *fb = tb ? backend_create(&(BackendOptions){.plan = &one_row, .weights = tb}, "cpu", &err) : NULL;
    if (!tb || !fb) { CHECK(0, "backends: %s", err.msg); if (tb) tb->destroy(tb); return; }
    CHECK(!backend_runs(fb, BACKEND_BACKWARD) && !backend_runs(fb, BACKEND_UPDATE) && fb->plan == &one_row &&
          fb->run(fb, &(BackendRun){.phase = BACKEND_BACKWARD, .grad_scale = 1.0f}, &err) != 0,
          "the forward plan's backend has a backward");
    size_t n;
    float *params = rough_params(&train.model, &n);
    int B = train.step.B, T = train.step.T, V = cfg.model.vocab_size;
    int32_t *tok = xmalloc((size_t)B * T * 4), *tgt = xmalloc((size_t)B * T * 4);
    uint64_t rng = 5;
    for (int i = 0; i < B * T; i++) { tok[i] = (int32_t)(rng_next(&rng) % (uint64_t)V); tgt[i] = (int32_t)(rng_next(&rng) % (uint64_t)V); }
    CHECK_OK(tb->write(tb, BACKEND_PARAMS, params, &err), &err);
    for (int round = 0; round < 2; round++) {
        float loss = 0;
        CHECK_OK(tb->run(tb, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = tok}, &err), &err);
        for (int b = 0; b < B; b++) {
            double d = row_difference(tb, fb, tok, b, &err);
            CHECK(!(d < 0), "row %d: %s", b, err.msg);   /* a NaN is the next check's */
            CHECK(d <= 1e-5, "round %d, row %d: the one-row plan's logits differ from the training plan's by %.3g", round, b, d);
            if (b == 0) printf("  round %d: row logits of the B=1 plan vs the B=%d plan: max |diff| %.3g\n", round, B, d);
        }
        /* a training step on the training backend: the forward plan sees the new weights (they are shared) */
        BackendRun zero = {.phase = BACKEND_ZERO_GRADS}, back = {.phase = BACKEND_BACKWARD, .grad_scale = 1.0f},
                   fwd = {.phase = BACKEND_FORWARD, .inputs = tok, .targets = tgt, .loss = &loss},
                   update = {.phase = BACKEND_UPDATE, .adamw = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f}, .grad_scale = 1.0f, .step = 1};
        CHECK_OK(tb->run(tb, &zero, &err) || tb->run(tb, &fwd, &err) || tb->run(tb, &back, &err) || tb->run(tb, &update, &err),
                 &err);
    }
    float *p1 = xmalloc(n * sizeof(float)), *p2 = xmalloc(n * sizeof(float));
    CHECK_OK(tb->read(tb, BACKEND_PARAMS, 0, p1, &err) || fb->read(fb, BACKEND_PARAMS, 0, p2, &err), &err);
    CHECK(memcmp(p1, p2, n * sizeof(float)) == 0 && memcmp(p1, params, n * sizeof(float)) != 0,
          "the forward plan's backend does not see the trained weights");
    fb->destroy(fb);
    tb->destroy(tb);
    free(params); free(p1); free(p2); free(tok); free(tgt);
}

/* Each plan lays out its own step: the forward keeps one layer of activations and no gradients, optimizer state
   or (running on the training weights) parameters; the training plan keeps every layer's. */
static void test_forward_plan_memory(void) {
    Err err = {{0}};
    if (make_plans(&err)) { CHECK(0, "%s", err.msg); return; }
    const PlanMemory *f = &one_row.memory, *t = &train.memory;
    size_t L = (size_t)cfg.model.n_layer, C = (size_t)cfg.model.n_embd, Tn = (size_t)cfg.run.train.seq_len;
    CHECK(f->category_bytes[MEM_PARAMS] == 0 && f->category_bytes[MEM_GRADS] == 0 && f->category_bytes[MEM_OPTIMIZER] == 0,
          "forward plan: %zu bytes of parameters, %zu of gradients, %zu of optimizer state", f->category_bytes[MEM_PARAMS],
          f->category_bytes[MEM_GRADS], f->category_bytes[MEM_OPTIMIZER]);
    CHECK(f->buffers[BUF_QKV].bytes == Tn * 3 * C * 4 && f->buffers[BUF_QKV].layer_bytes == 0,
          "forward plan: qkv %zu bytes, %zu between layers (one row, one layer: %zu)", f->buffers[BUF_QKV].bytes,
          f->buffers[BUF_QKV].layer_bytes, Tn * 3 * C * 4);
    CHECK(t->buffers[BUF_QKV].bytes == L * 4 * Tn * 3 * C * 4 && t->category_bytes[MEM_GRADS] > 0,
          "training plan: qkv %zu bytes", t->buffers[BUF_QKV].bytes);
    CHECK(f->buffers[BUF_LOGITS].bytes * 4 == t->buffers[BUF_LOGITS].bytes && f->arena_bytes < t->arena_bytes,
          "forward plan: logits %zu of %zu bytes, arena %zu of %zu", f->buffers[BUF_LOGITS].bytes, t->buffers[BUF_LOGITS].bytes,
          f->arena_bytes, t->arena_bytes);
    CHECK(one_row.matmuls[MM_QKV].n == (int)Tn && one_row.matmuls[MM_QKV_DW].per_step == 0 && train.matmuls[MM_QKV].n == (int)(4 * Tn),
          "the matmuls: forward qkv n=%d, training qkv n=%d", one_row.matmuls[MM_QKV].n, train.matmuls[MM_QKV].n);
    CHECK(one_row.kernels[0].dims.grid[0] < train.kernels[0].dims.grid[0], "the forward plan's launches are the training plan's");
}

/* One plan.txt for several plans: a section each, the forward's kernels in kernels/<plan>/. */
static void test_plan_txt_sections(void) {
    Err err = {{0}};
    if (make_plans(&err)) { CHECK(0, "%s", err.msg); return; }
    char dir[] = "/tmp/gpt2gen-plans-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    static Plan a, b;
    a = train;
    b = one_row;
    snprintf(a.build_dir, sizeof a.build_dir, "%s", dir);
    const Plan *plans[2] = {&a, &b};
    char path[128];
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    char *text = plan_write(plans, 2, &err) ? NULL : read_file(path, NULL, &err);
    CHECK(text, "plan.txt: %s", err.msg);
    if (text) {
        const char *s1 = strstr(text, "# ==== plan train"), *s2 = strstr(text, "# ==== plan eval");
        CHECK(s1 && s2 && s1 < s2, "plan.txt lacks its two sections");
        CHECK(s2 && strstr(s2, "step       forward: B=1 T=32") && strstr(s2, "weights      runs with the parameters"),
              "the eval section does not say its step and weights");
        CHECK(s2 && strstr(s2, "build/micro/kernels/eval/layernorm.sm_90.cubin") && s1 && strstr(s1, "build/micro/kernels/layernorm.sm_90.cubin"),
              "the families' kernels are not in kernels/ and kernels/eval/");
    }
    free(text);
    unlink(path);
    rmdir(dir);
}

/* A backend's weights: a plan of its own takes none, a plan with shared weights needs a backend of its model. */
static void test_shared_weights_checked(void) {
    Err err = {{0}};
    if (make_plans(&err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(backend_create(&(BackendOptions){.plan = &one_row}, "cpu", &err) == NULL && strstr(err.msg, "none was given"),
          "a shared-weights plan without weights was accepted: %s", err.msg);
    GPT2Shape other = train.model;
    other.n_layer++;
    Backend *ob = backend_create(&(BackendOptions){.plan = test_plan(&other, 1, 8)}, "cpu", &err);
    if (!ob) { CHECK(0, "%s", err.msg); return; }
    CHECK(backend_create(&(BackendOptions){.plan = &one_row, .weights = ob}, "cpu", &err) == NULL && strstr(err.msg, "another model"),
          "weights of another model were accepted: %s", err.msg);
    CHECK(backend_create(&(BackendOptions){.plan = &train, .weights = ob}, "cpu", &err) == NULL && strstr(err.msg, "of its own"),
          "a plan of its own weights took another backend's: %s", err.msg);
    ob->destroy(ob);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_batch1_forward_equals_training_rows);
    RUN(test_forward_plan_memory);
    RUN(test_plan_txt_sections);
    RUN(test_shared_weights_checked);
    return check_summary();
}
