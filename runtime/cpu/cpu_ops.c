/* cpu_ops: the fp32 reference ops (see cpu_ops.h for the conventions).
 *
 * Determinism: every parallel loop splits work over outputs (rows, columns, heads, channels); each output
 * element is summed by one thread, in index order. Results therefore do not depend on the thread count. */
#include "runtime/cpu/cpu_ops.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/err.h"

#define LN_EPS 1e-5f

static int imin(int a, int b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------------- */
/* Matrix multiply core: Cm[rows,cols] += A[rows,K] @ Bm[K,cols]. Cm and Bm are row-major and dense; A is
 * read through strides (element (i,k) at A.p[i*A.si + k*A.sk]), so a transposed A costs no copy.
 *
 * Every element is accumulated as c += a[k]*b[k] for k = 0..K-1 in order, starting from its old value,
 * whichever path (register tile or edge) computes it; there is no fused multiply-add (-std=c11 keeps
 * contraction off), so the result does not depend on tiling, threads or the vector width.
 * Cache blocking: tiles of TILE_R x TILE_C outputs are split across threads; inside a tile, K is walked in
 * panels of TILE_K so the A and B panels stay in L2 while all micro-tiles use them.
 * The micro-kernel keeps an MR x NR block of outputs in registers (GCC vector type of NR floats: 12 SSE
 * registers, or 6 AVX ones). On x86-64, gemm_tile is compiled twice, for AVX2 and for the baseline, and
 * the loader picks one: the same arithmetic, element by element (AVX2 without FMA). */
enum { MR = 6, NR = 8, TILE_R = 96, TILE_C = 64, TILE_K = 256 };
typedef float vnr __attribute__((vector_size(NR * sizeof(float))));

typedef struct { const float *p; size_t si, sk; } Strided;   /* A(i,k) = p[i*si + k*sk] */

/* MR = 6 rows, written out so that the six accumulators live in registers. Vectors move through memcpy
   (unaligned, no aliasing trouble); macros, as passing 32-byte vectors by value is not portable ABI. */
#define LOADV(v, ptr) memcpy(&(v), (ptr), sizeof(vnr))
#define STOREV(ptr, v) memcpy((ptr), &(v), sizeof(vnr))

#define GEMM_UNCHECKED __attribute__((no_sanitize("address", "undefined")))   /* see gemm_tile */
static inline __attribute__((always_inline)) GEMM_UNCHECKED void micro_full(float *Cm, Strided A, const float *Bm, int cols,
                                                              int i, int j, int k0, int k1) {
    float *c = Cm + (size_t)i * cols + j;
    size_t si = A.si, ld = (size_t)cols;
    vnr c0, c1, c2, c3, c4, c5, b;
    LOADV(c0, c); LOADV(c1, c + ld); LOADV(c2, c + 2 * ld); LOADV(c3, c + 3 * ld); LOADV(c4, c + 4 * ld); LOADV(c5, c + 5 * ld);
    const float *a = A.p + (size_t)i * si;
    for (int k = k0; k < k1; k++) {
        LOADV(b, Bm + (size_t)k * cols + j);
        const float *ak = a + (size_t)k * A.sk;
        c0 += ak[0] * b;      c1 += ak[si] * b;     c2 += ak[2 * si] * b;
        c3 += ak[3 * si] * b; c4 += ak[4 * si] * b; c5 += ak[5 * si] * b;
    }
    STOREV(c, c0); STOREV(c + ld, c1); STOREV(c + 2 * ld, c2); STOREV(c + 3 * ld, c3); STOREV(c + 4 * ld, c4); STOREV(c + 5 * ld, c5);
}

/* The ragged edge of a tile: same arithmetic, one element at a time. */
static inline __attribute__((always_inline)) GEMM_UNCHECKED void micro_edge(float *Cm, Strided A, const float *Bm, int cols,
                                                              int i, int j, int mr, int nr, int k0, int k1) {
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) {
            float acc = Cm[(size_t)(i + r) * cols + j + c];
            for (int k = k0; k < k1; k++) acc += A.p[(i + r) * A.si + k * A.sk] * Bm[(size_t)k * cols + j + c];
            Cm[(size_t)(i + r) * cols + j + c] = acc;
        }
}

/* `make sanitize` leaves this loop and its two micro-kernels unchecked (GEMM_UNCHECKED): they are four fifths of a
   CPU training step there, and checking every load and pointer step made the sanitized suite's training 4 times
   slower. Their indices are the tile bounds gemm_acc gives them, and tests/test_cpu_ops.c holds them against a
   naive product at ragged shapes; everything around them stays checked. */
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
GEMM_UNCHECKED static void gemm_tile(float *Cm, Strided A, const float *Bm, int rows, int K, int cols, int i0, int j0) {
    int i1 = imin(i0 + TILE_R, rows), j1 = imin(j0 + TILE_C, cols);
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        int k1 = imin(k0 + TILE_K, K);
        for (int i = i0; i < i1; i += MR)
            for (int j = j0; j < j1; j += NR) {
                int mr = imin(MR, i1 - i), nr = imin(NR, j1 - j);
                if (mr == MR && nr == NR) micro_full(Cm, A, Bm, cols, i, j, k0, k1);
                else micro_edge(Cm, A, Bm, cols, i, j, mr, nr, k0, k1);
            }
    }
}

static void gemm_acc(float *Cm, Strided A, const float *Bm, int rows, int K, int cols) {
    int tr = (rows + TILE_R - 1) / TILE_R, tc = (cols + TILE_C - 1) / TILE_C;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < tr * tc; t++) gemm_tile(Cm, A, Bm, rows, K, cols, (t / tc) * TILE_R, (t % tc) * TILE_C);
}

/* dst[cols,rows] = src[rows,cols]^T, in blocks so both sides stay in cache. */
static void transpose(float *dst, const float *src, int rows, int cols) {
    enum { TB = 32 };
#pragma omp parallel for schedule(static)
    for (int r0 = 0; r0 < rows; r0 += TB)
        for (int c0 = 0; c0 < cols; c0 += TB)
            for (int r = r0; r < imin(r0 + TB, rows); r++)
                for (int c = c0; c < imin(c0 + TB, cols); c++) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    /* The weight is transposed once (C*OC moves, small next to N*C*OC multiply-adds) so the inner loop
       walks output columns contiguously. */
    float *wt = xmalloc((size_t)C * OC * sizeof(float));
    transpose(wt, weight, OC, C);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * OC;
        if (bias) memcpy(o, bias, (size_t)OC * sizeof(float));
        else memset(o, 0, (size_t)OC * sizeof(float));
    }
    gemm_acc(out, (Strided){inp, (size_t)C, 1}, wt, N, C, OC);
    free(wt);
}

void cpu_matmul_backward_dinp(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    gemm_acc(dinp, (Strided){dout, (size_t)OC, 1}, weight, N, OC, C);   /* dinp[N,C] += dout[N,OC] @ weight[OC,C] */
}

void cpu_matmul_backward_dw(float *dweight, const float *dout, const float *inp, int N, int C, int OC) {
    gemm_acc(dweight, (Strided){dout, 1, (size_t)OC}, inp, OC, N, C);   /* dweight[OC,C] += dout^T @ inp[N,C] */
}

void cpu_bias_backward(float *dbias, const float *dout, int N, int OC) {
    enum { CHUNK = 64 };
#pragma omp parallel for schedule(static)
    for (int o0 = 0; o0 < OC; o0 += CHUNK)
        for (int n = 0; n < N; n++)
            for (int o = o0; o < imin(o0 + CHUNK, OC); o++) dbias[o] += dout[(size_t)n * OC + o];
}

void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC) {
    cpu_matmul_backward_dinp(dinp, dout, weight, N, C, OC);
    cpu_matmul_backward_dw(dweight, dout, inp, N, C, OC);
    if (dbias) cpu_bias_backward(dbias, dout, N, OC);
}

/* ---------------------------------------------------------------------------------------------------- */
void cpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T, int C) {
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *e = wte + (size_t)inp[bt] * C, *p = wpe ? wpe + (size_t)(bt % T) * C : NULL;   /* none: RoPE */
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + (p ? p[c] : 0.0f);
    }
}

void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C) {
    /* Several positions may hold one token, so dwte is split by channel (each thread owns a slice of
       every row), and positions are visited in order. */
    enum { CHUNK = 16 };
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += CHUNK)
        for (int bt = 0; bt < B * T; bt++) {
            float *d = dwte + (size_t)inp[bt] * C;
            const float *g = dout + (size_t)bt * C;
            for (int c = c0; c < imin(c0 + CHUNK, C); c++) d[c] += g[c];
        }
    if (!dwpe) return;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            const float *g = dout + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) dwpe[(size_t)t * C + c] += g[c];
        }
}

/* ---------------------------------------------------------------------------------------------------- */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C) {
    cpu_layernorm_forward_eps(out, mean, rstd, inp, weight, bias, N, C, LN_EPS);
}

void cpu_layernorm_forward_eps(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                               const float *bias, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double s = 0.0, ss = 0.0;      /* row statistics in double: cheap, and a sharper reference */
        for (int c = 0; c < C; c++) s += x[c];
        float m = (float)(s / C);
        for (int c = 0; c < C; c++) { double d = (double)x[c] - m; ss += d * d; }
        float rs = (float)(1.0 / sqrt(ss / C + eps));
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * rs * weight[c] + (bias ? bias[c] : 0.0f);
        mean[n] = m;
        rstd[n] = rs;
    }
}

void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C) {
    /* dinp = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), with dnorm = dout * weight */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
        float m = mean[n], rs = rstd[n];
        double sum_d = 0.0, sum_dx = 0.0;
        for (int c = 0; c < C; c++) {
            float dnorm = g[c] * weight[c];
            sum_d += dnorm;
            sum_dx += (double)dnorm * ((x[c] - m) * rs);
        }
        float mean_d = (float)(sum_d / C), mean_dx = (float)(sum_dx / C);
        float *di = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * rs;
            di[c] += (g[c] * weight[c] - mean_d - xhat * mean_dx) * rs;
        }
    }
    /* weight and bias gradients sum over rows: split by channel, rows in order */
    enum { CHUNK = 16 };
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += CHUNK)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            for (int c = c0; c < imin(c0 + CHUNK, C); c++) {
                dweight[c] += g[c] * ((x[c] - mean[n]) * rstd[n]);
                if (dbias) dbias[c] += g[c];
            }
        }
}

/* ---------------------------------------------------------------------------------------------------- */
/* Grouped-query heads: qkv's rows are q (NH heads) | k (NKV heads) | v (NKV heads), each HS wide; query head h
   reads key/value head h / (NH / NKV). */
static size_t k_at(CpuHeads g, int kvh) { return (size_t)g.NH * g.HS + (size_t)kvh * g.HS; }
static size_t v_at(CpuHeads g, int kvh) { return (size_t)(g.NH + g.NKV) * g.HS + (size_t)kvh * g.HS; }
static size_t qkv_width(CpuHeads g) { return (size_t)(g.NH + 2 * g.NKV) * g.HS; }

void cpu_attention_forward_gqa(float *out, float *preatt, float *att, const float *qkv, CpuHeads g) {
    int B = g.B, T = g.T, NH = g.NH, HS = g.HS, group = g.NH / g.NKV;
    float scale = 1.0f / sqrtf((float)HS);
    size_t W = qkv_width(g), C = (size_t)NH * HS;
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * W + h * HS;
                float *pre = preatt + (((size_t)b * NH + h) * T + t) * T;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * W + k_at(g, h / group);
                    float dot = 0.0f;
                    for (int i = 0; i < HS; i++) dot += q[i] * k[i];
                    pre[t2] = dot * scale;
                    if (pre[t2] > maxv) maxv = pre[t2];
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) { a[t2] = expf(pre[t2] - maxv); sum += a[t2]; }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) { pre[t2] = 0.0f; a[t2] = 0.0f; }   /* masked */
                float *o = out + ((size_t)b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * W + v_at(g, h / group);
                    for (int i = 0; i < HS; i++) o[i] += a[t2] * v[i];
                }
            }
}

void cpu_attention_forward(float *out, float *preatt, float *att, const float *qkv, int B, int T, int C, int NH) {
    cpu_attention_forward_gqa(out, preatt, att, qkv, (CpuHeads){B, T, NH, NH, C / NH});
}

void cpu_kv_append_gqa(float *kcache, float *vcache, const float *qkv, int pos, CpuHeads g, int maxT) {
    size_t W = qkv_width(g);
    for (int b = 0; b < g.B; b++)
        for (int t = 0; t < g.T; t++)
            for (int h = 0; h < g.NKV; h++) {
                const float *row = qkv + ((size_t)b * g.T + t) * W;
                size_t at = (((size_t)b * g.NKV + h) * maxT + pos + t) * g.HS;
                memcpy(kcache + at, row + k_at(g, h), (size_t)g.HS * sizeof(float));
                memcpy(vcache + at, row + v_at(g, h), (size_t)g.HS * sizeof(float));
            }
}

void cpu_kv_append(float *kcache, float *vcache, const float *qkv, int pos, int B, int T, int C, int NH, int maxT) {
    cpu_kv_append_gqa(kcache, vcache, qkv, pos, (CpuHeads){B, T, NH, NH, C / NH}, maxT);
}

void cpu_attention_cached_gqa(float *out, const float *qkv, const float *kcache, const float *vcache, int pos, CpuHeads g,
                              int maxT) {
    int HS = g.HS, T = g.T, len = pos + T, group = g.NH / g.NKV;
    float scale = 1.0f / sqrtf((float)HS);
    size_t W = qkv_width(g), C = (size_t)g.NH * HS;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < g.B; b++)
        for (int h = 0; h < g.NH; h++) {
            const float *q = qkv + ((size_t)b * T + T - 1) * W + h * HS;
            size_t kv = ((size_t)b * g.NKV + h / group) * maxT * HS;
            const float *kc = kcache + kv, *vc = vcache + kv;
            float *a = xmalloc((size_t)len * sizeof(float)), maxv = -INFINITY, sum = 0.0f;
            for (int t2 = 0; t2 < len; t2++) {
                float dot = 0.0f;
                for (int i = 0; i < HS; i++) dot += q[i] * kc[(size_t)t2 * HS + i];
                a[t2] = dot * scale;
                if (a[t2] > maxv) maxv = a[t2];
            }
            for (int t2 = 0; t2 < len; t2++) { a[t2] = expf(a[t2] - maxv); sum += a[t2]; }
            float inv = 1.0f / sum, *o = out + (size_t)b * C + h * HS;
            for (int i = 0; i < HS; i++) o[i] = 0.0f;
            for (int t2 = 0; t2 < len; t2++)
                for (int i = 0; i < HS; i++) o[i] += a[t2] * inv * vc[(size_t)t2 * HS + i];
            free(a);
        }
}

void cpu_attention_cached(float *out, const float *qkv, const float *kcache, const float *vcache, int pos, int B, int T,
                          int C, int NH, int maxT) {
    cpu_attention_cached_gqa(out, qkv, kcache, vcache, pos, (CpuHeads){B, T, NH, NH, C / NH}, maxT);
}

/* One query head's backward at query t (its row of att; dk, dv of the earlier positions gather into kv head kvh) */
static void attention_backward_row(float *dqkv, float *dp, float *da, const float *g_out, const float *qkv, const float *a,
                                   CpuHeads g, int b, int h, int t) {
    int HS = g.HS, T = g.T, kvh = h / (g.NH / g.NKV);
    float scale = 1.0f / sqrtf((float)HS);
    size_t W = qkv_width(g);
    for (int t2 = 0; t2 <= t; t2++) {   /* out = att @ v */
        const float *v = qkv + ((size_t)b * T + t2) * W + v_at(g, kvh);
        float *dv = dqkv + ((size_t)b * T + t2) * W + v_at(g, kvh);
        float s = 0.0f;
        for (int i = 0; i < HS; i++) { s += g_out[i] * v[i]; dv[i] += a[t2] * g_out[i]; }
        da[t2] = s;
    }
    float dot = 0.0f;   /* softmax: dpre = att * (datt - sum(att * datt)) */
    for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * da[t2];
    for (int t2 = 0; t2 <= t; t2++) dp[t2] = a[t2] * (da[t2] - dot);
    for (int t2 = t + 1; t2 < T; t2++) { da[t2] = 0.0f; dp[t2] = 0.0f; }
    const float *q = qkv + ((size_t)b * T + t) * W + h * HS;   /* pre = scale * q . k */
    float *dq = dqkv + ((size_t)b * T + t) * W + h * HS;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *k = qkv + ((size_t)b * T + t2) * W + k_at(g, kvh);
        float *dk = dqkv + ((size_t)b * T + t2) * W + k_at(g, kvh);
        float d = dp[t2] * scale;
        for (int i = 0; i < HS; i++) { dq[i] += d * k[i]; dk[i] += d * q[i]; }
    }
}

void cpu_attention_backward_gqa(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                                const float *att, CpuHeads g) {
    int group = g.NH / g.NKV, T = g.T;
    /* One (b, kv head) per thread: dk and dv of a position gather from every later query of the group's heads, so
       those stay sequential, in head then query order. */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < g.B; b++)
        for (int kvh = 0; kvh < g.NKV; kvh++)
            for (int h = kvh * group; h < (kvh + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    size_t row = (((size_t)b * g.NH + h) * T + t) * T;
                    attention_backward_row(dqkv, dpreatt + row, datt + row, dout + ((size_t)b * T + t) * g.NH * g.HS + h * g.HS,
                                           qkv, att + row, g, b, h, t);
                }
}

void cpu_attention_backward(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH) {
    cpu_attention_backward_gqa(dqkv, dpreatt, datt, dout, qkv, att, (CpuHeads){B, T, NH, NH, C / NH});
}

/* ---------------------------------------------------------------------------------------------------- */
#define GELU_S 0.7978845608028654f   /* sqrt(2/pi) */

void cpu_gelu_forward(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_S * (x + 0.044715f * x * x * x)));
    }
}

void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float th = tanhf(GELU_S * (x + 0.044715f * x * x * x));
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += local * dout[i];
    }
}

void cpu_residual_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* ---------------------------------------------------------------------------------------------------- */
void cpu_softmax_crossentropy(float *losses, float *dlogits, const float *logits, const int32_t *targets,
                              float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * Vp;
        float maxv = -INFINITY;
        for (int i = 0; i < V; i++) if (l[i] > maxv) maxv = l[i];
        int tgt = targets[n];
        float target_logit = l[tgt];   /* read first: dlogits may be the logits themselves */
        /* V terms of up to 1 summed in double: the normalizer stays exact to fp32 precision. With dlogits,
           the exponentials are kept there, so each is computed once. */
        float *d = dlogits ? dlogits + (size_t)n * Vp : NULL;
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            float e = expf(l[i] - maxv);
            sum += e;
            if (d) d[i] = e;
        }
        losses[n] = (float)(log(sum) - (double)(target_logit - maxv));
        if (!d) continue;
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < V; i++) d[i] = (d[i] * inv - (i == tgt ? 1.0f : 0.0f)) * dloss;
        for (int i = V; i < Vp; i++) d[i] = 0.0f;
    }
}

void cpu_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, float grad_scale, int step) {
    float bc1 = (float)(1.0 - pow(beta1, step)), bc2 = (float)(1.0 - pow(beta2, step));
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}

/* ---------------------------------------------------------------------------------------------------- */
/* the declared kernels the schedule launches as they are, by name (cpu_ops.h, cpu_kernel_find) */
static void kernel_gelu_forward(float *const *a, long long n) { cpu_gelu_forward(a[0], a[1], (size_t)n); }

static const struct { const char *kernel; CpuKernelFn fn; } cpu_kernels[] = {
    {"gelu_forward", kernel_gelu_forward},
};

CpuKernelFn cpu_kernel_find(const char *kernel) {
    for (size_t i = 0; i < sizeof cpu_kernels / sizeof cpu_kernels[0]; i++)
        if (!strcmp(cpu_kernels[i].kernel, kernel)) return cpu_kernels[i].fn;
    return NULL;
}
