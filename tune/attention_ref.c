/* attention_ref: fp64 causal attention per head (see attention_ref.h). */
#include "tune/attention_ref.h"
#include "common/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int head_size(const AttShape *s) { return s->C / s->NH; }
/* element d of token t's part (0: q, 1: k, 2: v) for query head h: k and v those of its key/value head */
static double q_at(const AttShape *s, const float *x, int part, int b, int t, int h, int d) {
    const int HS = head_size(s), W = s->C + 2 * s->NKV * HS, j = h / (s->NH / s->NKV);
    const int col = part == 0 ? h * HS : part == 1 ? s->C + j * HS : s->C + (s->NKV + j) * HS;
    return x[((size_t)b * s->T + t) * W + col + d];
}

void attention_ref_head(const AttShape *s, const float *qkv, const float *dout, int b, int h, double *out, double *lse,
                        double *dq, double *dk, double *dv) {
    const int T = s->T, HS = head_size(s);
    const double scale = 1.0 / sqrt((double)HS);
    double *p = xcalloc((size_t)T, sizeof(double)), *dp = xcalloc((size_t)T, sizeof(double));
    double *o = xcalloc((size_t)HS, sizeof(double));
    if (dq) memset(dq, 0, (size_t)T * HS * sizeof(double));
    if (dk) memset(dk, 0, (size_t)T * HS * sizeof(double));
    if (dv) memset(dv, 0, (size_t)T * HS * sizeof(double));
    for (int t = 0; t < T; t++) {
        double m = -INFINITY;
        for (int j = 0; j <= t; j++) {
            double a = 0;
            for (int d = 0; d < HS; d++) a += q_at(s, qkv, 0, b, t, h, d) * q_at(s, qkv, 1, b, j, h, d);
            p[j] = a * scale;
            if (p[j] > m) m = p[j];
        }
        double z = 0;
        for (int j = 0; j <= t; j++) z += exp(p[j] - m);
        const double l = m + log(z);
        for (int j = 0; j <= t; j++) p[j] = exp(p[j] - l);
        memset(o, 0, (size_t)HS * sizeof(double));
        for (int j = 0; j <= t; j++)
            for (int d = 0; d < HS; d++) o[d] += p[j] * q_at(s, qkv, 2, b, j, h, d);
        if (out) memcpy(out + (size_t)t * HS, o, (size_t)HS * sizeof(double));
        if (lse) lse[t] = l;
        if (!dout) continue;
        /* dp_j = dout_t . v_j; D = sum_j p_j dp_j; ds_j = p_j (dp_j - D) */
        const float *dy = dout + ((size_t)b * T + t) * s->C + (size_t)h * HS;
        double D = 0;
        for (int j = 0; j <= t; j++) {
            double a = 0;
            for (int d = 0; d < HS; d++) a += dy[d] * q_at(s, qkv, 2, b, j, h, d);
            dp[j] = a;
            D += p[j] * a;
        }
        for (int j = 0; j <= t; j++) {
            const double ds = p[j] * (dp[j] - D) * scale;
            for (int d = 0; d < HS; d++) {
                if (dq) dq[(size_t)t * HS + d] += ds * q_at(s, qkv, 1, b, j, h, d);
                if (dk) dk[(size_t)j * HS + d] += ds * q_at(s, qkv, 0, b, t, h, d);
                if (dv) dv[(size_t)j * HS + d] += p[j] * dy[d];
            }
        }
    }
    free(p); free(dp); free(o);
}

/* max |got - ref| / max |ref| over one head's slice; got is strided (row stride ld, T rows of HS) */
static double head_err(const float *got, size_t ld, const double *ref, int T, int HS) {
    double num = 0, den = 0;
    for (int t = 0; t < T; t++)
        for (int d = 0; d < HS; d++) {
            double r = ref[(size_t)t * HS + d], g = got[(size_t)t * ld + d];
            if (!(fabs(g - r) <= num)) num = isnan(g) ? INFINITY : fmax(num, fabs(g - r));
            den = fmax(den, fabs(r));
        }
    return den > 0 ? num / den : num;
}

/* the worst of err and the error of got (row stride ld) against ref */
static void worse(double *err, const float *got, size_t ld, const double *ref, int T, int HS) {
    *err = fmax(*err, head_err(got, ld, ref, T, HS));
}

void attention_ref_compare(const AttShape *s, const float *qkv, const float *dout, int n, const float *out,
                           const float *stats, const float *dqkv, AttErr *e) {
    const int T = s->T, C = s->C, NH = s->NH, NKV = s->NKV, HS = head_size(s), G = NH / NKV, total = s->B * NKV;
    const size_t W = (size_t)C + 2 * (size_t)NKV * HS, th = (size_t)T * HS;
    memset(e, 0, sizeof *e);
    double *ro = xcalloc(th, sizeof(double)), *rl = xcalloc((size_t)T, sizeof(double)), *rq = xcalloc(th, sizeof(double));
    double *rk = xcalloc(th, sizeof(double)), *rv = xcalloc(th, sizeof(double));
    double *sk = xcalloc(th, sizeof(double)), *sv = xcalloc(th, sizeof(double));   /* the group's sums */
    n = (n + G - 1) / G;   /* groups */
    if (n > total) n = total;
    for (int i = 0; i < n; i++) {
        int idx = n == 1 ? 0 : (int)((long long)i * (total - 1) / (n - 1));   /* first, last, spread between */
        int b = idx / NKV, j = idx % NKV;
        memset(sk, 0, th * sizeof(double));
        memset(sv, 0, th * sizeof(double));
        const float *row = dqkv ? dqkv + (size_t)b * T * W : NULL;
        for (int h = j * G; h < (j + 1) * G; h++) {
            attention_ref_head(s, qkv, dqkv ? dout : NULL, b, h, ro, rl, rq, rk, rv);
            if (out) worse(&e->out, out + (size_t)b * T * C + (size_t)h * HS, (size_t)C, ro, T, HS);
            if (stats) worse(&e->lse, stats + ((size_t)b * NH + h) * T, 1, rl, T, 1);
            if (!dqkv) continue;
            worse(&e->dq, row + (size_t)h * HS, W, rq, T, HS);
            for (size_t k = 0; k < th; k++) sk[k] += rk[k], sv[k] += rv[k];
        }
        if (!dqkv) continue;
        worse(&e->dk, row + C + (size_t)j * HS, W, sk, T, HS);
        worse(&e->dv, row + C + (size_t)(NKV + j) * HS, W, sv, T, HS);
    }
    free(ro); free(rl); free(rq); free(rk); free(rv); free(sk); free(sv);
}
