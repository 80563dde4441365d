/* cpu_ops_arch: the fp32 reference ops of GPT-2's relatives (docs/model.md, "Architectures"): RMSNorm, QK-norm,
   RoPE, ReLU^2, SwiGLU and the logit soft-cap. The conventions are cpu_ops.h's: work split over rows (or elements),
   each output summed by one thread in index order, row statistics in double. */
#include "runtime/cpu/cpu_ops.h"
#include <math.h>
#include <string.h>

/* one vector of n: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) (returned) */
static float rms_row(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float rs = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = x[i] * rs * w[i];
    return rs;
}

/* its backward: dx = rstd * (g w - xhat * mean(g w xhat)), xhat = x rstd; written (=) or added (+=) into dx, which may
   be g itself (in place: the mean is taken first); dw += g xhat */
static void rms_row_backward(float *dx, const float *g, const float *x, const float *w, float rs, float *dw, int n, int add) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)g[i] * w[i] * (x[i] * rs);
    float m = (float)(s / n);
    for (int i = 0; i < n; i++) {
        float xhat = x[i] * rs, gi = g[i];
        if (dw) dw[i] += gi * xhat;
        float d = (gi * w[i] - xhat * m) * rs;
        dx[i] = add ? dx[i] + d : d;
    }
}

void cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) rstd[n] = rms_row(out + (size_t)n * C, inp + (size_t)n * C, w, C, eps);
}

void cpu_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                          int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        rms_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, w, rstd[n], NULL, C, 1);
    enum { CHUNK = 16 };   /* the weight's gradient sums over rows: split by channel, rows in order */
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += CHUNK)
        for (int n = 0; n < N; n++)
            for (int c = c0; c < c0 + CHUNK && c < C; c++) dw[c] += dout[(size_t)n * C + c] * (inp[(size_t)n * C + c] * rstd[n]);
}

static size_t width(CpuHeads g) { return (size_t)(g.NH + 2 * g.NKV) * g.HS; }

void cpu_qk_norm_forward(float *out, float *rstd, const float *inp, const float *qw, const float *kw, int N, CpuHeads g,
                         float eps) {
    size_t W = width(g);
    int heads = g.NH + g.NKV;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * W;
        float *o = out + (size_t)n * W;
        for (int h = 0; h < heads; h++) {
            float rs = rms_row(o + (size_t)h * g.HS, x + (size_t)h * g.HS, h < g.NH ? qw : kw, g.HS, eps);
            if (rstd) rstd[(size_t)n * heads + h] = rs;
        }
        if (o != x) memcpy(o + (size_t)heads * g.HS, x + (size_t)heads * g.HS, (size_t)g.NKV * g.HS * sizeof(float));
    }
}

void cpu_qk_norm_backward(float *dinout, const float *inp, const float *qw, const float *kw, const float *rstd, float *dqw,
                          float *dkw, int N, CpuHeads g) {
    size_t W = width(g);
    int heads = g.NH + g.NKV, HS = g.HS;
    /* the weights' gradients first (they read d(out), which the input's gradient then overwrites); rows in order */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < 2 * HS; i++) {
        float *dw = i < HS ? dqw : dkw;
        int c = i % HS, h0 = i < HS ? 0 : g.NH, h1 = i < HS ? g.NH : heads;
        for (int n = 0; n < N; n++)
            for (int h = h0; h < h1; h++) {
                size_t at = (size_t)n * W + (size_t)h * HS + c;
                dw[c] += dinout[at] * (inp[at] * rstd[(size_t)n * heads + h]);
            }
    }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < heads; h++) {
            size_t at = (size_t)n * W + (size_t)h * HS;
            rms_row_backward(dinout + at, dinout + at, inp + at, h < g.NH ? qw : kw, rstd[(size_t)n * heads + h], NULL, HS, 0);
        }
}

void cpu_rope(float *qkv, int pos, CpuHeads g, double theta, int dir) {
    size_t W = width(g);
    int half = g.HS / 2, heads = g.NH + g.NKV;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < g.B; b++)
        for (int t = 0; t < g.T; t++) {
            float *row = qkv + ((size_t)b * g.T + t) * W;
            for (int i = 0; i < half; i++) {
                double angle = (double)(pos + t) * pow(theta, -2.0 * i / g.HS);
                float c = (float)cos(angle), s = (float)sin(angle) * (float)dir;
                for (int h = 0; h < heads; h++) {   /* q's heads, then k's */
                    float *x = row + (size_t)h * g.HS, x1 = x[i], x2 = x[i + half];
                    x[i] = x1 * c - x2 * s;
                    x[i + half] = x2 * c + x1 * s;
                }
            }
        }
}

void cpu_relu2_forward(float *out, const float *pre, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = pre[i] > 0 ? pre[i] * pre[i] : 0.0f;
}

void cpu_relu2_backward(float *dinout, const float *pre, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dinout[i] *= pre[i] > 0 ? 2.0f * pre[i] : 0.0f;
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

void cpu_swiglu_forward(float *out, const float *up, const float *gate, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

void cpu_swiglu_backward(float *dinout, float *dgate, const float *up, const float *gate, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float sg = sigmoid(gate[i]), d = dinout[i];
        dgate[i] = d * up[i] * sg * (1.0f + gate[i] * (1.0f - sg));   /* silu'(x) = s(x) (1 + x (1 - s(x))) */
        dinout[i] = d * gate[i] * sg;
    }
}

void cpu_softcap_forward(float *x, size_t n, float cap) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

void cpu_softcap_backward(float *d, const float *capped, size_t n, float cap) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float t = capped[i] / cap;
        d[i] *= 1.0f - t * t;
    }
}
