// layernorm.cu: LayerNorm over the C channels of each of the B*T rows (eps: model.norm_eps, GPT-2's 1e-5; biased
// variance).
//   layernorm_forward                 out = LN(inp); saves mean and rstd (fp32) for the backward
//   fused_residual_layernorm_forward  residual = inp1 + inp2, out = LN(residual)
//   layernorm_backward                dinp += dLN; per-block partial sums of dweight/dbias into scratch; with out
//                                     not null, also out = LN(inp) again from the saved mean and rstd (recompute=2:
//                                     the weight-gradient matmul that reads it runs after this kernel)
//   layernorm_backward_reduce         dweight += sum of partials, dbias likewise, in a fixed order
// One warp per row; each lane owns the same channels of every row, so the weight-gradient partials stay with the
// lane (in registers, or with BWD_SUMS 2 in the lane's own slots of shared memory) and every sum runs in a fixed
// order: the backward gives the same bits on every run.

constexpr int N_ROWS = B * T;
constexpr int VEC = VEC_C;                          // elements per access
constexpr int PACKETS = C / VEC;                         // accesses per row
constexpr int PER_LANE = (PACKETS + WARP_SIZE - 1) / WARP_SIZE;
#ifdef ARCH_CONSTANTS
constexpr float LN_EPS = NORM_EPS;                  // model.norm_eps (a relative's prelude)
#else
constexpr float LN_EPS = 1e-5f;                     // GPT-2's
#endif
typedef Packed<floatX, VEC> xvec;

// one value of the LayerNorm's output, from the row's mean m and rstd r: the forward and the backward's remake agree
__device__ __forceinline__ floatX ln_value(float x, float m, float r, float w, float b) {
    return from_f<floatX>((x - m) * r * w + b);
}

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
        for (int k = 0; k < VEC; k++) o[k] = ln_value(x[i][k], m, r, to_f(w[k]), to_f(b[k]));
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

// The backward of one row: the two row means the gradient needs, then dinp += dLN and the row's share of the weight
// gradients: add(i, k, dw, db) for value k of this lane's i-th packet. at(which, i, pass) gives this lane's i-th
// packet of dout (which 0), inp (1) or dinp (2) as pass 1 or 2 reads it. out_row not null: the row's LayerNorm
// output, as ln_row writes it.
template <typename At, typename Add>
__device__ __forceinline__ void ln_backward_row(At at, Add add, floatX *dinp_row, floatX *out_row, const floatX *weight,
                                                const floatX *bias, float m, float r, int lane) {
    float sum_dn = 0.0f, sum_dn_n = 0.0f;
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= PACKETS) continue;
        const xvec g = at(0, i, 1), x = at(1, i, 1);
        const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
        for (int k = 0; k < VEC; k++) {
            const float dn = to_f(g[k]) * to_f(w[k]);
            sum_dn += dn;
            sum_dn_n += dn * (to_f(x[k]) - m) * r;
        }
    }
    const float mean_dn = warp_sum(sum_dn) / C, mean_dn_n = warp_sum(sum_dn_n) / C;
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= PACKETS) continue;
        const xvec g = at(0, i, 2), x = at(1, i, 2);
        const xvec w = load_vec<floatX, VEC>(weight + p * VEC);
        xvec d = at(2, i, 2);
        for (int k = 0; k < VEC; k++) {
            const float gk = to_f(g[k]), n = (to_f(x[k]) - m) * r;
            const float dn = gk * to_f(w[k]);
            add(i, k, gk * n, gk);
            d[k] = from_f<floatX>(to_f(d[k]) + (dn - mean_dn - n * mean_dn_n) * r);
        }
        store_vec<floatX, VEC>(dinp_row + p * VEC, d);
        if (out_row) {
            const xvec b = load_vec<floatX, VEC>(bias + p * VEC);
            xvec o;
            for (int k = 0; k < VEC; k++) o[k] = ln_value(to_f(x[k]), m, r, to_f(w[k]), to_f(b[k]));
            store_vec<floatX, VEC>(out_row + p * VEC, o);
        }
    }
}

// BWD_BLOCKS blocks, rows strided over all their warps. scratch: BWD_BLOCKS * 2 * C floats,
// block b's dweight partial at scratch[b*2C .. b*2C+C), its dbias partial right after.
// Each lane adds the weight gradients of its channels over the rows of its warp: in registers (BWD_SUMS 1), or
// (BWD_SUMS 2) in the warp's part of shared memory, value-major (value j of lane l at j*32 + l: no bank conflicts),
// which leaves the registers to hold the row, so that it is read once. BWD_SMEM (gen/kernels.c) is the bytes of
// dynamic shared memory: the sums (BWD_SUMS 2), or the stages (BWD_SUMS 1, where each warp has rows to spare and
// the stages pay): each warp copies its next row's dout, inp and dinp into shared memory (cp.async, two stages a
// warp) while it computes the row before: every byte is read from memory once, and the loads of the next row are
// in flight during this one's sums. Each lane reads back only the packets it copied itself, so the stages need no
// barrier. Otherwise (one row a warp, fp32, or a row wider than C = 768, where the stages measured slower: 202
// registers at C = 1024), the rows are read straight: where a lane's share of the row is small (at most 24 values,
// C <= 768) or the sums are in shared memory (HOLD), dout and inp are loaded once and kept in registers for the
// second pass (128 registers at C = 768); else the second pass reloads them (keeping 32 values, C = 1024, beside
// the sums in registers took 200 registers against 128).
constexpr int VALUES = PER_LANE * VEC;   // a lane's values of a row
constexpr bool SUMS_SHARED = BWD_SUMS == 2;
constexpr bool STAGED = BWD_SMEM > 0 && !SUMS_SHARED;
constexpr bool HOLD = VALUES <= 24 || SUMS_SHARED;
constexpr int HELD = HOLD ? PER_LANE : 1;
KERNEL(layernorm_backward) {
    constexpr int WARPS = BWD_BLOCK_SIZE / WARP_SIZE;
    constexpr int STRIDE = BWD_BLOCKS * WARPS;
    constexpr int SUM_SLOTS = VALUES * WARP_SIZE;   // a warp's dweight sums, then its dbias sums
    __shared__ float s_dw[SUMS_SHARED ? 1 : C], s_db[SUMS_SHARED ? 1 : C];
    extern __shared__ __align__(16) unsigned char dyn_smem[];   // BWD_SMEM bytes: the stages or the sums
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    float dw[SUMS_SHARED ? 1 : PER_LANE][VEC], db[SUMS_SHARED ? 1 : PER_LANE][VEC];
    float *sums = reinterpret_cast<float *>(dyn_smem) + warp * 2 * SUM_SLOTS + lane;   // this lane's slot 0
    if constexpr (SUMS_SHARED) {
        for (int j = 0; j < VALUES; j++) { sums[j * WARP_SIZE] = 0.0f; sums[SUM_SLOTS + j * WARP_SIZE] = 0.0f; }
    } else {
        for (int i = 0; i < PER_LANE; i++)
            for (int k = 0; k < VEC; k++) { dw[i][k] = 0.0f; db[i][k] = 0.0f; }
    }
    auto add = [&](int i, int k, float w, float b) {
        if constexpr (SUMS_SHARED) {
            sums[(i * VEC + k) * WARP_SIZE] += w;
            sums[SUM_SLOTS + (i * VEC + k) * WARP_SIZE] += b;
        } else {
            dw[i][k] += w;
            db[i][k] += b;
        }
    };

    int row = blockIdx.x * WARPS + warp;
    if constexpr (STAGED) {
        xvec *stages = reinterpret_cast<xvec *>(dyn_smem) + warp * 2 * 3 * PACKETS;   // WARPS x 2 stages x 3 rows
        auto fetch = [&](int rw, int st) {   // this lane's packets of row rw into stage st; a group even when none
            if (rw < N_ROWS) {
                const long long base = (long long)rw * C;
                xvec *s = stages + st * 3 * PACKETS;
#pragma unroll
                for (int i = 0; i < PER_LANE; i++) {
                    const int p = lane + i * WARP_SIZE;
                    if (p >= PACKETS) continue;
                    cp_async16(s + p, dout + base + p * VEC, true);
                    cp_async16(s + PACKETS + p, inp + base + p * VEC, true);
                    cp_async16(s + 2 * PACKETS + p, dinp + base + p * VEC, true);
                }
            }
            cp_async_commit();
        };
        fetch(row, 0);
        for (int st = 0; row < N_ROWS; row += STRIDE, st ^= 1) {
            const float m = mean[row], r = rstd[row];
            fetch(row + STRIDE, st ^ 1);   // stage st ^ 1 held the row before, which this lane has read
            cp_async_wait<1>();            // this row's group is in
            const xvec *s = stages + st * 3 * PACKETS;
            ln_backward_row([&](int which, int i, int) { return s[which * PACKETS + lane + i * WARP_SIZE]; }, add,
                            dinp + (long long)row * C, out ? out + (long long)row * C : nullptr, weight, bias, m, r, lane);
        }
    } else {
        for (; row < N_ROWS; row += STRIDE) {
            const long long base = (long long)row * C;
            const float m = mean[row], r = rstd[row];
            xvec gh[HELD], xh[HELD];
            if constexpr (HOLD) {
#pragma unroll
                for (int i = 0; i < PER_LANE; i++) {
                    const int p = lane + i * WARP_SIZE;
                    if (p >= PACKETS) continue;
                    gh[i] = load_vec_cs<floatX, VEC>(dout + base + p * VEC);
                    xh[i] = load_vec_cs<floatX, VEC>(inp + base + p * VEC);
                }
            }
            auto at = [&](int which, int i, int pass) -> xvec {
                const int p = lane + i * WARP_SIZE;
                if (which == 2) return load_vec<floatX, VEC>(dinp + base + p * VEC);
                if constexpr (HOLD) return which == 0 ? gh[i % HELD] : xh[i % HELD];
                const floatX *src = (which == 0 ? dout : inp) + base + p * VEC;
                return pass == 1 ? load_vec<floatX, VEC>(src) : load_vec_cs<floatX, VEC>(src);
            };
            ln_backward_row(at, add, dinp + base, out ? out + base : nullptr, weight, bias, m, r, lane);
        }
    }
    // block partial: the warps' sums added one after the other (fixed order, no atomics)
    float *part = scratch + (long long)blockIdx.x * 2 * C;
    if constexpr (SUMS_SHARED) {
        __syncthreads();
        const float *all = reinterpret_cast<const float *>(dyn_smem);
        for (int slot = threadIdx.x; slot < SUM_SLOTS; slot += BWD_BLOCK_SIZE) {   // slot = j*32 + l
            const int l = slot % WARP_SIZE, j = slot / WARP_SIZE, p = l + j / VEC * WARP_SIZE;
            if (p >= PACKETS) continue;
            float a = 0.0f, b = 0.0f;
            for (int w = 0; w < WARPS; w++) { a += all[w * 2 * SUM_SLOTS + slot]; b += all[w * 2 * SUM_SLOTS + SUM_SLOTS + slot]; }
            const int c = p * VEC + j % VEC;
            part[c] = a;
            part[C + c] = b;
        }
    } else {
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
        for (int c = threadIdx.x; c < C; c += BWD_BLOCK_SIZE) { part[c] = s_dw[c]; part[C + c] = s_db[c]; }
    }
}

// sums the BWD_BLOCKS partials of layernorm_backward in a fixed order. Block (x, y) takes 32 channels of dweight (y
// 0) or dbias (y 1): its lanes read whole 128-byte lines, warp w adds the partials w, w + WARPS, ... with 8 loads in
// flight, and warp 0 adds the warps' sums one after the other. (A thread per channel over all the partials left
// 3 or 4 blocks at C = 768, each thread adding 512 values in a row.)
KERNEL(layernorm_backward_reduce) {
    constexpr int WARPS = BLOCK_SIZE / WARP_SIZE;
    __shared__ float s_part[WARPS][WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int c = blockIdx.x * WARP_SIZE + lane;
    const float *src = scratch + (long long)blockIdx.y * C + c;   // partial b of this channel: src[b * 2C]
    float s = 0.0f;
    if (c < C) {
        int b = warp;
        for (; b + 7 * WARPS < BWD_BLOCKS; b += 8 * WARPS) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u] = src[(long long)(b + u * WARPS) * 2 * C];
#pragma unroll
            for (int u = 0; u < 8; u++) s += v[u];
        }
        for (; b < BWD_BLOCKS; b += WARPS) s += src[(long long)b * 2 * C];
    }
    s_part[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && c < C) {
        float t = 0.0f;
        for (int w = 0; w < WARPS; w++) t += s_part[w][lane];
        floatX *dst = blockIdx.y == 0 ? dweight : dbias;
        dst[c] = from_f<floatX>(to_f(dst[c]) + t);
    }
}
