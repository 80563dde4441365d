/* measure: timing with CUDA events after an L2 flush, and whole training steps (see measure.h). */
#include "tune/measure.h"
#include "runtime/backend.h"
#include "common/clock.h"
#include "common/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int measure_flush_open(MeasureFlush *f, Harness *g, Err *err) {
    memset(f, 0, sizeof *f);
    int l2 = 0;
    cu.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g->dev.dev);
    f->bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
    if (cuda_check(cu.cuMemAlloc(&f->p, f->bytes), "allocating the L2 flush buffer", err)) return -1;
    for (int i = 0; i < 2; i++)
        if (cuda_check(cu.cuEventCreate(&f->e[i], 0), "cuEventCreate", err)) return -1;
    return 0;
}

void measure_flush_close(MeasureFlush *f) {
    if (f->p) cu.cuMemFree(f->p);
    for (int i = 0; i < 2; i++)
        if (f->e[i]) cu.cuEventDestroy(f->e[i]);
    memset(f, 0, sizeof *f);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int measure_median(Harness *g, MeasureFlush *f, MeasureRun run, void *ctx, double *us, Err *err) {
    enum { WARMUP = 2, MIN_REPS = 5, MAX_REPS = 50 };
    double t[MAX_REPS], spent = 0;
    int n = 0;
    for (int i = 0; i < WARMUP; i++)
        if (run(ctx, err)) return -1;
    while (n < MAX_REPS && (n < MIN_REPS || spent < 0.1)) {
        float ms = 0;
        if (cuda_check(cu.cuMemsetD8Async(f->p, (unsigned char)n, f->bytes, g->s), "flushing L2", err) ||
            cuda_check(cu.cuEventRecord(f->e[0], g->s), "cuEventRecord", err) || run(ctx, err) ||
            cuda_check(cu.cuEventRecord(f->e[1], g->s), "cuEventRecord", err) ||
            cuda_check(cu.cuEventSynchronize(f->e[1]), "running the timed work", err) ||
            cuda_check(cu.cuEventElapsedTime(&ms, f->e[0], f->e[1]), "cuEventElapsedTime", err))
            return -1;
        t[n++] = ms * 1000.0;
        spent += ms / 1000.0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    *us = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return 0;
}

/* The one place the tuner creates a backend: plan's CUDA backend on GPU 0. */
static Backend *step_backend(const Plan *plan, const Env *env, Err *err) {
    BackendOptions opt = {plan, 0, 0, 0, NULL, env, NULL};
    return cuda_backend_create(&opt, err);
}

int measure_step_time(const Plan *plan, const Env *env, int steps, double *ms, float losses[3], Err *err) {
    GPT2Shape shape = plan->model;
    int B = plan->step.B, T = plan->step.T;
    Backend *be = step_backend(plan, env, err);
    if (!be) return -1;
    size_t sz[NUM_PARAM_TENSORS];
    size_t np = gpt2_param_sizes(&shape, sz, NULL);
    float *params = xmalloc(np * sizeof(float));
    gpt2_init_params(&shape, params, 1337);
    int32_t *in = xmalloc((size_t)B * T * 4), *tg = xmalloc((size_t)B * T * 4);
    uint64_t seed = 1337;
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_next(&seed) % (uint64_t)shape.vocab_size);
        tg[i] = (int32_t)(rng_next(&seed) % (uint64_t)shape.vocab_size);
    }
    int rc = be->write(be, BACKEND_PARAMS, params, err);
    double t0 = 0;
    float norm = 0;
    for (int s = 0; s < 2 + steps && rc == 0; s++) {
        if (s == 2) t0 = now_seconds();
        float loss = 0;
        BackendRun zero = {.phase = BACKEND_ZERO_GRADS},
                   micro = {.phase = BACKEND_FORWARD_BACKWARD, .inputs = in, .targets = tg, .grad_scale = 1.0f, .loss = &loss},
                   update = {.phase = BACKEND_UPDATE, .adamw = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f}, .step = s + 1};
        rc = be->run(be, &zero, err) || be->run(be, &micro, err) || backend_grad_norm(be, &norm, err);
        update.grad_scale = norm > 1.0f ? 1.0f / norm : 1.0f;
        rc = rc || be->run(be, &update, err);
        if (s < 3) losses[s] = loss;
    }
    if (rc == 0) rc = backend_grad_norm(be, &norm, err);   /* waits for the last update */
    if (rc == 0) *ms = (now_seconds() - t0) * 1000.0 / steps;
    be->destroy(be);
    free(params);
    free(in);
    free(tg);
    return rc;
}

int measure_steps_agree(Precision p, const float a[3], const float b[3], double *worst, double *tol) {
    *tol = p == PREC_FP32 ? 1e-4 : 2e-3;
    *worst = 0;
    for (int i = 0; i < 3; i++) {
        double d = fabs((double)b[i] - a[i]) / fmax(fabs((double)a[i]), 1e-30);
        if (isnan(d) || d > *worst) *worst = d;   /* a NaN, once seen, stays the worst */
    }
    return *worst <= *tol;
}
