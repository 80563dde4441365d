// attention.cu: causal self-attention without the (T,T) scores, FlashAttention-2 style.
// Longer than a C file may be, on purpose: its kernels share one tile layout, fragment maps and pipeline, and read
// better whole than split across files that must agree on every constant (docs/kernels-and-tuning.md).
// Layouts are the training step's: qkv (B,T,QKVW), each token's row q's NH heads, then k's NKV, then v's NKV
// (common.cuh; QKVW = 3C, NKV = NH for multi-head attention); query head h reads key/value head kv_head_of(h)
// (grouped-query attention read as it is: no expanded copy); out and dout (B,T,C); stats (B,NH,T) fp32, the
// natural-log log-sum-exp of each query row's scaled scores, stats = log sum_{j<=i} exp(q_i.k_j / sqrt(HS)) (the
// same convention as the cuDNN path, so that either backward can use either forward's statistics); dqkv (B,T,QKVW)
// like qkv, overwritten.
//
// Forward (flash_forward): a block per (tile of Q_TILE query rows, head, batch row), a warp per Q_WARP_ROWS rows
// (16 or 32: one load of a K or V fragment then serves two m-tiles of the MMA). K and
// V stream through shared memory in tiles of KV_TILE rows; the scores of one tile live in registers, the
// softmax is online (running max and sum per row), tiles above the diagonal are never touched.
// Backward, deterministic (no atomics), dQ first:
//   flash_backward_dq:   a block per tile of BWD_TILE query rows, a warp per BWD_WARP_ROWS of them; each warp
//                        first sums ddot[b,h,i] = dout_i . out_i (the softmax backward's row sums) for its
//                        rows and writes them for the next kernel; key tiles stream past, dQ += dS K;
//   flash_backward_dkdv: a block per (tile of BWD_TILE key rows, key/value head, batch row), a warp per
//                        BWD_WARP_ROWS of them; the query tiles of BWD_INNER rows of each query head of the kv
//                        head's group stream past in turn, the probabilities are recomputed from the statistics,
//                        dV += P^T dO, dK += dS^T Q, summed over the group in the same registers.
// A warp of 32 rows (two 16-row m-tiles) uses each fragment it loads from shared memory for two MMAs, where a
// warp of 16 rows uses it for one: with 16 the backward's products wait on shared memory, not the tensor cores.
// In bf16/fp16 the matrix products are tensor-core MMAs (mma.sync m16n8k16, fp32 accumulation; operands
// through ldmatrix from shared memory filled by cp.async). In fp32 a plain version (a warp per row) computes the
// same thing: fp32 is the precision the GPU tests hold to the CPU reference tightly, not a fast one.

constexpr double const_sqrt(double x) {             // Newton's method, at compile time
    double r = x > 1.0 ? x : 1.0;
    for (int i = 0; i < 64; i++) r = 0.5 * (r + x / r);
    return r;
}
constexpr float SCALE = (float)(1.0 / const_sqrt((double)HS));
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
#define INFINITY __int_as_float(0x7f800000)            // NVRTC has no math.h
constexpr float SCALE_LOG2 = SCALE * LOG2E;        // scores -> log2 units
constexpr int MT = Q_WARP_ROWS / 16;              // forward: 16-row m-tiles per warp
constexpr int MB = BWD_WARP_ROWS / 16;            // backward: 16-row m-tiles per warp

__device__ __forceinline__ long long head_row(int b, int t, int width) { return ((long long)b * T + t) * width; }
// query head h's q, and its key/value head's k and v, in the row of token 0 of batch row b (rows QKVW apart)
struct HeadCols {
    const floatX *q, *k, *v;
    __device__ __forceinline__ HeadCols(const floatX *qkv, int b, int h) {
        const floatX *row = qkv + head_row(b, 0, QKVW);
        q = row + h * HS;
        k = row + k_at(kv_head_of(h));
        v = row + v_at(kv_head_of(h));
    }
};

// ddot of row i of head h, batch row b: sum_d dout[b,i,h,d] * out[b,i,h,d], summed by a warp (every lane gets it)
__device__ __forceinline__ float row_ddot(const floatX *dout, const floatX *out, int b, int h, int i, int lane) {
    const long long base = head_row(b, i, C) + h * HS;
    float s = 0.0f;
    for (int d = lane; d < HS; d += WARP_SIZE) s += to_f(dout[base + d]) * to_f(out[base + d]);
    return warp_sum(s);
}

#if PRECISION_FP32
// ---------------------------------------------------------------------------------------------------------
// fp32: a warp per row; each lane holds the head dimensions d = lane, lane+32, ...
constexpr int DPL = (HS + WARP_SIZE - 1) / WARP_SIZE;   // dimensions per lane

__device__ __forceinline__ void load_head(float (&x)[DPL], const float *p, int lane) {
    for (int k = 0; k < DPL; k++) x[k] = lane + k * WARP_SIZE < HS ? p[lane + k * WARP_SIZE] : 0.0f;
}
__device__ __forceinline__ float dot_head(const float (&x)[DPL], const float *p, int lane) {
    float s = 0.0f;
    for (int k = 0; k < DPL; k++)
        if (lane + k * WARP_SIZE < HS) s += x[k] * p[lane + k * WARP_SIZE];
    return warp_sum(s);
}
__device__ __forceinline__ void store_head(float *p, const float (&x)[DPL], float scale, int lane) {
    for (int k = 0; k < DPL; k++)
        if (lane + k * WARP_SIZE < HS) p[lane + k * WARP_SIZE] = x[k] * scale;
}

KERNEL(flash_forward) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, h = blockIdx.y, b = blockIdx.z;
    for (int r = 0; r < Q_WARP_ROWS; r++) {
        const int i = blockIdx.x * Q_TILE + warp * Q_WARP_ROWS + r;
        if (i >= T) return;
        float q[DPL], o[DPL] = {};
        const HeadCols hc(qkv, b, h);
        load_head(q, hc.q + (long long)i * QKVW, lane);
        float m = -INFINITY, l = 0.0f;
        for (int j = 0; j <= i; j++) {
            const float *kj = hc.k + (long long)j * QKVW, *vj = hc.v + (long long)j * QKVW;
            const float x = dot_head(q, kj, lane) * SCALE_LOG2;
            const float mn = fmaxf(m, x), alpha = exp2f(m - mn), p = exp2f(x - mn);
            l = l * alpha + p;
            for (int k = 0; k < DPL; k++)
                o[k] = o[k] * alpha + (lane + k * WARP_SIZE < HS ? p * vj[lane + k * WARP_SIZE] : 0.0f);
            m = mn;
        }
        store_head(out + head_row(b, i, C) + h * HS, o, 1.0f / l, lane);
        if (lane == 0) stats[((long long)b * NH + h) * T + i] = (m + log2f(l)) * LN2;
    }
}

KERNEL(flash_backward_dkdv) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, kvh = blockIdx.y, b = blockIdx.z;
    const HeadCols hc(qkv, b, kvh * KV_GROUP);           // the group's k and v
    for (int r = 0; r < BWD_WARP_ROWS; r++) {
        const int j = blockIdx.x * BWD_TILE + warp * BWD_WARP_ROWS + r;
        if (j >= T) return;
        float k[DPL], v[DPL], dk[DPL] = {}, dv[DPL] = {};
        load_head(k, hc.k + (long long)j * QKVW, lane);
        load_head(v, hc.v + (long long)j * QKVW, lane);
        for (int h = kvh * KV_GROUP; h < (kvh + 1) * KV_GROUP; h++) {   // the query heads of the group, in order
            const float *st = stats + ((long long)b * NH + h) * T, *dd = ddot + ((long long)b * NH + h) * T;
            for (int i = j; i < T; i++) {
                const float *q = qkv + head_row(b, i, QKVW) + h * HS, *dy = dout + head_row(b, i, C) + h * HS;
                const float p = exp2f(dot_head(k, q, lane) * SCALE_LOG2 - st[i] * LOG2E);
                const float ds = p * (dot_head(v, dy, lane) - dd[i]);
                for (int c = 0; c < DPL; c++)
                    if (lane + c * WARP_SIZE < HS) {
                        dv[c] += p * dy[lane + c * WARP_SIZE];
                        dk[c] += ds * q[lane + c * WARP_SIZE];
                    }
            }
        }
        floatX *dj = dqkv + head_row(b, j, QKVW);
        store_head(dj + k_at(kvh), dk, SCALE, lane);
        store_head(dj + v_at(kvh), dv, 1.0f, lane);
    }
}

KERNEL(flash_backward_dq) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, h = blockIdx.y, b = blockIdx.z;
    for (int r = 0; r < BWD_WARP_ROWS; r++) {
        const int i = blockIdx.x * BWD_TILE + warp * BWD_WARP_ROWS + r;
        if (i >= T) return;
        const float lse2 = stats[((long long)b * NH + h) * T + i] * LOG2E, D = row_ddot(dout, out, b, h, i, lane);
        if (lane == 0) ddot[((long long)b * NH + h) * T + i] = D;
        float q[DPL], dy[DPL], dq[DPL] = {};
        const HeadCols hc(qkv, b, h);
        load_head(q, hc.q + (long long)i * QKVW, lane);
        load_head(dy, dout + head_row(b, i, C) + h * HS, lane);
        for (int j = 0; j <= i; j++) {
            const float *kj = hc.k + (long long)j * QKVW, *vj = hc.v + (long long)j * QKVW;
            const float p = exp2f(dot_head(q, kj, lane) * SCALE_LOG2 - lse2);
            const float ds = p * (dot_head(dy, vj, lane) - D);
            for (int c = 0; c < DPL; c++)
                if (lane + c * WARP_SIZE < HS) dq[c] += ds * kj[lane + c * WARP_SIZE];
        }
        store_head(dqkv + head_row(b, i, QKVW) + h * HS, dq, SCALE, lane);
    }
}

#else
// ---------------------------------------------------------------------------------------------------------
// bf16 / fp16: tensor cores. Fragments of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), for
// lane = 4*g + c: A (16x16, row-major) a0 = (g, 2c..2c+1), a1 = (g+8, 2c..), a2 = (g, 2c+8..), a3 = (g+8, 2c+8..);
// B (16x8, column-major) b0 = (k 2c..2c+1, n g), b1 = (k 2c+8.., n g); C/D (16x8) d0,d1 = (g, 2c..2c+1),
// d2,d3 = (g+8, 2c..2c+1). So a 16x16 block of fp32 accumulators (two n-tiles) is, packed to 16 bits, the
// A fragment of the next product: the probabilities never leave the registers.
constexpr int LDS = HS + 8;            // shared-memory row pitch in elements: 16 bytes of padding, so that
                                       // ldmatrix's 8 row addresses fall in different banks
constexpr int HS16 = HS / 16;          // k-steps along the head

// 2^x on the special-function unit, subnormal results flushed to zero (a probability below 2^-126 is 0 here;
// exp2f would spend three more instructions on them)
__device__ __forceinline__ float exp2_ftz(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

// Four 8x8 matrices of 16-bit elements; lane l gives the address of row l%8 of matrix l/8.
__device__ __forceinline__ void ldsm4(u32 (&r)[4], const floatX *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm4_t(u32 (&r)[4], const floatX *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if PRECISION_BF16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#endif
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// the two n-tiles of an ldmatrix.x4 B load (b[0], b[1] and b[2], b[3]) into their accumulators
__device__ __forceinline__ void mma2(float (&d0)[4], float (&d1)[4], const u32 (&a)[4], const u32 (&b)[4]) {
    mma(d0, a, b[0], b[1]);
    mma(d1, a, b[2], b[3]);
}

// two floats -> two packed 16-bit values (lo in the low half)
__device__ __forceinline__ u32 pack2(float lo, float hi) {
#if PRECISION_BF16
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#else
    __half2 v = __floats2half2_rn(lo, hi);
#endif
    return *reinterpret_cast<u32 *>(&v);
}
// the A fragment of k-step kk from a row of 16x8 accumulator tiles
template <int N> __device__ __forceinline__ void acc_to_a(u32 (&a)[4], const float (&s)[N][4], int kk) {
    a[0] = pack2(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack2(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// Row addresses for ldmatrix, from a tile in shared memory (pitch LDS), for lane:
// the A fragment (16 rows x 16 columns at r0, c0);
__device__ __forceinline__ const floatX *a_addr(const floatX *tile, int r0, int c0, int lane) {
    return tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + c0 + (lane >> 4) * 8;
}
// the B fragments of two n-tiles (rows n0..n0+15 of a row-major (n, k) tile, k-step at c0), non-transposed:
// r[0], r[1] = b0, b1 of n-tile n0; r[2], r[3] of n-tile n0+8;
__device__ __forceinline__ const floatX *bn_addr(const floatX *tile, int n0, int c0, int lane) {
    return tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LDS + c0 + ((lane >> 3) & 1) * 8;
}
// the B fragments of two n-tiles from a row-major (k, n) tile (k-step rows k0..k0+15, columns n0..n0+15), with
// ldmatrix.trans: r[0], r[1] = b0, b1 of n-tile n0; r[2], r[3] of n-tile n0+8.
__device__ __forceinline__ const floatX *bt_addr(const floatX *tile, int k0, int n0, int lane) {
    return tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + n0 + (lane >> 4) * 8;
}

// ROWS rows of one head from tokens t0.. (row pitch `width` elements in global memory) into a shared tile;
// rows at or past T are zeros.
template <int ROWS, int NT>
__device__ __forceinline__ void load_rows(floatX *tile, const floatX *src, int width, int t0) {
    constexpr int VPR = HS / 8;        // 16-byte vectors per row
    for (int v = threadIdx.x; v < ROWS * VPR; v += NT) {
        const int r = v / VPR, c = (v % VPR) * 8, t = t0 + r;
        cp_async16(tile + r * LDS + c, src + (long long)(t < T ? t : 0) * width + c, t < T);
    }
}

// acc (16 x N*8 accumulators of one warp, rows row0 + g and row0 + g + 8) * scale -> global rows (pitch width)
template <int N>
__device__ __forceinline__ void store_acc(floatX *dst, int width, const float (&acc)[N][4], int row0, float s0, float s1,
                                          int lane) {
    const int g = lane >> 2, c = (lane & 3) * 2;
    for (int half = 0; half < 2; half++) {
        const int t = row0 + g + 8 * half;
        if (t >= T) continue;
        const float s = half ? s1 : s0;
        for (int n = 0; n < N; n++)
            *reinterpret_cast<u32 *>(dst + (long long)t * width + n * 8 + c) =
                pack2(acc[n][2 * half] * s, acc[n][2 * half + 1] * s);
    }
}

// 4-byte asynchronous copies of N floats from src (rows i0.. of one (b,h)) by NT threads; zeros past T
template <int N, int NT> __device__ __forceinline__ void load_floats(float *dst, const float *src, int i0) {
#pragma unroll
    for (int k = 0; k < (N + NT - 1) / NT; k++) {
        const int r = threadIdx.x + k * NT;
        if (N % NT && r >= N) break;
        const bool ok = i0 + r < T;
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst + r)), "l"(src + (ok ? i0 + r : 0)),
                     "r"(ok ? 4 : 0));
    }
}

// One step of the online softmax in log2 units for the thread's row i (half 0: rows g, half 1: rows g + 8 of a
// 16-row m-tile of NK 8-column accumulator tiles s, keys k0..): a key after the query (j > i) is masked where the
// tile touches the diagonal. The running maximum m is in scaled log2 units; the row maximum of the raw scores is
// scaled once (the scale is positive), and each probability takes one FMA and one exp2. s becomes P, l and m move
// to the new maximum; returns the factor that takes the row's output there.
template <int NK>
__device__ __forceinline__ float softmax_p(float (&s)[NK][4], float &m, float &l, int half, int i, int k0, bool diagonal,
                                           int c2) {
    float mx = -INFINITY;
    for (int n = 0; n < NK; n++)
        for (int e = 0; e < 2; e++) {
            if (diagonal && k0 + n * 8 + c2 + e > i) s[n][2 * half + e] = -INFINITY;
            mx = fmaxf(mx, s[n][2 * half + e]);
        }
    mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
    const float mn = fmaxf(m, mx * SCALE_LOG2);  // finite: key 0 is in every row's first tile
    const float alpha = exp2_ftz(m - mn);
    float sum = 0.0f;
    for (int n = 0; n < NK; n++)
        for (int e = 0; e < 2; e++) {
            const float p = exp2_ftz(fmaf(s[n][2 * half + e], SCALE_LOG2, -mn));
            s[n][2 * half + e] = p;
            sum += p;
        }
    l = l * alpha + sum;
    m = mn;
    return alpha;
}
// the row's half of NO 8-column output tiles times alpha
template <int NO> __device__ __forceinline__ void rescale_row(float (&o)[NO][4], int half, float alpha) {
    for (int n = 0; n < NO; n++) { o[n][2 * half] *= alpha; o[n][2 * half + 1] *= alpha; }
}
// softmax_p, and the row's output o (NO tiles) rescaled at once
template <int NK, int NO>
__device__ __forceinline__ void softmax_row(float (&s)[NK][4], float (&o)[NO][4], float &m, float &l, int half, int i,
                                            int k0, bool diagonal, int c2) {
    rescale_row(o, half, softmax_p(s, m, l, half, i, k0, diagonal, c2));
}

// ddot (dout . out) of ROWS rows r0.. of head h, batch row b, summed by a warp while the backward's tiles load:
// lane l sums part l / ROWS of the head of row r0 + l % ROWS (16-byte loads, all in flight together); lanes l < ROWS
// write it for the dK/dV kernel; every lane returns the sum of row r0 + l % ROWS.
template <int ROWS>
__device__ __forceinline__ float rows_ddot(float *ddot, const floatX *dout, const floatX *out, int b, int h, int r0, int lane) {
    constexpr int PARTS = WARP_SIZE / ROWS, PART = HS / PARTS;   // PART: a multiple of 8
    const int r = lane % ROWS, i = r0 + r;
    float d = 0.0f;
    if (i < T) {
        const long long o = head_row(b, i, C) + h * HS + lane / ROWS * PART;
        for (int v = 0; v < PART; v += 8) {
            const uint4 x = *reinterpret_cast<const uint4 *>(dout + o + v), y = *reinterpret_cast<const uint4 *>(out + o + v);
            const floatX *xe = reinterpret_cast<const floatX *>(&x), *ye = reinterpret_cast<const floatX *>(&y);
            for (int e = 0; e < 8; e++) d += to_f(xe[e]) * to_f(ye[e]);
        }
    }
    for (int o = ROWS; o < WARP_SIZE; o <<= 1) d += __shfl_xor_sync(FULL_MASK, d, o);
    if (lane < ROWS && i < T) ddot[((long long)b * NH + h) * T + i] = d;
    return d;
}

// ---------------------------------------------------------------------------------------------------------
// Hopper (FWD_SM, BWD_SM = 90): the products as warpgroup MMAs, wgmma.mma_async m64n64k16 (m64n128k16 for the
// forward's S at KV_TILE 128) with fp32 accumulation (PTX ISA, "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate"; the m64n64k16 forms used here are the ones tests/test_hopper_probe.c checks on the GPU;
// docs/hopper-attention.md has the layouts). A warpgroup (4 warps, 128 threads) per 64 rows of the block's own tile,
// which stays in shared memory (wgmma reads its A operand from there); the streamed tiles are 64 rows (KV_TILE 64 or
// 128, BWD_INNER 64, head size 64: gen/kernels.c checks). A tile's rows are 64 16-bit elements (128 bytes) in the
// 128-byte swizzle: the 16-byte chunk c of row r sits at chunk c ^ (r % 8), tiles 1024-byte aligned. For a thread
// (w = warp in its warpgroup, g = lane / 4, t = lane % 4), the fp32 accumulator element d[x] of a 64 x N product is
// at row 16w + g + 8((x >> 1) & 1), column 8(x >> 2) + 2t + (x & 1): the same places as the mma.sync layout above,
// so a 16-column slab of accumulators, packed to 16 bits, is the A operand of the next product from registers.
#if HOPPER_WGMMA
constexpr int SW_TILE = 64 * 64;                 // elements of a 64-row tile

// ROWS rows of one head from tokens t0.. (row pitch `width`) into a swizzled tile; rows at or past T are zeros
// (unrolled: a thread's rows are NT / 8 apart, at the same swizzled column where NT is a multiple of 64)
template <int ROWS, int NT>
__device__ __forceinline__ void load_rows_sw(floatX *tile, const floatX *src, int width, int t0) {
#pragma unroll
    for (int k = 0; k < (ROWS * 8 + NT - 1) / NT; k++) {
        const int v = threadIdx.x + k * NT, r = v / 8, c = (v % 8) * 8, t = t0 + r;
        if (ROWS * 8 % NT && v >= ROWS * 8) break;
        cp_async16(tile + sw128(r, c), src + (long long)(t < T ? t : 0) * width + c, t < T);
    }
}

__device__ __forceinline__ u64 desc_n(const floatX *tile, int kstep) { return desc_sw(tile + kstep * 16 * 64, SW_TILE * 2); }

// a thread's 64 x N accumulators as N / 8 8-column tiles of the mma.sync layout (the same places), for the helpers
// above: acc_to_a (the A operand of a k-step), store_acc, softmax_row
template <int N> __device__ __forceinline__ float (&tiles(float (&d)[N]))[N / 4][4] {
    return *reinterpret_cast<float(*)[N / 4][4]>(&d);
}
// acc * scale -> global rows row0 + 16w + g (+8) of a warpgroup, head columns (pitch width)
__device__ __forceinline__ void store_acc_wg(floatX *dst, int width, float (&d)[32], int row0, float s) {
    const int lane = threadIdx.x % WARP_SIZE, w = threadIdx.x % WG_THREADS / WARP_SIZE;
    store_acc(dst, width, tiles(d), row0 + 16 * w, s, s, lane);
}
// One committed group: d = A B^T over the head's four k-steps, A and B K-major tiles (S = Q K^T, dP = dO V^T; d of
// N / 2 accumulators a thread, N = 64 or 128 rows of b)
template <int N> __device__ __forceinline__ void product_ss(float (&d)[N / 2], const floatX *a, const floatX *b) {
    for (int kk = 0; kk < 4; kk++) wgmma_ss<0>(d, desc_k(a, kk), desc_k(b, kk), kk);
    wgmma_commit();
}
// One committed group: d += A B over K k-steps, A from registers, B the N-major tile b (P V, P^T dO, dS^T Q, dS K)
template <int K> __device__ __forceinline__ void product_rs(float (&d)[32], const u32 (&a)[K][4], const floatX *b) {
    for (int kk = 0; kk < K; kk++) wgmma_rs<1>(d, a[kk], desc_n(b, kk));
    wgmma_commit();
}
// K and V rows t0..t0+ROWS-1 of one head into two swizzled tiles at kv (K, then V)
template <int NT, int ROWS = 64>
__device__ __forceinline__ void load_kv_sw(floatX *kv, const HeadCols &hc, int t0) {
    load_rows_sw<ROWS, NT>(kv, hc.k, QKVW, t0);
    load_rows_sw<ROWS, NT>(kv + ROWS * 64, hc.v, QKVW, t0);
}
// a stage's cp.async copies are in and visible to wgmma (the generic proxy's shared-memory writes ordered before the
// async proxy's reads), and every warpgroup is done with the other stage
__device__ __forceinline__ void stage_arrived() {
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
}

// The forward as flash_forward below, warpgroup wg owning query rows wq0..wq0+63 (FWD_SM = 90): per key tile of
// KV_TILE rows (64 or 128), S = Q K^T (shared memory, K-major, N = KV_TILE), the online softmax in registers, O += P V
// (P from registers, V N-major). Pipelined in the warpgroup (FlashAttention-3's intra-warpgroup overlap): tile j's S
// product is issued with tile j-1's P V, and tile j's softmax runs while that P V does; the output is rescaled after
// it. Three stages of K and V: tile j+1 loads while tile j's K and tile j-1's V are read. A template on KV so that
// only FWD_SM 90's call instantiates it (other key tiles are mma.sync's, which wgmma's products do not take).
template <int KV>
__device__ __forceinline__ void forward_wgmma(floatX *out, float *stats, const floatX *qkv, unsigned char *smem_raw) {
    static_assert(KV == 64 || KV == 128, "forward_wgmma: key tiles of 64 or 128 rows");
    constexpr int KSTEPS = KV / 16;
    floatX *sq = smem_1024(smem_raw), *stages = sq + Q_TILE * 64;   // stage s: K, then V
    const int tid = threadIdx.x, wg = tid / WG_THREADS, w = tid % WG_THREADS / WARP_SIZE, lane = tid % WARP_SIZE;
    const int g = lane / 4, c2 = lane % 4 * 2, h = blockIdx.y, b = blockIdx.z;
    const int qt = gridDim.x - 1 - blockIdx.x;           // the longest rows first
    const int q0 = qt * Q_TILE, wq0 = q0 + wg * 64, rq0 = wq0 + 16 * w;   // rq0: the warp's 16 rows
    const HeadCols hc(qkv, b, h);
    // key tiles: the block's (up to its last query row) and the warpgroup's (a tile wholly after its rows is not)
    const int last = min(q0 + Q_TILE, T) - 1, n_block = last / KV + 1, n_wg = min(wq0 + 63, last) / KV + 1;
    auto stage = [&](int j) { return stages + j % 3 * 2 * KV * 64; };
    load_rows_sw<Q_TILE, FWD_THREADS>(sq, hc.q, QKVW, q0);
    load_kv_sw<FWD_THREADS, KV>(stage(0), hc, 0);
    cp_async_commit();
    const floatX *mq = sq + wg * SW_TILE;
    float o[32], s[KV / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    u32 pa[KSTEPS][4];
    for (int x = 0; x < 32; x++) o[x] = 0.0f;
    for (int x = 0; x < KV / 2; x++) s[x] = 0.0f;
    // tile j's loads: every warpgroup waits for them (tile j-2's stage is then free) and starts tile j+1's
    auto next_stage = [&](int j) {
        stage_arrived();
        if (j + 1 < n_block) load_kv_sw<FWD_THREADS, KV>(stage(j + 1), hc, (j + 1) * KV);
        cp_async_commit();
    };
    // tile j's softmax (after its S product): s becomes P, alpha the factors that take the output to the new maxima
    auto softmax = [&](int j, float (&alpha)[2]) {
        const int k0 = j * KV;
        for (int half = 0; half < 2; half++)
            alpha[half] = softmax_p(tiles(s), m[half], l[half], half, rq0 + g + 8 * half, k0, k0 + KV - 1 > rq0, c2);
    };
    float alpha[2];
    next_stage(0);
    wgmma_fence();
    product_ss<KV>(s, mq, stage(0));
    wgmma_wait();
    pin(s);
    softmax(0, alpha);                                   // (the output is still zero)
    for (int kk = 0; kk < KSTEPS; kk++) acc_to_a(pa[kk], tiles(s), kk);
    for (int j = 1; j < n_wg; j++) {
        next_stage(j);
        wgmma_fence();
        product_ss<KV>(s, mq, stage(j));
        product_rs(o, pa, stage(j - 1) + KV * 64);
        wgmma_wait<1>();                                 // S is done; P V runs on beside the softmax
        pin(s);
        softmax(j, alpha);
        wgmma_wait();
        pin(o);
        for (int half = 0; half < 2; half++) rescale_row(tiles(o), half, alpha[half]);
        for (int kk = 0; kk < KSTEPS; kk++) acc_to_a(pa[kk], tiles(s), kk);
    }
    wgmma_fence();
    product_rs(o, pa, stage(n_wg - 1) + KV * 64);
    wgmma_wait();
    pin(o);
    for (int j = n_wg; j < n_block; j++) next_stage(j);   // the other warpgroups' tiles (every thread loads and waits)
    for (int half = 0; half < 2; half++) {
        l[half] += __shfl_xor_sync(FULL_MASK, l[half], 1);
        l[half] += __shfl_xor_sync(FULL_MASK, l[half], 2);
    }
    store_acc(out + head_row(b, 0, C) + h * HS, C, tiles(o), rq0, 1.0f / l[0], 1.0f / l[1], lane);
    if ((lane & 3) == 0)
        for (int half = 0; half < 2; half++) {
            const int i = rq0 + g + 8 * half;
            if (i < T) stats[((long long)b * NH + h) * T + i] = (m[half] + log2f(l[half])) * LN2;
        }
}

// The backward (BWD_SM = 90), one warpgroup a block (BWD_TILE 64), each kernel pipelined across its streamed tiles as
// the forward is: tile t's S and dP products are issued together with tile t-1's last product (dK in the dK/dV
// kernel, dQ in the dQ one), so that tile t's exponentials run while those products do. The groups complete in the
// order they were committed, S(t), dP(t), then tile t-1's last product; at t = 0 that one is a product of zeros (its
// A registers start zeroed), which keeps the loop free of branches around wgmma (with them ptxas serializes every
// product, C7520) and of a peeled first tile (whose copies of accumulators in flight serialize them too, C7514).
// Three stages of the streamed tiles: tile t+1 loads while tile t's are read and tile t-1's last product may run.
//
// The loop both backward kernels share (above): per tile t, its stage arrived, S(t) and dP(t) issued, then tile t-1's
// last product (at t = 0 of zeros: its A registers start zeroed), then tile(t), which returns with that product done;
// after the last tile its last product, and every group done.
template <class NextStage, class IssueSdp, class IssueLast, class Tile>
__device__ __forceinline__ void backward_tiles(int n, NextStage next_stage, IssueSdp issue_s_dp, IssueLast issue_last,
                                               Tile tile) {
    for (int t = 0; t < n; t++) {
        next_stage(t);
        wgmma_fence();
        issue_s_dp(t);
        issue_last(t - 1);
        tile(t);
    }
    wgmma_fence();
    issue_last(n - 1);
    wgmma_wait();
}

// dK and dV as flash_backward_dkdv below, for key rows j0..j0+63: per query tile, S^T = K Q^T and dP^T = V dO^T (A and
// B from shared memory, both K-major), then P^T and dS^T in registers, dV += P^T dO and dK += dS^T Q (A from
// registers, B N-major: dO and Q as stored). It takes 204 registers: in 168 (three blocks a multiprocessor) ptxas
// would serialize its products (C7512), so two (BWD_BLOCKS, gen/kernels.c).
__device__ __forceinline__ void dkdv_wgmma(floatX *dqkv, const floatX *qkv, const floatX *dout, const float *stats,
                                           const float *ddot, unsigned char *smem_raw) {
    floatX *sk = smem_1024(smem_raw), *sv = sk + SW_TILE, *streamed = sv + SW_TILE;   // stage s: Q, then dO
    float *floats = reinterpret_cast<float *>(streamed + 6 * SW_TILE);              // stage s: lse, then ddot
    const int tid = threadIdx.x, w = tid / WARP_SIZE, g = tid % WARP_SIZE / 4, c2 = tid % 4 * 2;
    const int kvh = blockIdx.y, b = blockIdx.z, j0 = (gridDim.x - 1 - blockIdx.x) * 64;   // the longest columns first
    const HeadCols own(qkv, b, kvh * KV_GROUP);          // the key/value head's k and v
    const int n = (T - j0 + 63) / 64;                    // the query tiles at or after the key tile, a query head
    auto sq = [&](int t) { return streamed + t % 3 * 2 * SW_TILE; };
    auto fl = [&](int t) { return floats + t % 3 * 128; };
    auto load_tile = [&](int t) {                        // tile t: query tile t % n of the group's query head t / n
        const int h = kvh * KV_GROUP + t / n, i0 = j0 + 64 * (t % n);
        load_rows_sw<64, WG_THREADS>(sq(t), qkv + head_row(b, 0, QKVW) + h * HS, QKVW, i0);
        load_rows_sw<64, WG_THREADS>(sq(t) + SW_TILE, dout + head_row(b, 0, C) + h * HS, C, i0);
        load_floats<64, WG_THREADS>(fl(t), stats + ((long long)b * NH + h) * T, i0);
        load_floats<64, WG_THREADS>(fl(t) + 64, ddot + ((long long)b * NH + h) * T, i0);
    };
    auto next_stage = [&](int t) {                       // tile t is in; tile t+1 loads into tile t-2's stage
        stage_arrived();
        if (t + 1 < KV_GROUP * n) load_tile(t + 1);
        cp_async_commit();
    };
    load_rows_sw<64, WG_THREADS>(sk, own.k, QKVW, j0);
    load_rows_sw<64, WG_THREADS>(sv, own.v, QKVW, j0);
    load_tile(0);
    cp_async_commit();
    float dk[32], dv[32], s[32], dp[32];
    for (int x = 0; x < 32; x++) dk[x] = dv[x] = s[x] = dp[x] = 0.0f;   // s, dp: overwritten by their first k-step
    u32 pa[4][4], sa[4][4] = {};
    auto issue_s_dp = [&](int t) {                       // S^T = K Q^T and dP^T = V dO^T of tile t
        product_ss<64>(s, sk, sq(t));
        product_ss<64>(dp, sv, sq(t) + SW_TILE);
    };
    // tile t up to dS^T in sa, dV's product issued (in flight); tile t-1's dK is done on return
    auto tile = [&](int t) {
        const int first = t % n == 0;                    // the query head's tile of the diagonal
        const int i0 = j0 + 64 * (t % n);
        const float *lse = fl(t), *dd = lse + 64;
        wgmma_wait<2>();                                 // S^T(t)
        pin(s);
        for (int x = 0; x < 32; x++) {                   // s <- P^T; a query before the key (i < j) adds nothing
            const int ci = 8 * (x >> 2) + c2 + (x & 1), j = j0 + 16 * w + g + 8 * ((x >> 1) & 1);
            float p = exp2_ftz(fmaf(s[x], SCALE_LOG2, -lse[ci] * LOG2E));
            if (first && i0 + ci < j) p = 0.0f;
            s[x] = p;
        }
        for (int kk = 0; kk < 4; kk++) acc_to_a(pa[kk], tiles(s), kk);
        wgmma_fence();
        product_rs(dv, pa, sq(t) + SW_TILE);
        wgmma_wait<1>();                                 // dP^T(t) and dK(t-1); dV(t) runs on
        pin(dp);
        for (int x = 0; x < 32; x++) dp[x] = s[x] * (dp[x] - dd[8 * (x >> 2) + c2 + (x & 1)]);
        for (int kk = 0; kk < 4; kk++) acc_to_a(sa[kk], tiles(dp), kk);
    };
    backward_tiles(KV_GROUP * n, next_stage, issue_s_dp, [&](int t) { product_rs(dk, sa, sq(t)); }, tile);
    pin(dv);
    pin(dk);
    floatX *drow = dqkv + head_row(b, 0, QKVW);
    store_acc_wg(drow + k_at(kvh), QKVW, dk, j0, SCALE);
    store_acc_wg(drow + v_at(kvh), QKVW, dv, j0, 1.0f);
}

// dQ as flash_backward_dq below, for query rows q0..q0+63: per key tile, S = Q K^T and dP = dO V^T (shared memory,
// K-major), P and dS in registers, dQ += dS K (A from registers, K N-major). Also writes ddot for the dK/dV kernel.
__device__ __forceinline__ void dq_wgmma(floatX *dqkv, float *ddot, const floatX *qkv, const floatX *dout,
                                         const floatX *out, const float *stats, unsigned char *smem_raw) {
    floatX *sq = smem_1024(smem_raw), *sdo = sq + SW_TILE, *streamed = sdo + SW_TILE;   // stage s: K, then V
    const int tid = threadIdx.x, w = tid / WARP_SIZE, lane = tid % WARP_SIZE, g = lane / 4, c2 = lane % 4 * 2;
    const int h = blockIdx.y, b = blockIdx.z, q0 = (gridDim.x - 1 - blockIdx.x) * 64, rq0 = q0 + 16 * w;
    const HeadCols hc(qkv, b, h);
    const floatX *dbase = dout + head_row(b, 0, C) + h * HS;
    const int n = min(q0 + 63, T - 1) / 64 + 1;          // the key tiles at or before the query tile
    auto skv = [&](int t) { return streamed + t % 3 * 2 * SW_TILE; };
    auto next_stage = [&](int t) {
        stage_arrived();
        if (t + 1 < n) load_kv_sw<WG_THREADS>(skv(t + 1), hc, 64 * (t + 1));
        cp_async_commit();
    };
    float lse2[2], D[2];
    for (int half = 0; half < 2; half++) {
        const int i = rq0 + g + 8 * half;
        lse2[half] = i < T ? stats[((long long)b * NH + h) * T + i] * LOG2E : 0.0f;
    }
    load_rows_sw<64, WG_THREADS>(sq, hc.q, QKVW, q0);
    load_rows_sw<64, WG_THREADS>(sdo, dbase, C, q0);
    load_kv_sw<WG_THREADS>(skv(0), hc, 0);
    cp_async_commit();
    {   // ddot of the warp's 16 rows while the tiles load
        const float d = rows_ddot<16>(ddot, dout, out, b, h, rq0, lane);
        for (int half = 0; half < 2; half++) D[half] = __shfl_sync(FULL_MASK, d, g + 8 * half);
    }
    float dq[32], s[32], dp[32];
    for (int x = 0; x < 32; x++) dq[x] = s[x] = dp[x] = 0.0f;
    u32 sa[4][4] = {};
    auto issue_s_dp = [&](int t) {                       // S = Q K^T and dP = dO V^T of key tile t
        product_ss<64>(s, sq, skv(t));
        product_ss<64>(dp, sdo, skv(t) + SW_TILE);
    };
    auto tile = [&](int t) {                             // tile t up to dS in sa; tile t-1's dQ is done on return
        const int j0 = 64 * t;
        wgmma_wait<2>();                                 // S(t)
        pin(s);
        for (int x = 0; x < 32; x++) {
            const int half = (x >> 1) & 1, j = j0 + 8 * (x >> 2) + c2 + (x & 1), i = rq0 + g + 8 * half;
            const float p = exp2_ftz(fmaf(s[x], SCALE_LOG2, -lse2[half]));
            s[x] = t == n - 1 && j > i ? 0.0f : p;
        }
        wgmma_wait<1>();                                 // dP(t); dQ(t-1) may run on
        pin(dp);
        for (int x = 0; x < 32; x++) dp[x] = s[x] * (dp[x] - D[(x >> 1) & 1]);
        wgmma_wait();                                    // dQ(t-1): its A registers are free
        for (int kk = 0; kk < 4; kk++) acc_to_a(sa[kk], tiles(dp), kk);
    };
    backward_tiles(n, next_stage, issue_s_dp, [&](int t) { product_rs(dq, sa, skv(t)); }, tile);
    pin(dq);
    store_acc_wg(dqkv + head_row(b, 0, QKVW) + h * HS, QKVW, dq, q0, SCALE);
}
#endif
static_assert((FWD_SM != 90 && BWD_SM != 90) || HOPPER_WGMMA,
              "attention: FWD_SM or BWD_SM = 90 (wgmma) needs a Hopper GPU: sm_90, compiled as sm_90a");

KERNEL(flash_forward) {
    extern __shared__ __align__(16) unsigned char smem_bytes[];
#if HOPPER_WGMMA
    if constexpr (FWD_SM == 90) {
        forward_wgmma<KV_TILE>(out, stats, qkv, smem_bytes);
        return;
    }
#endif
    // two stages of (K tile, V tile); Q is staged in stage 1 before the first K/V tiles go there
    floatX *stage0 = reinterpret_cast<floatX *>(smem_bytes), *stage1 = stage0 + 2 * KV_TILE * LDS;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, h = blockIdx.y, b = blockIdx.z;
    const int qt = gridDim.x - 1 - blockIdx.x;           // the longest rows first
    const int q0 = qt * Q_TILE, wq0 = q0 + warp * Q_WARP_ROWS;
    const HeadCols hc(qkv, b, h);
    auto load_kv = [&](int kt) {
        floatX *st = kt & 1 ? stage1 : stage0;
        load_rows<KV_TILE, FWD_THREADS>(st, hc.k, QKVW, kt * KV_TILE);
        load_rows<KV_TILE, FWD_THREADS>(st + KV_TILE * LDS, hc.v, QKVW, kt * KV_TILE);
    };

    load_rows<Q_TILE, FWD_THREADS>(stage1, hc.q, QKVW, q0);
    load_kv(0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    u32 qf[MT][HS16][4];
    for (int mt = 0; mt < MT; mt++)
        for (int kk = 0; kk < HS16; kk++) ldsm4(qf[mt][kk], a_addr(stage1, warp * Q_WARP_ROWS + mt * 16, kk * 16, lane));

    const int last = q0 + Q_TILE - 1 < T - 1 ? q0 + Q_TILE - 1 : T - 1;
    const int n_kv = last / KV_TILE + 1;
    float o[MT][HS / 8][4] = {};
    float m[MT][2], l[MT][2] = {};
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY;
    const int g = lane >> 2, c2 = (lane & 3) * 2;
    for (int kt = 0; kt < n_kv; kt++) {
        const int k0 = kt * KV_TILE;
        cp_async_wait<0>();                              // tile kt is in
        __syncthreads();                                 // for every thread, and every warp is done with tile kt-1
        if (kt + 1 < n_kv) load_kv(kt + 1);              // (and with Q) so that tile kt+1 may take its place
        cp_async_commit();
        const floatX *sk = kt & 1 ? stage1 : stage0, *sv = sk + KV_TILE * LDS;
        float s[MT][KV_TILE / 8][4] = {};
        for (int kk = 0; kk < HS16; kk++)
            for (int np = 0; np < KV_TILE / 16; np++) {
                u32 bf[4];
                ldsm4(bf, bn_addr(sk, np * 16, kk * 16, lane));
                for (int mt = 0; mt < MT; mt++) {       // one load of K serves every m-tile of the warp
                    mma2(s[mt][2 * np], s[mt][2 * np + 1], qf[mt][kk], bf);
                }
            }

        // the online softmax (softmax_row)
        for (int mt = 0; mt < MT; mt++) {
            const bool diagonal = k0 + KV_TILE - 1 > wq0 + mt * 16;
            for (int half = 0; half < 2; half++)
                softmax_row(s[mt], o[mt], m[mt][half], l[mt][half], half, wq0 + mt * 16 + g + 8 * half, k0, diagonal, c2);
        }

        for (int kk = 0; kk < KV_TILE / 16; kk++) {
            u32 a[MT][4];
            for (int mt = 0; mt < MT; mt++) acc_to_a(a[mt], s[mt], kk);
            for (int dp = 0; dp < HS16; dp++) {
                u32 bf[4];
                ldsm4_t(bf, bt_addr(sv, kk * 16, dp * 16, lane));
                for (int mt = 0; mt < MT; mt++) {
                    mma2(o[mt][2 * dp], o[mt][2 * dp + 1], a[mt], bf);
                }
            }
        }
    }

    for (int mt = 0; mt < MT; mt++) {
        for (int half = 0; half < 2; half++) {
            l[mt][half] += __shfl_xor_sync(FULL_MASK, l[mt][half], 1);
            l[mt][half] += __shfl_xor_sync(FULL_MASK, l[mt][half], 2);
        }
        store_acc(out + head_row(b, 0, C) + h * HS, C, o[mt], wq0 + mt * 16, 1.0f / l[mt][0], 1.0f / l[mt][1], lane);
        if ((lane & 3) == 0)
            for (int half = 0; half < 2; half++) {
                const int i = wq0 + mt * 16 + g + 8 * half;
                if (i < T) stats[((long long)b * NH + h) * T + i] = (m[mt][half] + log2f(l[mt][half])) * LN2;
            }
    }
}

// Shared memory of both backward kernels: the block's own BWD_TILE rows of two tensors (own0, own1), and two
// stages of the streamed BWD_INNER rows of two more (in0, in1) with, for the dK/dV kernel, the streamed query
// rows' statistics and row sums: while one stage is in use the next one is on its way (cp.async).
struct BwdSmem {
    floatX *own0, *own1, *streamed;
    float *floats;
    __device__ __forceinline__ BwdSmem(unsigned char *p) {
        own0 = reinterpret_cast<floatX *>(p);
        own1 = own0 + BWD_TILE * LDS;
        streamed = own1 + BWD_TILE * LDS;
        floats = reinterpret_cast<float *>(streamed + 4 * BWD_INNER * LDS);
    }
    __device__ __forceinline__ floatX *in0(int stage) const { return streamed + stage * 2 * BWD_INNER * LDS; }
    __device__ __forceinline__ floatX *in1(int stage) const { return in0(stage) + BWD_INNER * LDS; }
    __device__ __forceinline__ float *lse(int stage) const { return floats + stage * 2 * BWD_INNER; }
    __device__ __forceinline__ float *dd(int stage) const { return lse(stage) + BWD_INNER; }
};

// dK and dV of BWD_TILE key rows: for every query tile at or after them, P^T = exp(K Q^T * scale - lse),
// dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - ddot), dK += dS^T Q (times scale at the end).
// Query rows past T are zeros in Q and dO, so whatever their probability, they add nothing.
KERNEL(flash_backward_dkdv) {
    extern __shared__ __align__(16) unsigned char smem_bytes[];
#if HOPPER_WGMMA
    if constexpr (BWD_SM == 90) {
        dkdv_wgmma(dqkv, qkv, dout, stats, ddot, smem_bytes);
        return;
    }
#endif
    BwdSmem sm(smem_bytes);
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, kvh = blockIdx.y, b = blockIdx.z;
    const int jt = gridDim.x - 1 - blockIdx.x;           // the longest columns first
    const int j0 = jt * BWD_TILE, wj0 = j0 + warp * BWD_WARP_ROWS;
    const HeadCols own(qkv, b, kvh * KV_GROUP);          // the key/value head's k and v
    const int first = (j0 / BWD_INNER) * BWD_INNER, n = (T - first + BWD_INNER - 1) / BWD_INNER;   // a query head's tiles
    auto load_stage = [&](int stage, int t) {            // tile t: query tile t % n of the group's query head t / n
        const int h = kvh * KV_GROUP + t / n, i0 = first + (t % n) * BWD_INNER;
        load_rows<BWD_INNER, BWD_THREADS>(sm.in0(stage), qkv + head_row(b, 0, QKVW) + h * HS, QKVW, i0);
        load_rows<BWD_INNER, BWD_THREADS>(sm.in1(stage), dout + head_row(b, 0, C) + h * HS, C, i0);
        load_floats<BWD_INNER, BWD_THREADS>(sm.lse(stage), stats + ((long long)b * NH + h) * T, i0);
        load_floats<BWD_INNER, BWD_THREADS>(sm.dd(stage), ddot + ((long long)b * NH + h) * T, i0);
    };
    load_rows<BWD_TILE, BWD_THREADS>(sm.own0, own.k, QKVW, j0);
    load_rows<BWD_TILE, BWD_THREADS>(sm.own1, own.v, QKVW, j0);
    load_stage(0, 0);
    cp_async_commit();

    float dk[MB][HS / 8][4] = {}, dv[MB][HS / 8][4] = {};
    const int g = lane >> 2, c2 = (lane & 3) * 2;
    int stage = 0;
    for (int t = 0; t < KV_GROUP * n; t++, stage ^= 1) {   // the group's query heads in turn, summed in dk and dv
        const int i0 = first + (t % n) * BWD_INNER;
        cp_async_wait<0>();                              // this stage is in
        __syncthreads();                                 // for every thread, and every warp is done with the other
        if (t + 1 < KV_GROUP * n) load_stage(stage ^ 1, t + 1);
        cp_async_commit();
        const floatX *sk = sm.own0, *sv = sm.own1, *sq = sm.in0(stage), *sdo = sm.in1(stage);
        const float *lse = sm.lse(stage), *dd = sm.dd(stage);

        float s[MB][BWD_INNER / 8][4] = {}, dp[MB][BWD_INNER / 8][4] = {};
        for (int kk = 0; kk < HS16; kk++) {
            u32 ka[MB][4], va[MB][4];
            for (int mb = 0; mb < MB; mb++) {
                ldsm4(ka[mb], a_addr(sk, warp * BWD_WARP_ROWS + mb * 16, kk * 16, lane));
                ldsm4(va[mb], a_addr(sv, warp * BWD_WARP_ROWS + mb * 16, kk * 16, lane));
            }
            for (int np = 0; np < BWD_INNER / 16; np++) {
                u32 bq[4], bd[4];
                ldsm4(bq, bn_addr(sq, np * 16, kk * 16, lane));
                ldsm4(bd, bn_addr(sdo, np * 16, kk * 16, lane));
                for (int mb = 0; mb < MB; mb++) {       // one load of Q and dO serves every m-tile of the warp
                    mma2(s[mb][2 * np], s[mb][2 * np + 1], ka[mb], bq);
                    mma2(dp[mb][2 * np], dp[mb][2 * np + 1], va[mb], bd);
                }
            }
        }
        // s <- P^T, dp <- dS^T; a query before the key (i < j) contributes nothing
        for (int mb = 0; mb < MB; mb++) {
            const int mj0 = wj0 + mb * 16;
            const bool diagonal = i0 < mj0 + 15;
            for (int n = 0; n < BWD_INNER / 8; n++)
                for (int e = 0; e < 4; e++) {
                    const int ci = n * 8 + c2 + (e & 1), j = mj0 + g + 8 * (e >> 1);
                    float p = exp2_ftz(fmaf(s[mb][n][e], SCALE_LOG2, -lse[ci] * LOG2E));
                    if (diagonal && i0 + ci < j) p = 0.0f;
                    s[mb][n][e] = p;
                    dp[mb][n][e] = p * (dp[mb][n][e] - dd[ci]);
                }
        }
        for (int kk = 0; kk < BWD_INNER / 16; kk++) {
            u32 pa[MB][4], sa[MB][4];
            for (int mb = 0; mb < MB; mb++) {
                acc_to_a(pa[mb], s[mb], kk);
                acc_to_a(sa[mb], dp[mb], kk);
            }
            for (int np = 0; np < HS16; np++) {
                u32 bd[4], bq[4];
                ldsm4_t(bd, bt_addr(sdo, kk * 16, np * 16, lane));
                ldsm4_t(bq, bt_addr(sq, kk * 16, np * 16, lane));
                for (int mb = 0; mb < MB; mb++) {
                    mma2(dv[mb][2 * np], dv[mb][2 * np + 1], pa[mb], bd);
                    mma2(dk[mb][2 * np], dk[mb][2 * np + 1], sa[mb], bq);
                }
            }
        }
    }
    floatX *drow = dqkv + head_row(b, 0, QKVW);
    for (int mb = 0; mb < MB; mb++) {
        store_acc(drow + k_at(kvh), QKVW, dk[mb], wj0 + mb * 16, SCALE, SCALE, lane);
        store_acc(drow + v_at(kvh), QKVW, dv[mb], wj0 + mb * 16, 1.0f, 1.0f, lane);
    }
}

// dQ of BWD_TILE query rows: for every key tile at or before them, P = exp(Q K^T * scale - lse),
// dP = dO V^T, dS = P (dP - ddot), dQ += dS K (times scale at the end).
KERNEL(flash_backward_dq) {
    extern __shared__ __align__(16) unsigned char smem_bytes[];
#if HOPPER_WGMMA
    if constexpr (BWD_SM == 90) {
        dq_wgmma(dqkv, ddot, qkv, dout, out, stats, smem_bytes);
        return;
    }
#endif
    BwdSmem sm(smem_bytes);
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, h = blockIdx.y, b = blockIdx.z;
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int q0 = qt * BWD_TILE, wq0 = q0 + warp * BWD_WARP_ROWS;
    const HeadCols hc(qkv, b, h);
    const floatX *dbase = dout + head_row(b, 0, C) + h * HS;
    const int g = lane >> 2, c2 = (lane & 3) * 2;
    float lse2[MB][2], D[MB][2] = {};
    for (int mb = 0; mb < MB; mb++)
        for (int half = 0; half < 2; half++) {
            const int i = wq0 + mb * 16 + g + 8 * half;
            lse2[mb][half] = i < T ? stats[((long long)b * NH + h) * T + i] * LOG2E : 0.0f;
        }
    auto load_stage = [&](int stage, int j0) {
        load_rows<BWD_INNER, BWD_THREADS>(sm.in0(stage), hc.k, QKVW, j0);
        load_rows<BWD_INNER, BWD_THREADS>(sm.in1(stage), hc.v, QKVW, j0);
    };
    load_rows<BWD_TILE, BWD_THREADS>(sm.own0, hc.q, QKVW, q0);
    load_rows<BWD_TILE, BWD_THREADS>(sm.own1, dbase, C, q0);
    cp_async_commit();
    load_stage(0, 0);
    cp_async_commit();
    // ddot of the warp's rows while the tiles load; each lane takes those of its rows g and g + 8 of each m-tile
    {
        const float d = rows_ddot<BWD_WARP_ROWS>(ddot, dout, out, b, h, wq0, lane);
        for (int mb = 0; mb < MB; mb++)
            for (int half = 0; half < 2; half++) D[mb][half] = __shfl_sync(FULL_MASK, d, mb * 16 + g + 8 * half);
    }
    cp_async_wait<1>();
    __syncthreads();
    u32 qf[MB][HS16][4], df[MB][HS16][4];
    for (int mb = 0; mb < MB; mb++)
        for (int kk = 0; kk < HS16; kk++) {
            ldsm4(qf[mb][kk], a_addr(sm.own0, warp * BWD_WARP_ROWS + mb * 16, kk * 16, lane));
            ldsm4(df[mb][kk], a_addr(sm.own1, warp * BWD_WARP_ROWS + mb * 16, kk * 16, lane));
        }

    float dq[MB][HS / 8][4] = {};
    const int last = q0 + BWD_TILE - 1 < T - 1 ? q0 + BWD_TILE - 1 : T - 1;
    int stage = 0;
    for (int j0 = 0; j0 <= last; j0 += BWD_INNER, stage ^= 1) {
        cp_async_wait<0>();                              // this stage is in
        __syncthreads();                                 // for every thread, and every warp is done with the other
        if (j0 + BWD_INNER <= last) load_stage(stage ^ 1, j0 + BWD_INNER);
        cp_async_commit();
        const floatX *sk = sm.in0(stage), *sv = sm.in1(stage);
        float s[MB][BWD_INNER / 8][4] = {}, dp[MB][BWD_INNER / 8][4] = {};
        for (int kk = 0; kk < HS16; kk++)
            for (int np = 0; np < BWD_INNER / 16; np++) {
                u32 bk[4], bv[4];
                ldsm4(bk, bn_addr(sk, np * 16, kk * 16, lane));
                ldsm4(bv, bn_addr(sv, np * 16, kk * 16, lane));
                for (int mb = 0; mb < MB; mb++) {       // one load of K and V serves every m-tile of the warp
                    mma2(s[mb][2 * np], s[mb][2 * np + 1], qf[mb][kk], bk);
                    mma2(dp[mb][2 * np], dp[mb][2 * np + 1], df[mb][kk], bv);
                }
            }
        for (int mb = 0; mb < MB; mb++) {
            const int mq0 = wq0 + mb * 16;
            const bool diagonal = j0 + BWD_INNER - 1 > mq0;
            for (int n = 0; n < BWD_INNER / 8; n++)
                for (int e = 0; e < 4; e++) {
                    const int half = e >> 1, j = j0 + n * 8 + c2 + (e & 1), i = mq0 + g + 8 * half;
                    float p = exp2_ftz(fmaf(s[mb][n][e], SCALE_LOG2, -lse2[mb][half]));
                    if (diagonal && j > i) p = 0.0f;
                    dp[mb][n][e] = p * (dp[mb][n][e] - D[mb][half]);
                }
        }
        for (int kk = 0; kk < BWD_INNER / 16; kk++) {
            u32 sa[MB][4];
            for (int mb = 0; mb < MB; mb++) acc_to_a(sa[mb], dp[mb], kk);
            for (int np = 0; np < HS16; np++) {
                u32 bk[4];
                ldsm4_t(bk, bt_addr(sk, kk * 16, np * 16, lane));
                for (int mb = 0; mb < MB; mb++) mma2(dq[mb][2 * np], dq[mb][2 * np + 1], sa[mb], bk);
            }
        }
    }
    for (int mb = 0; mb < MB; mb++)
        store_acc(dqkv + head_row(b, 0, QKVW) + h * HS, QKVW, dq[mb], wq0 + mb * 16, SCALE, SCALE, lane);
}
#endif
