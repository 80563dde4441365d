// layernorm.cu: LayerNorm over the C channels of each of the B*T rows (eps 1e-5, biased variance).
//   layernorm_forward                 out = LN(inp); saves mean and rstd (fp32) for the backward
//   fused_residual_layernorm_forward  residual = inp1 + inp2, out = LN(residual)
//   layernorm_backward                dinp += dLN; per-block partial sums of dweight/dbias into scratch
//   layernorm_backward_reduce         dweight += sum of partials, dbias likewise, in a fixed order
// One warp per row; each lane owns the same channels of every row, so the weight-gradient partials stay in
// registers and every sum runs in a fixed order: the backward gives the same bits on every run.

constexpr int N_ROWS = B * T;
constexpr int VEC = VEC_C;                          // elements per access
constexpr int PACKETS = C / VEC;                         // accesses per row
constexpr int PER_LANE = (PACKETS + WARP_SIZE - 1) / WARP_SIZE;
constexpr float LN_EPS = 1e-5f;
typedef Packed<floatX, VEC> xvec;

// Normalizes one row held in registers and writes out, mean and rstd.
__device__ __forceinline__ void ln_row(float (&x)[PER_LANE][VEC], floatX *out, float *mean, float *rstd,
                                       const floatX *weight, const floatX *bias, int row, int lane) {
    float s = 0.0f;
    for (int i = 0; i < PER_LANE; i++)
        for (int k = 0; k < VEC; k++) s += x[i][k];
    const float m = warp_sum(s) / C;
    float s2 = 0.0f;
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p < PACKETS)
            for (int k = 0; k < VEC; k++) { float d = x[i][k] - m; s2 += d * d; }
    }
    const float r = rsqrtf(warp_sum(s2) / C + LN_EPS);
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= PACKETS) continue;
        const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
        const xvec b = load_vec<floatX, VEC>(bias + p * VEC);
        xvec o;
        for (int k = 0; k < VEC; k++) o[k] = from_f<floatX>((x[i][k] - m) * r * to_f(w[k]) + to_f(b[k]));
        store_vec<floatX, VEC>(out + (long long)row * C + p * VEC, o);
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

KERNEL(layernorm_forward) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (BLOCK_SIZE / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N_ROWS) return;
    float x[PER_LANE][VEC];
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        xvec v = p < PACKETS ? load_vec_cs<floatX, VEC>(inp + (long long)row * C + p * VEC) : xvec::zeros();
        for (int k = 0; k < VEC; k++) x[i][k] = to_f(v[k]);
    }
    ln_row(x, out, mean, rstd, weight, bias, row, lane);
}

KERNEL(fused_residual_layernorm_forward) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (BLOCK_SIZE / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N_ROWS) return;
    float x[PER_LANE][VEC];
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p < PACKETS) {
            const long long off = (long long)row * C + p * VEC;
            const xvec a = load_vec_cs<floatX, VEC>(inp1 + off);
            const xvec b = load_vec_cs<floatX, VEC>(inp2 + off);
            xvec r;
            // the LayerNorm sees the residual as stored (rounded to floatX), like the backward will
            for (int k = 0; k < VEC; k++) { r[k] = from_f<floatX>(to_f(a[k]) + to_f(b[k])); x[i][k] = to_f(r[k]); }
            store_vec<floatX, VEC>(residual + off, r);
        } else {
            for (int k = 0; k < VEC; k++) x[i][k] = 0.0f;
        }
    }
    ln_row(x, out, mean, rstd, weight, bias, row, lane);
}

// BWD_BLOCKS blocks, rows strided over all their warps. scratch: BWD_BLOCKS * 2 * C floats,
// block b's dweight partial at scratch[b*2C .. b*2C+C), its dbias partial right after.
// Where a lane's share of the row is small (HOLD: at most 24 values, C <= 768 in 16 bits), the row's dout and inp
// are loaded once and kept in registers for the second pass (128 registers at C = 768); above that, the second pass
// reloads them: keeping 32 values (C = 1024) takes 200 registers against 128, which halves the warps an SM holds.
constexpr bool HOLD = PER_LANE * VEC <= 24;
constexpr int HELD = HOLD ? PER_LANE : 1;
KERNEL(layernorm_backward) {
    constexpr int WARPS = BWD_BLOCK_SIZE / WARP_SIZE;
    __shared__ float s_dw[C], s_db[C];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    float dw[PER_LANE][VEC], db[PER_LANE][VEC];
    for (int i = 0; i < PER_LANE; i++)
        for (int k = 0; k < VEC; k++) { dw[i][k] = 0.0f; db[i][k] = 0.0f; }

    for (int row = blockIdx.x * WARPS + warp; row < N_ROWS; row += BWD_BLOCKS * WARPS) {
        const long long base = (long long)row * C;
        const float m = mean[row], r = rstd[row];
        xvec gh[HELD], xh[HELD];
        if constexpr (HOLD) {
            for (int i = 0; i < PER_LANE; i++) {
                const int p = lane + i * WARP_SIZE;
                if (p >= PACKETS) continue;
                gh[i] = load_vec_cs<floatX, VEC>(dout + base + p * VEC);
                xh[i] = load_vec_cs<floatX, VEC>(inp + base + p * VEC);
            }
        }
        // pass 1: the two row means the gradient needs
        float sum_dn = 0.0f, sum_dn_n = 0.0f;
        for (int i = 0; i < PER_LANE; i++) {
            const int p = lane + i * WARP_SIZE;
            if (p >= PACKETS) continue;
            const xvec g = HOLD ? gh[i % HELD] : load_vec<floatX, VEC>(dout + base + p * VEC);
            const xvec x = HOLD ? xh[i % HELD] : load_vec<floatX, VEC>(inp + base + p * VEC);
            const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
            for (int k = 0; k < VEC; k++) {
                const float dn = to_f(g[k]) * to_f(w[k]);
                sum_dn += dn;
                sum_dn_n += dn * (to_f(x[k]) - m) * r;
            }
        }
        const float mean_dn = warp_sum(sum_dn) / C, mean_dn_n = warp_sum(sum_dn_n) / C;
        // pass 2: dinp, and the weight/bias gradients in registers
        for (int i = 0; i < PER_LANE; i++) {
            const int p = lane + i * WARP_SIZE;
            if (p >= PACKETS) continue;
            const xvec g = HOLD ? gh[i % HELD] : load_vec_cs<floatX, VEC>(dout + base + p * VEC);
            const xvec x = HOLD ? xh[i % HELD] : load_vec_cs<floatX, VEC>(inp + base + p * VEC);
            const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
            xvec d = load_vec<floatX, VEC>(dinp + base + p * VEC);
            for (int k = 0; k < VEC; k++) {
                const float gk = to_f(g[k]), n = (to_f(x[k]) - m) * r;
                const float dn = gk * to_f(w[k]);
                db[i][k] += gk;
                dw[i][k] += gk * n;
                d[k] = from_f<floatX>(to_f(d[k]) + (dn - mean_dn - n * mean_dn_n) * r);
            }
            store_vec<floatX, VEC>(dinp + base + p * VEC, d);
        }
    }
    // block partial: warps add into shared memory one after the other (fixed order, no atomics)
    for (int w = 0; w < WARPS; w++) {
        if (warp == w) {
            for (int i = 0; i < PER_LANE; i++) {
                const int p = lane + i * WARP_SIZE;
                if (p >= PACKETS) continue;
                for (int k = 0; k < VEC; k++) {
                    const int c = p * VEC + k;
                    s_dw[c] = (w == 0 ? 0.0f : s_dw[c]) + dw[i][k];
                    s_db[c] = (w == 0 ? 0.0f : s_db[c]) + db[i][k];
                }
            }
        }
        __syncthreads();
    }
    float *out = scratch + (long long)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < C; c += BWD_BLOCK_SIZE) { out[c] = s_dw[c]; out[C + c] = s_db[c]; }
}

// sums the BWD_BLOCKS partials of layernorm_backward, in order
KERNEL(layernorm_backward_reduce) {
    const int c = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (c >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (int b = 0; b < BWD_BLOCKS; b++) {
        sw += scratch[(long long)b * 2 * C + c];
        sb += scratch[(long long)b * 2 * C + C + c];
    }
    dweight[c] = from_f<floatX>(to_f(dweight[c]) + sw);
    dbias[c] = from_f<floatX>(to_f(dbias[c]) + sb);
}
