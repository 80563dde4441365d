/* test_cpu_model: the CPU backend over the reference ops (the ops alone: test_cpu_ops.c).
 *   - the whole model's gradient against central differences of the loss, for samples of every tensor
 *   - misuse refused; the interface's phases and arrays by plan kind (runtime/backend.h)
 *   - determinism across runs and thread counts, AdamW against fp64, padded wte rows staying zero
 *   - the PyTorch golden file (tests/reference/golden_tiny.bin), when it is there */
#include <math.h>
#include "common/files.h"
#include "common/rng.h"
#include <stdio.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/backend.h"
#include "runtime/checkpoint.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/check.h"
#include "tests/plans.h"
#include "tests/golden.h"
#include "tests/fd.h"

/* CHECK_OK copies an Err message (4 KiB) into the harness's 1 KiB reason: truncation is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* ---------------------------------------------------------------------------------------------------- */
/* the whole model */

static const GPT2Shape TINY = GPT2_SHAPE(16, 60, 128, 2, 2, 16);   /* maxT, V, Vp, L, NH, C */
enum { TB = 2, TT = 8 };

static Backend *make_backend(const GPT2Shape *s, int B, int T) {
    BackendOptions o = {.plan = test_plan(s, B, T)};
    Err err;
    Backend *be = cpu_backend_create(&o, &err);
    if (!be) fprintf(stderr, "cpu_backend_create: %s\n", err.msg);
    return be;
}

/* Fresh init, then every real entry moved by N(0, 0.2): nonzero biases, LayerNorm weights away from 1,
   and weights large enough that attention and GELU are far from linear, so every path matters. */
static void rough_params(const GPT2Shape *s, float *params, unsigned long seed) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(s, sz, off);
    gpt2_init_params(s, params, seed);
    uint64_t rng = seed + 77;
    size_t real_wte = (size_t)s->vocab_size * s->n_embd;
    for (size_t i = 0; i < n; i++)
        if (i >= real_wte && i < sz[P_WTE]) continue;      /* padded rows stay zero */
        else params[i] += 0.2f * rng_normal(&rng);
}

static void tokens(int32_t *x, int n, int V, uint64_t *rng) {
    for (int i = 0; i < n; i++) x[i] = (int32_t)(rng_next(rng) % (uint64_t)V);
}

/* the runs the tests repeat; a forward's inputs change from test to test (fwd) */
static const BackendRun ZERO = {.phase = BACKEND_ZERO_GRADS}, BACKWARD = {.phase = BACKEND_BACKWARD, .grad_scale = 1.0f};

static BackendRun fwd(const int32_t *inp, const int32_t *tgt, float *loss) {
    return (BackendRun){.phase = BACKEND_FORWARD, .inputs = inp, .targets = tgt, .loss = loss};
}

static BackendRun adamw(float weight_decay, float grad_scale, int step) {
    return (BackendRun){.phase = BACKEND_UPDATE, .adamw = {1e-3f, 0.9f, 0.95f, 1e-8f, weight_decay},
                        .grad_scale = grad_scale, .step = step};
}

typedef struct { Backend *be; float *params; const int32_t *inp, *tgt; } ModelCtx;

static double model_loss(void *p) {
    ModelCtx *c = p;
    Err err;
    float loss = NAN;
    BackendRun f = fwd(c->inp, c->tgt, &loss);
    if (c->be->write(c->be, BACKEND_PARAMS, c->params, &err) || c->be->run(c->be, &f, &err))
        fprintf(stderr, "model_loss: %s\n", err.msg);
    return loss;
}

/* (a) Gradient of the mean loss w.r.t. samples of every tensor, against central differences in fp32
 * (the quotient formed in double over the step actually taken). The loss (~4) carries fp32 rounding noise
 * of a few 1e-7; with h = 1e-2 that is ~1e-4 in the quotient, and the truncation error h^2 f'''/6 is of the
 * same order; measured worst: ~2e-5. Tolerance: 1e-4 absolute + 2e-3 relative. Samples: 6 random entries
 * per tensor plus its largest-gradient entry (a strong signal). A wrong gradient is off by O(|g|); a 1%
 * error in one term of one op's backward already fails here. */
static void test_model_gradients(void) {
    Backend *be = make_backend(&TINY, TB, TT);
    CHECK(be != NULL, "no backend");
    if (!be) return;
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(&TINY, sz, off);
    float *params = fnew(n), *grads = fnew(n);
    rough_params(&TINY, params, 5);
    uint64_t rng = 99;
    int32_t inp[TB * TT], tgt[TB * TT];
    tokens(inp, TB * TT, TINY.vocab_size, &rng);
    tokens(tgt, TB * TT, TINY.vocab_size, &rng);
    Err err;
    ModelCtx ctx = {be, params, inp, tgt};
    model_loss(&ctx);
    CHECK_OK(be->run(be, &ZERO, &err), &err);
    CHECK_OK(be->run(be, &BACKWARD, &err), &err);
    CHECK_OK(be->read(be, BACKEND_GRADS, 0, grads, &err), &err);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t span = sz[t];
        if (!span) continue;   /* a tensor GPT-2 does not have */
        if (t == P_WTE) span = (size_t)TINY.vocab_size * TINY.n_embd;   /* real rows */
        if (t == P_WPE) span = (size_t)TT * TINY.n_embd;                /* positions in use */
        size_t idx[7];
        idx[6] = 0;
        for (size_t i = 0; i < span; i++) if (fabsf(grads[off[t] + i]) > fabsf(grads[off[t] + idx[6]])) idx[6] = i;
        for (int k = 0; k < 6; k++) idx[k] = rng_next(&rng) % span;
        ErrStat e = {0};
        for (int k = 0; k < 7; k++)
            err_add(&e, grads[off[t] + idx[k]], central_diff(params, off[t] + idx[k], 1e-2f, model_loss, &ctx), 1e-4, 2e-3);
        printf("  %-9s max abs err %.2e  max rel err %.2e  (largest |g| %.2e)\n", gpt2_param_names[t], e.max_abs,
               e.max_rel, fabs(grads[off[t] + idx[6]]));
        CHECK(e.bad == 0, "%s: %d of 7 sampled gradients off (max abs err %.2e)", gpt2_param_names[t], e.bad, e.max_abs);
    }
    /* exactly zero where the loss cannot reach: padded wte rows, positions beyond T */
    int nonzero = 0;
    for (size_t i = (size_t)TINY.vocab_size * TINY.n_embd; i < sz[P_WTE]; i++) nonzero += grads[off[P_WTE] + i] != 0;
    for (size_t i = (size_t)TT * TINY.n_embd; i < sz[P_WPE]; i++) nonzero += grads[off[P_WPE] + i] != 0;
    CHECK(nonzero == 0, "%d gradients nonzero on padded wte rows or unused positions", nonzero);
    free(params); free(grads);
    be->destroy(be);
}

/* grad_scale scales, and a second backward adds. */
static void test_backward_scales_and_accumulates(void) {
    Backend *be = make_backend(&TINY, TB, TT);
    if (!be) { CHECK(0, "no backend"); return; }
    size_t n = be->num_params;
    float *params = fnew(n), *g1 = fnew(n), *g2 = fnew(n);
    rough_params(&TINY, params, 6);
    uint64_t rng = 7;
    int32_t inp[TB * TT], tgt[TB * TT];
    tokens(inp, TB * TT, TINY.vocab_size, &rng);
    tokens(tgt, TB * TT, TINY.vocab_size, &rng);
    Err err;
    float loss;
    BackendRun f = fwd(inp, tgt, &loss), half = {.phase = BACKEND_BACKWARD, .grad_scale = 0.5f};
    CHECK_OK(be->write(be, BACKEND_PARAMS, params, &err), &err);
    CHECK_OK(be->run(be, &f, &err), &err);
    CHECK_OK(be->run(be, &ZERO, &err), &err);
    CHECK_OK(be->run(be, &BACKWARD, &err), &err);
    CHECK_OK(be->read(be, BACKEND_GRADS, 0, g1, &err), &err);
    CHECK_OK(be->run(be, &ZERO, &err), &err);
    CHECK_OK(be->run(be, &half, &err), &err);
    CHECK_OK(be->run(be, &half, &err), &err);
    CHECK_OK(be->read(be, BACKEND_GRADS, 0, g2, &err), &err);
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < n; i++) { worst = worse(worst, fabs(g1[i] - g2[i])); gmax = fmax(gmax, fabs(g1[i])); }
    /* 0.5 is a power of two, so half-gradients are exact; only the sum of two halves rounds */
    CHECK(worst <= 1e-6 * gmax, "backward(0.5) twice differs from backward(1) by %.2e (max |g| %.2e)", worst, gmax);
    free(params); free(g1); free(g2);
    be->destroy(be);
}

/* Misuse gets an error, not a crash. */
static void test_backend_errors(void) {
    Backend *be = make_backend(&TINY, TB, TT);
    if (!be) { CHECK(0, "no backend"); return; }
    Err err;
    float row[60], loss;
    CHECK(be->run(be, &BACKWARD, &err) != 0, "backward before any forward was accepted");
    CHECK(be->read(be, BACKEND_LOGITS, 0, row, &err) != 0, "logits read before any forward");
    int32_t inp[TB * TT] = {0}, tgt[TB * TT] = {0};
    BackendRun f = fwd(inp, tgt, &loss), nt = fwd(inp, NULL, NULL), step0 = adamw(0.0f, 1.0f, 0);
    inp[3] = TINY.vocab_size;
    CHECK(be->run(be, &f, &err) != 0 && strstr(err.msg, "inputs[3]"), "a token id >= V was accepted");
    inp[3] = 0;
    tgt[5] = -1;
    CHECK(be->run(be, &f, &err) != 0 && strstr(err.msg, "targets[5]"), "a negative target was accepted");
    CHECK_OK(be->run(be, &nt, &err), &err);
    CHECK(be->run(be, &BACKWARD, &err) != 0, "backward after a forward without targets was accepted");
    CHECK_OK(be->read(be, BACKEND_LOGITS, (size_t)TB * TT - 1, row, &err), &err);
    CHECK(be->read(be, BACKEND_LOGITS, (size_t)TB * TT, row, &err) != 0, "a logits row outside B*T was read");
    CHECK(be->run(be, &step0, &err) != 0, "update step 0 was accepted");
    BackendOptions o = {.plan = test_plan(&TINY, 1, TINY.max_seq_len + 1)};
    CHECK(cpu_backend_create(&o, &err) == NULL && strstr(err.msg, "max_seq_len"), "T > maxT was accepted");
    be->destroy(be);
}

/* The interface's phases and arrays by plan kind (backend_runs, backend_array_len): what a plan has not, or what is
   read only, is refused; what is written reads back; the squared norm's ranges add up to the whole. */
static void test_backend_interface(void) {
    Backend *tb = make_backend(&TINY, TB, TT);
    BackendOptions fo = {.plan = test_plan_shared(&TINY, STEP_FORWARD, TB, TT, 0)};
    Err err;
    Backend *fb = cpu_backend_create(&fo, &err);
    if (!tb || !fb) { CHECK(0, "no backend"); if (tb) tb->destroy(tb); if (fb) fb->destroy(fb); return; }
    size_t n = tb->num_params;
    float *p = fnew(n), *q = fnew(n), *m = fnew(n), *v = fnew(n);
    rough_params(&TINY, p, 8);
    for (size_t i = 0; i < n; i++) { m[i] = 0.5f * p[i]; v[i] = p[i] * p[i]; }
    CHECK_OK(tb->write(tb, BACKEND_PARAMS, p, &err) || tb->write(tb, BACKEND_ADAM_M, m, &err) ||
             tb->write(tb, BACKEND_ADAM_V, v, &err), &err);
    CHECK_OK(tb->read(tb, BACKEND_ADAM_V, 0, q, &err), &err);
    CHECK(!memcmp(q, v, n * sizeof *q), "AdamW v read back is not what was written");
    CHECK_OK(tb->read(tb, BACKEND_ADAM_M, 0, q, &err), &err);
    CHECK(!memcmp(q, m, n * sizeof *q), "AdamW m read back is not what was written");
    CHECK(tb->write(tb, BACKEND_GRADS, p, &err) != 0 && strstr(err.msg, "read only"), "the gradients were written");
    CHECK(tb->write(tb, BACKEND_LOGITS, p, &err) != 0, "the logits were written");
    CHECK(tb->read(tb, BACKEND_PARAMS, 1, q, &err) != 0, "a row of the parameters other than 0 was read");
    /* a forward plan: parameters, logits and losses; no gradients, optimizer state or backward */
    CHECK(backend_runs(fb, BACKEND_FORWARD) && !backend_runs(fb, BACKEND_BACKWARD) && !backend_runs(fb, BACKEND_UPDATE) &&
          !backend_runs(fb, BACKEND_DECODE) && !backend_runs(tb, BACKEND_DECODE) && backend_runs(tb, BACKEND_UPDATE),
          "backend_runs: the phases of a forward and a training plan");
    CHECK(backend_array_len(fb, BACKEND_GRADS) == 0 && backend_array_len(fb, BACKEND_ADAM_M) == 0 &&
          backend_array_len(fb, BACKEND_LOSSES) == (size_t)TB * TT && backend_array_len(tb, BACKEND_ADAM_V) == n &&
          backend_array_len(tb, BACKEND_LOGITS) == (size_t)TINY.vocab_size, "backend_array_len");
    CHECK(fb->read(fb, BACKEND_GRADS, 0, q, &err) != 0 && strstr(err.msg, "keeps no gradients"), "a forward plan's gradients were read");
    CHECK(fb->run(fb, &BACKWARD, &err) != 0 && strstr(err.msg, "has no backward"), "a forward plan ran a backward");
    CHECK(fb->run(fb, &ZERO, &err) != 0, "a forward plan zeroed gradients");
    CHECK(fb->device_array(fb, BACKEND_GRADS) == NULL && fb->make_comm == NULL, "a forward plan offers gradients to ranks");
    /* the same weights and inputs: the forward plan's losses are the training plan's */
    CHECK_OK(fb->write(fb, BACKEND_PARAMS, p, &err), &err);
    CHECK_OK(fb->read(fb, BACKEND_PARAMS, 0, q, &err), &err);
    CHECK(!memcmp(q, p, n * sizeof *q), "parameters read back are not what was written");
    uint64_t rng = 12;
    int32_t inp[TB * TT], tgt[TB * TT];
    tokens(inp, TB * TT, TINY.vocab_size, &rng);
    tokens(tgt, TB * TT, TINY.vocab_size, &rng);
    float lt, lf, losses_t[TB * TT], losses_f[TB * TT];
    BackendRun ft = fwd(inp, tgt, &lt), ff = fwd(inp, tgt, &lf);
    CHECK_OK(tb->run(tb, &ft, &err) || fb->run(fb, &ff, &err) || tb->read(tb, BACKEND_LOSSES, 0, losses_t, &err) ||
             fb->read(fb, BACKEND_LOSSES, 0, losses_f, &err), &err);
    double mean = 0;
    for (int i = 0; i < TB * TT; i++) mean += losses_f[i];
    CHECK(lt == lf && !memcmp(losses_t, losses_f, sizeof losses_t) && fabs(mean / (TB * TT) - lf) < 1e-5,
          "the losses of the two plans differ, or their mean is not the loss");
    /* the squared norm over two ranges adds up to the whole's */
    CHECK_OK(tb->run(tb, &ZERO, &err) || tb->run(tb, &BACKWARD, &err), &err);
    double whole, lo, hi;
    size_t cut = n / 3;
    BackendRun all = {.phase = BACKEND_GRAD_SUMSQ, .count = n, .sumsq = &whole},
               first = {.phase = BACKEND_GRAD_SUMSQ, .count = cut, .sumsq = &lo},
               rest = {.phase = BACKEND_GRAD_SUMSQ, .offset = cut, .count = n - cut, .sumsq = &hi},
               outside = {.phase = BACKEND_GRAD_SUMSQ, .offset = cut, .count = n, .sumsq = &hi};
    float norm;
    CHECK_OK(tb->run(tb, &all, &err) || tb->run(tb, &first, &err) || tb->run(tb, &rest, &err) ||
             backend_grad_norm(tb, &norm, &err), &err);
    CHECK(whole > 0 && fabs(lo + hi - whole) <= 1e-9 * whole && norm == (float)sqrt(whole),
          "sum of squares %.9g + %.9g, whole %.9g, norm %.9g", lo, hi, whole, norm);
    CHECK(tb->run(tb, &outside, &err) != 0, "a gradient range past the parameters was accepted");
    free(p); free(q); free(m); free(v);
    fb->destroy(fb);
    tb->destroy(tb);
}

/* ---------------------------------------------------------------------------------------------------- */
/* (c) determinism, (e) padded rows */

static const GPT2Shape MID = GPT2_SHAPE(32, 300, 384, 2, 4, 64);

/* Three AdamW steps on a fixed batch with `threads` OpenMP threads; returns params, losses and norms. */
static void train_steps(int threads, float *params_out, float losses[3], float norms[3]) {
    int prev = omp_get_max_threads();
    omp_set_num_threads(threads);
    Backend *be = make_backend(&MID, 2, 32);
    float *params = fnew(be->num_params);
    gpt2_init_params(&MID, params, 42);
    uint64_t rng = 3;
    int32_t inp[64], tgt[64];
    tokens(inp, 64, MID.vocab_size, &rng);
    tokens(tgt, 64, MID.vocab_size, &rng);
    Err err;
    CHECK_OK(be->write(be, BACKEND_PARAMS, params, &err), &err);
    for (int s = 0; s < 3; s++) {
        CHECK_OK(be->run(be, &ZERO, &err), &err);
        BackendRun f = fwd(inp, tgt, &losses[s]);
        CHECK_OK(be->run(be, &f, &err), &err);
        CHECK_OK(be->run(be, &BACKWARD, &err), &err);
        CHECK_OK(backend_grad_norm(be, &norms[s], &err), &err);
        BackendRun update = adamw(0.1f, norms[s] > 1.0f ? 1.0f / norms[s] : 1.0f, s + 1);
        CHECK_OK(be->run(be, &update, &err), &err);
    }
    CHECK_OK(be->read(be, BACKEND_PARAMS, 0, params_out, &err), &err);
    free(params);
    be->destroy(be);
    omp_set_num_threads(prev);
}

static void test_determinism(void) {
    size_t sz[NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(&MID, sz, NULL);
    float *p1 = fnew(n), *p2 = fnew(n), *p3 = fnew(n);
    float l1[3], l2[3], l3[3], n1[3], n2[3], n3[3];
    train_steps(2, p1, l1, n1);
    train_steps(2, p2, l2, n2);
    train_steps(3, p3, l3, n3);   /* another thread count: work splits differently, sums must not */
    printf("  losses %.6f %.6f %.6f, grad norms %.4f %.4f %.4f\n", l1[0], l1[1], l1[2], n1[0], n1[1], n1[2]);
    CHECK(memcmp(p1, p2, n * sizeof(float)) == 0 && memcmp(l1, l2, sizeof l1) == 0 && memcmp(n1, n2, sizeof n1) == 0,
          "two identical runs differ");
    CHECK(memcmp(p1, p3, n * sizeof(float)) == 0 && memcmp(l1, l3, sizeof l1) == 0 && memcmp(n1, n3, sizeof n1) == 0,
          "2 and 3 threads give different bits");
    CHECK(l1[2] < l1[0], "loss did not go down on a fixed batch: %.6f -> %.6f", l1[0], l1[2]);
    /* (e) padded wte rows are exactly zero after the updates */
    int nonzero = 0;
    for (size_t i = (size_t)MID.vocab_size * MID.n_embd; i < sz[P_WTE]; i++) nonzero += p1[i] != 0.0f;
    CHECK(nonzero == 0, "%d entries of the padded wte rows are nonzero after 3 updates", nonzero);
    free(p1); free(p2); free(p3);
}

/* (d) AdamW against the formula in fp64, three steps with weight decay and a gradient scale. A handful of
   fp32 operations per step: 1e-6 relative is ~10 ulps. */
static void test_adamw(void) {
    float p[4] = {0.5f, -1.25f, 3.0f, 0.0f}, m[4] = {0}, v[4] = {0};
    double pd[4] = {0.5, -1.25, 3.0, 0.0}, md[4] = {0}, vd[4] = {0};
    const float g[3][4] = {{0.1f, -2.0f, 1e-3f, 0.7f}, {-0.3f, 1.5f, 2e-3f, 0.0f}, {0.2f, 0.4f, -1e-3f, -0.7f}};
    double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
    double worst = 0;
    for (int s = 1; s <= 3; s++) {
        cpu_adamw(p, g[s - 1], m, v, 4, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)gs, s);
        for (int i = 0; i < 4; i++) {
            double gg = (double)g[s - 1][i] * gs;
            md[i] = b1 * md[i] + (1 - b1) * gg;
            vd[i] = b2 * vd[i] + (1 - b2) * gg * gg;
            double mh = md[i] / (1 - pow(b1, s)), vh = vd[i] / (1 - pow(b2, s));
            pd[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pd[i]);
            worst = worse(worst, fabs(p[i] - pd[i]) / fmax(fabs(pd[i]), 1e-3));
        }
    }
    printf("  adamw vs fp64: max rel err %.2e\n", worst);
    CHECK(worst < 1e-6, "adamw differs from fp64 by %.2e relative", worst);
}

/* ---------------------------------------------------------------------------------------------------- */
/* (f) the PyTorch golden file; its format is described in tests/reference/README.md */

/* Gradients: PyTorch and we sum in different orders; fp32 reductions over <= 4096 terms err by ~1e-6 of
   the tensor's scale. Tolerance: 1e-4 of the tensor's largest |gradient|, per element. */
static void golden_grads(Backend *be, const Golden *g) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&g->shape, sz, off);
    float *grads = fnew(g->n);
    Err err;
    CHECK_OK(be->read(be, BACKEND_GRADS, 0, grads, &err), &err);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        double scale = 0, worst = 0;
        for (size_t i = 0; i < sz[t]; i++) scale = fmax(scale, fabs(g->grads[off[t] + i]));
        for (size_t i = 0; i < sz[t]; i++) worst = worse(worst, fabs(grads[off[t] + i] - g->grads[off[t] + i]));
        printf("  grad %-9s max abs err %.2e  rel to max|g| %.2e  (max|g| %.2e)\n", gpt2_param_names[t], worst,
               scale > 0 ? worst / scale : 0, scale);
        CHECK(worst <= 1e-4 * scale + 1e-12, "gradient of %s: max abs err %.2e, max|g| %.2e", gpt2_param_names[t], worst, scale);
    }
    free(grads);
}

/* The AdamW steps: losses to 1e-4 absolute (~1.5e-5 relative at ln(1000)); the updates are lr-sized steps whose
   rounding differences are ~1e-6 relative, so the loss curves agree far closer than that. */
static void golden_steps(Backend *be, const Golden *g) {
    GoldenRun r = golden_run_steps(be, g, NULL);
    CHECK(r.ok, "%s", r.why);
    CHECK(r.worst_loss <= 1e-4, "step losses differ by up to %.2e", r.worst_loss);
    CHECK(r.worst_norm <= 1e-4, "grad norms differ by up to %.2e relative", r.worst_norm);
    CHECK(r.worst_final <= 1e-4, "final parameter norms differ by up to %.2e relative", r.worst_final);
}

static void test_golden(void) {
    golden_paths();
    if (!file_exists(golden_path))
        SKIP("%s is absent: generate it where PyTorch is (python3 tests/reference/gpt2_reference.py --out tests/reference) and commit it", golden_path);
    Err err;
    Golden g;
    float *params = NULL;
    char *buf = golden_load(&g, &params, &err);
    if (!buf) { CHECK(0, "%s", err.msg); return; }
    Backend *be = NULL;
    be = make_backend(&g.shape, g.B, g.T);
    if (!be) { CHECK(0, "no backend"); goto out; }
    float loss;
    CHECK_OK(be->write(be, BACKEND_PARAMS, params, &err), &err);
    BackendRun f = fwd(g.inputs, g.targets, &loss);
    CHECK_OK(be->run(be, &f, &err), &err);
    /* logits: O(0.1-1) values from sums of C=64 products; fp32 agrees to ~1e-6, tolerance 2e-5 */
    float *row = fnew(g.shape.vocab_size);
    double lerr = 0;
    for (int b = 0; b < g.logits_B; b++)
        for (int t = 0; t < g.T; t++) {
            CHECK_OK(be->read(be, BACKEND_LOGITS, (size_t)b * g.T + t, row, &err), &err);
            const float *ref = g.logits + ((size_t)b * g.T + t) * g.shape.vocab_size;
            for (int i = 0; i < g.shape.vocab_size; i++) lerr = worse(lerr, fabs(row[i] - ref[i]));
        }
    free(row);
    printf("  logits max abs err %.2e; loss %.7f, reference %.7f\n", lerr, loss, *g.loss);
    CHECK(lerr <= 2e-5, "logits differ by up to %.2e", lerr);
    /* loss ~6.9, a mean of 128 terms: fp32 agrees to ~1e-6; tolerance 1e-5 */
    CHECK(fabs(loss - *g.loss) <= 1e-5, "loss %.7f, reference %.7f", loss, *g.loss);
    CHECK_OK(be->run(be, &ZERO, &err), &err);
    CHECK_OK(be->run(be, &BACKWARD, &err), &err);
    golden_grads(be, &g);
    CHECK_OK(be->write(be, BACKEND_PARAMS, params, &err), &err);   /* the steps start from the initial weights */
    golden_steps(be, &g);
out:
    if (be) be->destroy(be);
    free(params);
    free(buf);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_model_gradients);
    RUN(test_backward_scales_and_accumulates);
    RUN(test_backend_errors);
    RUN(test_backend_interface);
    RUN(test_determinism);
    RUN(test_adamw);
    RUN(test_golden);
    return check_summary();
}
