// rmsnorm.cu: RMSNorm over the C channels of each of the B*T rows, out = x * rstd * w with rstd = 1/sqrt(mean(x^2) +
// NORM_EPS), and QK-norm, the same over each of a row's q and k heads (HS channels, weights qw and kw: Qwen3's).
//   rmsnorm_forward                 out = RMS(inp); saves rstd (fp32) for the backward
//   fused_residual_rmsnorm_forward  residual = inp1 + inp2, out = RMS(residual)
//   rmsnorm_backward                dinp += RMS'(dout); each block's partial sums of dweight into scratch (BWD_BLOCKS x C)
//   rmsnorm_backward_reduce         dweight += the partials' sum, in a fixed order
//   qk_norm_forward                 out = inp (qkv) with each q and k head normed (and with QK_ROPE rotated), v copied;
//                                   rstd per head (B*T, NH+NKV)
//   qk_norm_backward                dinout from d(out) to d(inp) in place (q and k heads, with QK_ROPE rotated back
//                                   first; v's passes as it is); each block's partials of dqw and dkw into scratch
//                                   (QK_BLOCKS x 2HS)
//   qk_norm_backward_reduce         dqw, dkw += the partials' sums, in a fixed order
// A warp per row (a head); each lane owns the same channels of every row, so the weight-gradient partials stay with the
// lane and every sum runs in a fixed order: the backward gives the same bits on every run.
// The backward: with xhat = x rstd and g = dout, dx = rstd (g w - xhat mean(g w xhat)), dw += g xhat.

constexpr int N_ROWS = B * T;
constexpr int VEC = VEC_C;
constexpr int PACKETS = C / VEC;
constexpr int PER_LANE = (PACKETS + WARP_SIZE - 1) / WARP_SIZE;
typedef Packed<floatX, VEC> xvec;

// Normalizes one row held in registers (zeros past the row) and writes out and rstd.
__device__ __forceinline__ void rms_row(float (&x)[PER_LANE][VEC], floatX *out, float *rstd, const floatX *weight,
                                        int row, int lane) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < PER_LANE; i++)
        for (int k = 0; k < VEC; k++) s += x[i][k] * x[i][k];
    const float r = rsqrtf(warp_sum(s) / C + NORM_EPS);
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= PACKETS) continue;
        const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
        xvec o;
        for (int k = 0; k < VEC; k++) o[k] = from_f<floatX>(x[i][k] * r * to_f(w[k]));
        store_vec<floatX, VEC>(out + (long long)row * C + p * VEC, o);
    }
    if (lane == 0) rstd[row] = r;
}

KERNEL(rmsnorm_forward) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (BLOCK_SIZE / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N_ROWS) return;
    float x[PER_LANE][VEC];
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        const xvec v = p < PACKETS ? load_vec_cs<floatX, VEC>(inp + (long long)row * C + p * VEC) : xvec::zeros();
        for (int k = 0; k < VEC; k++) x[i][k] = to_f(v[k]);
    }
    rms_row(x, out, rstd, weight, row, lane);
}

KERNEL(fused_residual_rmsnorm_forward) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (BLOCK_SIZE / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N_ROWS) return;
    float x[PER_LANE][VEC];
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p < PACKETS) {
            const long long off = (long long)row * C + p * VEC;
            const xvec a = load_vec_cs<floatX, VEC>(inp1 + off);
            const xvec b = load_vec_cs<floatX, VEC>(inp2 + off);
            xvec r;
            // the norm sees the residual as stored (rounded to floatX), like the backward will
            for (int k = 0; k < VEC; k++) { r[k] = from_f<floatX>(to_f(a[k]) + to_f(b[k])); x[i][k] = to_f(r[k]); }
            store_vec<floatX, VEC>(residual + off, r);
        } else {
            for (int k = 0; k < VEC; k++) x[i][k] = 0.0f;
        }
    }
    rms_row(x, out, rstd, weight, row, lane);
}

// BWD_BLOCKS blocks, rows strided over all their warps; block b's dweight partial at scratch[b*C .. b*C + C)
KERNEL(rmsnorm_backward) {
    constexpr int WARPS = BWD_BLOCK_SIZE / WARP_SIZE;
    __shared__ float s_dw[C];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    float dw[PER_LANE][VEC];
#pragma unroll
    for (int i = 0; i < PER_LANE; i++)
        for (int k = 0; k < VEC; k++) dw[i][k] = 0.0f;
    for (int row = blockIdx.x * WARPS + warp; row < N_ROWS; row += BWD_BLOCKS * WARPS) {
        const long long base = (long long)row * C;
        const float r = rstd[row];
        xvec g[PER_LANE], x[PER_LANE];
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < PER_LANE; i++) {
            const int p = lane + i * WARP_SIZE;
            if (p >= PACKETS) continue;
            g[i] = load_vec_cs<floatX, VEC>(dout + base + p * VEC);
            x[i] = load_vec_cs<floatX, VEC>(inp + base + p * VEC);
            const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
            for (int k = 0; k < VEC; k++) s += to_f(g[i][k]) * to_f(w[k]) * (to_f(x[i][k]) * r);
        }
        const float m = warp_sum(s) / C;
#pragma unroll
        for (int i = 0; i < PER_LANE; i++) {
            const int p = lane + i * WARP_SIZE;
            if (p >= PACKETS) continue;
            const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
            xvec d = load_vec<floatX, VEC>(dinp + base + p * VEC);
            for (int k = 0; k < VEC; k++) {
                const float gk = to_f(g[i][k]), xh = to_f(x[i][k]) * r;
                dw[i][k] += gk * xh;
                d[k] = from_f<floatX>(to_f(d[k]) + (gk * to_f(w[k]) - xh * m) * r);
            }
            store_vec<floatX, VEC>(dinp + base + p * VEC, d);
        }
    }
    // the block's partial: the warps' sums added one after the other (fixed order, no atomics)
    for (int w = 0; w < WARPS; w++) {
        if (warp == w) {
#pragma unroll
            for (int i = 0; i < PER_LANE; i++) {
                const int p = lane + i * WARP_SIZE;
                if (p >= PACKETS) continue;
                for (int k = 0; k < VEC; k++) {
                    const int c = p * VEC + k;
                    s_dw[c] = (w == 0 ? 0.0f : s_dw[c]) + dw[i][k];
                }
            }
        }
        __syncthreads();
    }
    for (int c = threadIdx.x; c < C; c += BWD_BLOCK_SIZE) scratch[(long long)blockIdx.x * C + c] = s_dw[c];
}

KERNEL(rmsnorm_backward_reduce) {
    const int c = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int b = 0; b < BWD_BLOCKS; b++) s += scratch[(long long)b * C + c];
    dweight[c] = from_f<floatX>(to_f(dweight[c]) + s);
}

// ---- QK-norm: a warp per row, its q and k heads in turn, lane l owning channels l, l + 32, ... of a head. With RoPE
// (QK_ROPE) the normed q and k are rotated in the same pass, as rope.cu would rotate them after it (the norm's output
// rounded to floatX first, as stored): channel i < HS/2 of a head pairs with i + HS/2, the same lane's channel
// j + HPL/2 (HS a multiple of 64); the row's angles are made once for all its heads. The backward rotates the
// gradient back first, rounded as rope_backward stores it.
constexpr int QK_HEADS = NH + NKV;          // the q and k heads of a row
constexpr int HPL = HS / WARP_SIZE;         // a lane's channels of a head (gen/kernel_rules_arch.c: HS % 32 == 0)
constexpr int PAIRS = QK_ROPE ? HPL / 2 : 0;   // a lane's channel pairs (j, j + PAIRS) that RoPE rotates

// the rotation of a row's heads at its position (dir 1: RoPE, -1: its backward), for a lane's pairs
struct QkRotation {
    float c[PAIRS > 0 ? PAIRS : 1], s[PAIRS > 0 ? PAIRS : 1];
    __device__ __forceinline__ QkRotation(long long row, const int *pos, int lane, float dir) {
        const int t = (int)(row % T);
#pragma unroll
        for (int j = 0; j < PAIRS; j++) {
            rope_sincos(ROPE_AT_POS ? pos[0] + t : t, lane + j * WARP_SIZE, &s[j], &c[j]);
            s[j] *= dir;
        }
    }
    // a head's channels in registers (each value as stored), rotated and rounded as a store would round them
    __device__ __forceinline__ void apply(float (&x)[HPL]) const {
#pragma unroll
        for (int j = 0; j < PAIRS; j++) {
            const float x1 = x[j], x2 = x[j + PAIRS];
            x[j] = to_f(from_f<floatX>(x1 * c[j] - x2 * s[j]));
            x[j + PAIRS] = to_f(from_f<floatX>(x2 * c[j] + x1 * s[j]));
        }
    }
};

KERNEL(qk_norm_forward) {
    const int lane = threadIdx.x % WARP_SIZE;
    const long long row = (long long)blockIdx.x * (BLOCK_SIZE / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N_ROWS) return;
    const QkRotation rot(row, pos, lane, 1.0f);
    for (int h = 0; h < QK_HEADS; h++) {
        const long long off = row * QKVW + (long long)h * HS;
        const floatX *w = h < NH ? qw : kw;
        float v[HPL], s = 0.0f;
#pragma unroll
        for (int j = 0; j < HPL; j++) { v[j] = to_f(inp[off + lane + j * WARP_SIZE]); s += v[j] * v[j]; }
        const float r = rsqrtf(warp_sum(s) / HS + NORM_EPS);
#pragma unroll
        for (int j = 0; j < HPL; j++) v[j] = to_f(from_f<floatX>(v[j] * r * to_f(w[lane + j * WARP_SIZE])));
        rot.apply(v);
#pragma unroll
        for (int j = 0; j < HPL; j++) out[off + lane + j * WARP_SIZE] = from_f<floatX>(v[j]);
        if (lane == 0) rstd[row * QK_HEADS + h] = r;
    }
    for (int c = lane; c < NKV * HS; c += WARP_SIZE) {   // v's heads copied, after k's at (NH + NKV) HS
        const long long voff = row * QKVW + (long long)(NH + NKV) * HS + c;
        out[voff] = inp[voff];
    }
}

// QK_BLOCKS blocks, the rows strided over their warps; block b's partials at scratch[b*2HS ..): dqw's HS, then dkw's
KERNEL(qk_norm_backward) {
    constexpr int WARPS = BWD_BLOCK_SIZE / WARP_SIZE;
    __shared__ float s_dw[2 * HS];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    float dq[HPL], dk[HPL];
#pragma unroll
    for (int j = 0; j < HPL; j++) { dq[j] = 0.0f; dk[j] = 0.0f; }
    for (long long row = (long long)blockIdx.x * WARPS + warp; row < N_ROWS; row += (long long)QK_BLOCKS * WARPS) {
        const QkRotation back(row, pos, lane, -1.0f);
        for (int h = 0; h < QK_HEADS; h++) {
            const long long off = row * QKVW + (long long)h * HS;
            const floatX *w = h < NH ? qw : kw;
            const float r = rstd[row * QK_HEADS + h];
            float g[HPL], xh[HPL], s = 0.0f;
#pragma unroll
            for (int j = 0; j < HPL; j++) g[j] = to_f(dinout[off + lane + j * WARP_SIZE]);
            back.apply(g);
#pragma unroll
            for (int j = 0; j < HPL; j++) {
                const int c = lane + j * WARP_SIZE;
                xh[j] = to_f(inp[off + c]) * r;
                s += g[j] * to_f(w[c]) * xh[j];
            }
            const float m = warp_sum(s) / HS;
#pragma unroll
            for (int j = 0; j < HPL; j++) {
                const int c = lane + j * WARP_SIZE;
                if (h < NH) dq[j] += g[j] * xh[j];
                else dk[j] += g[j] * xh[j];
                dinout[off + c] = from_f<floatX>((g[j] * to_f(w[c]) - xh[j] * m) * r);
            }
        }
    }
    for (int w = 0; w < WARPS; w++) {   // the warps' sums one after the other
        if (warp == w) {
#pragma unroll
            for (int j = 0; j < HPL; j++) {
                const int c = lane + j * WARP_SIZE;
                s_dw[c] = (w == 0 ? 0.0f : s_dw[c]) + dq[j];
                s_dw[HS + c] = (w == 0 ? 0.0f : s_dw[HS + c]) + dk[j];
            }
        }
        __syncthreads();
    }
    for (int c = threadIdx.x; c < 2 * HS; c += BWD_BLOCK_SIZE) scratch[(long long)blockIdx.x * 2 * HS + c] = s_dw[c];
}

KERNEL(qk_norm_backward_reduce) {
    const int c = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (c >= 2 * HS) return;
    float s = 0.0f;
    for (int b = 0; b < QK_BLOCKS; b++) s += scratch[(long long)b * 2 * HS + c];
    floatX *dst = c < HS ? dqw + c : dkw + (c - HS);
    *dst = from_f<floatX>(to_f(*dst) + s);
}
