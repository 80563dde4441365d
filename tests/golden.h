/* golden: the PyTorch golden file (tests/reference/golden_tiny.bin, format in tests/reference/README.md) and the
   10 AdamW steps it records, for any backend. Used by test_cpu_model (the CPU reference) and test_gpu (the CUDA
   backend, fp32, bf16 and fp16). Header-only: each test program includes it once. */
#ifndef GPT2GEN_TESTS_GOLDEN_H
#define GPT2GEN_TESTS_GOLDEN_H
#include <math.h>
#include "common/files.h"
#include <stdio.h>
#include <stdlib.h>
#include "runtime/backend.h"
#include "runtime/checkpoint.h"
#include "runtime/train/loss_scale.h"
#include "tests/check.h"   /* worse() */

/* The folder holding golden_tiny.bin and tiny_init.bin: tests/reference, or $GPT2GEN_REFERENCE_DIR. */
static char golden_path[1024], golden_init[1024];

static void golden_paths(void) {
    const char *dir = getenv("GPT2GEN_REFERENCE_DIR");
    if (!dir || !*dir) dir = "tests/reference";
    snprintf(golden_path, sizeof golden_path, "%s/golden_tiny.bin", dir);
    snprintf(golden_init, sizeof golden_init, "%s/tiny_init.bin", dir);
}
enum { GOLDEN_MAGIC = 20261130, GOLDEN_VERSION = 1 };

/* the golden file is GPT-2's: its sixteen tensors (common/gpt2.h), a final norm each */
enum { GOLDEN_TENSORS = P_LNFB + 1 };

typedef struct {
    GPT2Shape shape;
    int B, T, steps, logits_B;
    size_t n;
    const int32_t *inputs, *targets;
    const float *logits, *loss, *grads, *losses, *lrs, *norms, *hparams, *final_norms;
} Golden;

static int golden_parse(const char *buf, size_t len, Golden *g, Err *err) {
    const int32_t *h = (const int32_t *)buf;
    if (len < 1024) return err_set(err, "%s: %zu bytes, shorter than its 1024-byte header", golden_path, len);
    if (h[0] != GOLDEN_MAGIC || h[1] != GOLDEN_VERSION)
        return err_set(err, "%s: magic %d version %d, expected %d version %d", golden_path, h[0], h[1], GOLDEN_MAGIC, GOLDEN_VERSION);
    g->shape = gpt2_shape(h[2], h[3], h[7], h[4], h[5], h[6]);
    g->B = h[8]; g->T = h[9]; g->steps = h[10]; g->logits_B = h[11];
    size_t sz[NUM_PARAM_TENSORS];
    g->n = gpt2_param_sizes(&g->shape, sz, NULL);
    if ((size_t)(uint32_t)h[12] != g->n) return err_set(err, "%s: header says %d parameters, the shape gives %zu", golden_path, h[12], g->n);
    size_t BT = (size_t)g->B * g->T;
    size_t want = 1024 + 4 * (2 * BT + (size_t)g->logits_B * g->T * g->shape.vocab_size + 1 + g->n + 3 * (size_t)g->steps + 8 + GOLDEN_TENSORS);
    if (len != want) return err_set(err, "%s: %zu bytes, expected %zu for its header", golden_path, len, want);
    const char *p = buf + 1024;
    g->inputs = (const int32_t *)p; p += 4 * BT;
    g->targets = (const int32_t *)p; p += 4 * BT;
    g->logits = (const float *)p; p += 4 * (size_t)g->logits_B * g->T * g->shape.vocab_size;
    g->loss = (const float *)p; p += 4;
    g->grads = (const float *)p; p += 4 * g->n;
    g->losses = (const float *)p; p += 4 * (size_t)g->steps;
    g->lrs = (const float *)p; p += 4 * (size_t)g->steps;
    g->norms = (const float *)p; p += 4 * (size_t)g->steps;
    g->hparams = (const float *)p; p += 4 * 8;
    g->final_norms = (const float *)p;
    return 0;
}


static double golden_sumsq(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

/* The L2 norm the golden file records for tensor t: for qkvb, of the q and v parts only (the k bias cannot
   change any output, so Adam moves it by amplified rounding noise; see tests/reference/README.md). */
static double final_norm(const GPT2Shape *s, int t, const float *x, size_t n) {
    if (t != P_QKVB) return sqrt(golden_sumsq(x, n));
    size_t C = s->n_embd;
    double sq = 0;
    for (int l = 0; l < s->n_layer; l++) {
        const float *b = x + (size_t)l * 3 * C;
        sq += golden_sumsq(b, C) + golden_sumsq(b + 2 * C, C);
    }
    return sqrt(sq);
}

/* Reads the golden file and the initial weights (*params, malloc'd). Returns the file's buffer (which g points
   into; the caller frees it), or NULL with err. */
static char *golden_load(Golden *g, float **params, Err *err) {
    golden_paths();
    size_t len;
    char *buf = read_file(golden_path, &len, err);
    if (!buf) return NULL;
    if (golden_parse(buf, len, g, err)) { free(buf); return NULL; }
    *params = xcalloc(g->n, sizeof(float));
    if (checkpoint_load(golden_init, &g->shape, *params, err)) { free(buf); free(*params); *params = NULL; return NULL; }
    return buf;
}

typedef struct { int ok; char why[4200]; double worst_loss, worst_norm, worst_final; int skips; } GoldenRun;

/* The golden file's AdamW steps on its batch, clipping the global norm at hparams[4], from the weights the
   backend holds. Prints each step beside the reference; returns the worst differences (norms relative).
   With a loss scaler (fp16), the loss gradient is scaled by its scale and the gradients unscaled in the norm
   and the update, as the training loop does; the golden file has no skipped steps, so a step that overflows
   is done again at the halved scale (r.skips counts them, at most 8). */
static GoldenRun golden_run_steps(Backend *be, const Golden *g, LossScaler *ls) {
    GoldenRun r = {1, "", 0, 0, 0, 0};
    Err err;
    float b1 = g->hparams[0], b2 = g->hparams[1], eps = g->hparams[2], wd = g->hparams[3], clip = g->hparams[4];
    for (int s = 0; s < g->steps; s++) {
        float loss, scaled, S = ls ? ls->scale : 1.0f;
        BackendRun zero = {.phase = BACKEND_ZERO_GRADS}, back = {.phase = BACKEND_BACKWARD, .grad_scale = S},
                   fwd = {.phase = BACKEND_FORWARD, .inputs = g->inputs, .targets = g->targets, .loss = &loss};
        if (be->run(be, &zero, &err) || be->run(be, &fwd, &err) || be->run(be, &back, &err) ||
            backend_grad_norm(be, &scaled, &err)) {
            r.ok = 0;
            snprintf(r.why, sizeof r.why, "step %d: %s", s + 1, err.msg);
            return r;
        }
        float norm = scaled / S;
        LossScaleVerdict v = ls ? loss_scale_after(ls, scaled) : LOSS_SCALE_APPLY;
        if (v == LOSS_SCALE_SKIP && r.skips < 8) {
            printf("  step %2d  overflow at loss scale %.0f: again at %.0f\n", s + 1, S, ls->scale);
            r.skips++;
            s--;
            continue;
        }
        BackendRun update = {.phase = BACKEND_UPDATE, .adamw = {g->lrs[s], b1, b2, eps, wd},
                             .grad_scale = (norm > clip ? clip / norm : 1.0f) / S, .step = s + 1};
        if (v != LOSS_SCALE_APPLY || be->run(be, &update, &err)) {
            r.ok = 0;
            snprintf(r.why, sizeof r.why, "step %d: %s", s + 1, v != LOSS_SCALE_APPLY ? "the gradient norm is not finite" : err.msg);
            return r;
        }
        r.worst_loss = worse(r.worst_loss, fabs(loss - g->losses[s]));
        r.worst_norm = worse(r.worst_norm, fabs(norm - g->norms[s]) / g->norms[s]);
        printf("  step %2d  loss %.6f (ref %.6f)  grad norm %.6f (ref %.6f)\n", s + 1, loss, g->losses[s], norm, g->norms[s]);
    }
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&g->shape, sz, off);
    float *params = xcalloc(g->n, sizeof(float));
    if (be->read(be, BACKEND_PARAMS, 0, params, &err)) {
        r.ok = 0;
        snprintf(r.why, sizeof r.why, "%s", err.msg);
        free(params);
        return r;
    }
    for (int t = 0; t < GOLDEN_TENSORS; t++)
        r.worst_final = worse(r.worst_final, fabs(final_norm(&g->shape, t, params + off[t], sz[t]) - g->final_norms[t]) /
                                                fmax(g->final_norms[t], 1e-12));
    printf("  final per-tensor L2 norms: max rel err %.2e\n", r.worst_final);
    free(params);
    return r;
}
#endif
