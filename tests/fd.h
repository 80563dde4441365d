/* fd: what the CPU tests of the reference ops and the model share: random fills, a tracker of the worst error
   of a set of comparisons, and gradients checked against central differences. */
#ifndef GPT2GEN_TEST_FD_H
#define GPT2GEN_TEST_FD_H
#include "common/files.h"
#include "common/rng.h"
#include <math.h>
#include <stddef.h>

static inline void fill_normal(float *p, size_t n, float std, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) p[i] = std * rng_normal(rng);
}

static inline float *fnew(size_t n) { return xcalloc(n, sizeof(float)); }

static inline double dot_d(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Tracks the worst error of a set of comparisons, for one line of report. */
typedef struct { double max_abs, max_rel; int bad; } ErrStat;

/* |got - want| <= atol + rtol * |want|; rel error is reported against max(|want|, atol) */
static inline void err_add(ErrStat *e, double got, double want, double atol, double rtol) {
    double d = fabs(got - want), r = d / fmax(fabs(want), atol);
    if (d > e->max_abs) e->max_abs = d;
    if (r > e->max_rel) e->max_rel = r;
    if (!(d <= atol + rtol * fabs(want))) e->bad++;
}

/* Central difference of f at x[i]; the step actually taken (after fp32 rounding) is the denominator. */
typedef double (*Objective)(void *ctx);
static inline double central_diff(float *x, size_t i, float h, Objective f, void *ctx) {
    float orig = x[i];
    x[i] = orig + h;
    float xp = x[i];
    double fp = f(ctx);
    x[i] = orig - h;
    float xm = x[i];
    double fm = f(ctx);
    x[i] = orig;
    return (fp - fm) / ((double)xp - (double)xm);
}

/* Checks grad[i] against central differences of f for every i < n. */
static inline void fd_all(ErrStat *e, float *x, const float *grad, size_t n, float h, Objective f, void *ctx,
                   double atol, double rtol) {
    for (size_t i = 0; i < n; i++) err_add(e, grad[i], central_diff(x, i, h, f, ctx), atol, rtol);
}
#endif
