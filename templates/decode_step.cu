// decode_step.cu: a whole decode step of few rows in one persistent kernel (Plan.decode_persistent): the
// embedding, every layer and the logits, the same math as the decode plan's op list (gen/schedule.c, decode_block)
// in phases that the kernel's blocks, one a multiprocessor, all resident (a cooperative launch), work through
// together, a grid-wide barrier between phases:
//   embed       x = wte[token] + wpe[pos]
//   per layer   qkv = LN1(x) @ qkvw^T + qkvb, the new key and value also into the cache at pos
//               atty = attention of the row's query over the cached positions 0..pos (a block per row and head)
//               res2 = x + (atty @ attprojw^T + attprojb)
//               fch = GELU(LN2(res2) @ fcw^T + fcb)
//               x = res2 + (fch @ fcprojw^T + fcprojb)
//   logits      LNf(x) @ wte^T
// A launch per step costs one launch, not five a layer, and before each barrier every warp prefetches into L2 the
// weight columns it will read in the next phase, so the weights stream while the barrier waits. Values are rounded
// to floatX where the op list stores them, and every sum runs in a fixed order: the same inputs give the same bits.
// What blocks write for other blocks is read with ld.global.cg (L2), since L1 is not coherent across blocks.
// Longer than a C file may be, on purpose: its phases share the layout, the barrier and the loads, and read better
// whole (docs/kernels-and-tuning.md).

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)            // NVRTC has no math.h
#endif
constexpr int WARPS = STEP_THREADS / WARP_SIZE;
constexpr int PK = X128;                             // floatX elements in a 16-byte packet
typedef Packed<floatX, PK> pvec;
constexpr float STEP_LN_EPS = 1e-5f;                 // templates/layernorm.cu's

// the parameters' offsets in elements: llm.c's order (common/gpt2.c, gpt2_param_sizes)
constexpr long long O_WTE = 0;
constexpr long long O_WPE = O_WTE + (long long)Vp * C;
constexpr long long O_LN1W = O_WPE + (long long)maxT * C;
constexpr long long O_LN1B = O_LN1W + (long long)L * C;
constexpr long long O_QKVW = O_LN1B + (long long)L * C;
constexpr long long O_QKVB = O_QKVW + (long long)L * 3 * C * C;
constexpr long long O_ATTPROJW = O_QKVB + (long long)L * 3 * C;
constexpr long long O_ATTPROJB = O_ATTPROJW + (long long)L * C * C;
constexpr long long O_LN2W = O_ATTPROJB + (long long)L * C;
constexpr long long O_LN2B = O_LN2W + (long long)L * C;
constexpr long long O_FCW = O_LN2B + (long long)L * C;
constexpr long long O_FCB = O_FCW + (long long)L * 4 * C * C;
constexpr long long O_FCPROJW = O_FCB + (long long)L * 4 * C;
constexpr long long O_FCPROJB = O_FCPROJW + (long long)L * 4 * C * C;
constexpr long long O_LNFW = O_FCPROJB + (long long)L * C;
constexpr long long O_LNFB = O_LNFW + C;
constexpr long long CACHE_LAYER = (long long)B * NH * cacheT * HS;   // a layer's keys (or values)

// a packet another block wrote in this launch: from L2, past this block's L1
__device__ __forceinline__ pvec load_cg(const floatX *p) {
    int4 v = __ldcg(reinterpret_cast<const int4 *>(p));
    return *reinterpret_cast<pvec *>(&v);
}

// The grid-wide barrier: sync[0] counts the blocks arrived, sync[1] is the barrier's generation. The last block to
// arrive resets the count and moves the generation on; the others wait for that. The fences make the writes before
// the barrier visible to every block after it (as cooperative groups' grid sync does).
__device__ __forceinline__ void grid_barrier(unsigned *sync) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned *gen = sync + 1;
        const unsigned g = *gen;
        __threadfence();
        if (atomicAdd(sync, 1u) == gridDim.x - 1) {
            atomicExch(sync, 0u);
            __threadfence();
            atomicAdd(sync + 1, 1u);
        } else {   // a block that never comes (a bug) ends the launch with an error after about a second, not a hang
            for (unsigned spins = 0; *gen == g; spins++) {
                __nanosleep(32);
                if (spins == (1u << 25)) __trap();
            }
        }
        __threadfence();
    }
    __syncthreads();
}

// The linears' split of the work: a block takes an equal share of a phase's OC columns, in chunks of at most
// STEP_CHUNK packets of weights (columns of IC contiguous in W, so a chunk is one span), each of its threads
// loading STEP_INFLIGHT packets of the span at once: every block is busy in every phase, and a thread's loads are
// all in flight together (a step of few rows waits on memory's latency, not its bandwidth).
// (2,048 for blocks of 1,024 threads, whose attention's shared arrays are twice as large: the static shared
// memory stays under 48 KB at head size 128)
constexpr int STEP_CHUNK = STEP_THREADS >= 1024 ? 2048 : 4096;
constexpr int STEP_INFLIGHT = STEP_CHUNK / STEP_THREADS;
static_assert(STEP_INFLIGHT * STEP_THREADS == STEP_CHUNK, "STEP_THREADS divides the chunk");
__shared__ float step_part[B][STEP_CHUNK];   // each packet's dot product, summed by column in a fixed order

// this block's columns [*c0, *c1) of a phase of OC
template <int OC>
__device__ __forceinline__ void block_columns(int *c0, int *c1) {
    const int per = (OC + gridDim.x - 1) / gridDim.x;
    *c0 = min(OC, (int)blockIdx.x * per);
    *c1 = min(OC, *c0 + per);
}

// the weight columns this block reads in a phase of OC columns of IC, into L2 (before the barrier that ends the
// phase before it), the block's warps taking equal parts of the span
template <int OC, int IC>
__device__ __forceinline__ void prefetch_columns(const floatX *W) {
    int c0, c1;
    block_columns<OC>(&c0, &c1);
    const long long bytes = (long long)(c1 - c0) * IC * sizeof(floatX);
    const long long part = (bytes / WARPS + 127) / 128 * 128;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const long long from = min(bytes, (long long)warp * part), to = min(bytes, from + part);
    prefetch_l2(reinterpret_cast<const char *>(W + (long long)c0 * IC) + from, to - from, lane);
}

// the mean and rstd of each row of x (B rows of C, another block's writes), in templates/layernorm.cu's order
__device__ __forceinline__ void ln_stats(const floatX *x, float (&mean)[B], float (&rstd)[B]) {
    const int lane = threadIdx.x % WARP_SIZE;
#pragma unroll
    for (int b = 0; b < B; b++) {
        float s = 0.0f;
        for (int p = lane; p < C / PK; p += WARP_SIZE) {
            const pvec v = load_cg(x + (long long)b * C + p * PK);
            for (int k = 0; k < PK; k++) s += to_f(v[k]);
        }
        const float m = warp_sum(s) / C;
        float s2 = 0.0f;
        for (int p = lane; p < C / PK; p += WARP_SIZE) {
            const pvec v = load_cg(x + (long long)b * C + p * PK);
            for (int k = 0; k < PK; k++) { const float d = to_f(v[k]) - m; s2 += d * d; }
        }
        mean[b] = m;
        rstd[b] = rsqrtf(warp_sum(s2) / C + STEP_LN_EPS);
    }
}

// One linear phase: the dot products of W's rows n (of OC, IC wide) with the B input rows, whose packet p in(b, p, v)
// writes (as floats, the values the op list would have stored); epi(b, n, sum) stores the result. The block's
// threads take its chunk's packets in turn (thread t: t, t + STEP_THREADS, ...), each packet's products summed in
// order into step_part; then a warp per column sums its packets there (lane, then the warp's butterfly): a fixed
// order, so the same inputs give the same bits.
template <int OC, int IC, class In, class Epi>
__device__ __forceinline__ void linear_phase(const floatX *W, In in, Epi epi) {
    constexpr int P = IC / PK;                     // packets a column
    static_assert(P <= STEP_CHUNK, "a column fits a chunk");
    constexpr int CH = STEP_CHUNK / P;             // columns a chunk
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    int c_begin, c_end;
    block_columns<OC>(&c_begin, &c_end);
    for (int c0 = c_begin; c0 < c_end; c0 += CH) {
        const int np = min(CH, c_end - c0) * P;
        const floatX *span = W + (long long)c0 * IC;
        pvec w[STEP_INFLIGHT];
#pragma unroll
        for (int i = 0; i < STEP_INFLIGHT; i++) {
            const int q = threadIdx.x + i * STEP_THREADS;
            w[i] = q < np ? load_vec_cs<floatX, PK>(span + (long long)q * PK) : pvec::zeros();
        }
#pragma unroll
        for (int i = 0; i < STEP_INFLIGHT; i++) {
            const int q = threadIdx.x + i * STEP_THREADS;
            if (q >= np) break;
#pragma unroll
            for (int b = 0; b < B; b++) {
                float x[PK];
                in(b, q % P, x);
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < PK; k++) s += to_f(w[i][k]) * x[k];
                step_part[b][q] = s;
            }
        }
        __syncthreads();
        for (int c = warp; c * P < np; c += WARPS)
#pragma unroll
            for (int b = 0; b < B; b++) {
                float s = 0.0f;
                for (int p = lane; p < P; p += WARP_SIZE) s += step_part[b][c * P + p];
                s = warp_sum(s);
                if (lane == 0) epi(b, c0 + c, s);
            }
        __syncthreads();   // step_part is the next chunk's
    }
}

// packet p of row b of x (C wide) after the LayerNorm with weights g, h: each value rounded to floatX as the
// LayerNorm kernel stores it
__device__ __forceinline__ void ln_packet(const floatX *x, const floatX *g, const floatX *h, const float (&mean)[B],
                                          const float (&rstd)[B], int b, int p, float (&out)[PK]) {
    const pvec v = load_cg(x + (long long)b * C + p * PK);
    const pvec gv = load_vec<floatX, PK>(g + p * PK), hv = load_vec<floatX, PK>(h + p * PK);
#pragma unroll
    for (int k = 0; k < PK; k++)
        out[k] = to_f(from_f<floatX>((to_f(v[k]) - mean[b]) * rstd[b] * to_f(gv[k]) + to_f(hv[k])));
}

// packet p of row b of a buffer n wide that another block wrote
template <int N>
__device__ __forceinline__ void plain_packet(const floatX *x, int b, int p, float (&out)[PK]) {
    const pvec v = load_cg(x + (long long)b * N + p * PK);
#pragma unroll
    for (int k = 0; k < PK; k++) out[k] = to_f(v[k]);
}

// The attention of row b's query, head h, over the cached positions 0..len-1 (the new one written by the qkv
// phase): the block's warps take the positions in turn (warp w: w, w + WARPS, ...), each with a running max, sum
// and weighted sum of values (its lanes own channels lane, lane + 32, ...); the warps' parts are then joined in warp
// order in shared memory. Deterministic: a fixed order everywhere.
constexpr int HS_LANE = (HS + WARP_SIZE - 1) / WARP_SIZE;   // channels a lane owns
constexpr double step_sqrt(double x) {
    double r = x > 1.0 ? x : 1.0;
    for (int i = 0; i < 64; i++) r = 0.5 * (r + x / r);
    return r;
}
constexpr float STEP_ATT_SCALE = (float)(1.0 / step_sqrt((double)HS));

__device__ void attention_item(const floatX *qkv, const floatX *kc, const floatX *vc, floatX *atty, int b, int h,
                               int len) {
    __shared__ float part_m[WARPS], part_l[WARPS], part_acc[WARPS][HS];
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    float q[HS_LANE], acc[HS_LANE];
#pragma unroll
    for (int i = 0; i < HS_LANE; i++) {
        const int d = lane + i * WARP_SIZE;
        q[i] = d < HS ? to_f(__ldcg(qkv + (long long)b * 3 * C + h * HS + d)) * STEP_ATT_SCALE : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const long long head = ((long long)b * NH + h) * cacheT * HS;
    for (int j = warp; j < len; j += WARPS) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < HS_LANE; i++) {
            const int d = lane + i * WARP_SIZE;
            if (d < HS) s += q[i] * to_f(__ldcg(kc + head + (long long)j * HS + d));
        }
        s = warp_sum(s);
        const float mn = fmaxf(m, s), corr = __expf(m - mn), e = __expf(s - mn);
        l = l * corr + e;
#pragma unroll
        for (int i = 0; i < HS_LANE; i++) {
            const int d = lane + i * WARP_SIZE;
            const float v = d < HS ? to_f(__ldcg(vc + head + (long long)j * HS + d)) : 0.0f;
            acc[i] = acc[i] * corr + e * v;
        }
        m = mn;
    }
    if (lane == 0) { part_m[warp] = m; part_l[warp] = l; }
#pragma unroll
    for (int i = 0; i < HS_LANE; i++) {
        const int d = lane + i * WARP_SIZE;
        if (d < HS) part_acc[warp][d] = acc[i];
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HS; d += STEP_THREADS) {
        float M = -INFINITY;
        for (int w = 0; w < WARPS; w++) M = fmaxf(M, part_m[w]);
        float sl = 0.0f, sa = 0.0f;
        for (int w = 0; w < WARPS; w++) {
            if (part_l[w] == 0.0f) continue;   // a warp with no position
            const float f = __expf(part_m[w] - M);
            sl += part_l[w] * f;
            sa += part_acc[w][d] * f;
        }
        atty[(long long)b * C + h * HS + d] = from_f<floatX>(sa / sl);
    }
    __syncthreads();   // the shared parts are the next item's
}

// One decode step for the B rows at position pos[0] (tokens: their tokens; the caches and buffers as the decode
// plan's). n_blocks is gridDim.x, the launch's geometry.
KERNEL(decode_step) {
    (void)n_blocks;
    unsigned *bar = reinterpret_cast<unsigned *>(sync);
    const floatX *P = params;
    const int t = pos[0], len = t + 1;
    // embed: x = wte[token] + wpe[pos], rounded as decode_embed stores it
    for (int i = blockIdx.x * STEP_THREADS + threadIdx.x; i < B * C; i += gridDim.x * STEP_THREADS) {
        const int b = i / C, c = i % C;
        x[i] = from_f<floatX>(to_f(P[O_WTE + (long long)tokens[b] * C + c]) + to_f(P[O_WPE + (long long)t * C + c]));
    }
    prefetch_columns<3 * C, C>(P + O_QKVW);
    grid_barrier(bar);
    for (int l = 0; l < L; l++) {
        float mean[B], rstd[B];
        floatX *kl = kcache + l * CACHE_LAYER, *vl = vcache + l * CACHE_LAYER;
        // qkv = LN1(x) @ qkvw^T + qkvb; the key and value columns also into the cache at t
        {
            const floatX *g = P + O_LN1W + (long long)l * C, *h = P + O_LN1B + (long long)l * C;
            const floatX *bias = P + O_QKVB + (long long)l * 3 * C;
            ln_stats(x, mean, rstd);
            linear_phase<3 * C, C>(P + O_QKVW + (long long)l * 3 * C * C,
                [&](int b, int p, float (&o)[PK]) { ln_packet(x, g, h, mean, rstd, b, p, o); },
                [&](int b, int n, float s) {
                    const floatX y = from_f<floatX>(s + to_f(bias[n]));
                    qkv[(long long)b * 3 * C + n] = y;
                    if (n >= C) {
                        const int c = (n - C) % C, hh = c / HS, d = c % HS;
                        floatX *cache = n < 2 * C ? kl : vl;
                        cache[(((long long)b * NH + hh) * cacheT + t) * HS + d] = y;
                    }
                });
        }
        prefetch_columns<C, C>(P + O_ATTPROJW + (long long)l * C * C);
        grid_barrier(bar);
        // attention: a block per (row, head)
        for (int item = blockIdx.x; item < B * NH; item += gridDim.x)
            attention_item(qkv, kl, vl, atty, item / NH, item % NH, len);
        grid_barrier(bar);
        // res2 = x + (atty @ attprojw^T + attprojb)
        {
            const floatX *bias = P + O_ATTPROJB + (long long)l * C;
            linear_phase<C, C>(P + O_ATTPROJW + (long long)l * C * C,
                [&](int b, int p, float (&o)[PK]) { plain_packet<C>(atty, b, p, o); },
                [&](int b, int n, float s) {
                    const long long at = (long long)b * C + n;
                    res2[at] = from_f<floatX>(to_f(__ldcg(x + at)) + to_f(from_f<floatX>(s + to_f(bias[n]))));
                });
        }
        prefetch_columns<4 * C, C>(P + O_FCW + (long long)l * 4 * C * C);
        grid_barrier(bar);
        // fch = GELU(LN2(res2) @ fcw^T + fcb)
        {
            const floatX *g = P + O_LN2W + (long long)l * C, *h = P + O_LN2B + (long long)l * C;
            const floatX *bias = P + O_FCB + (long long)l * 4 * C;
            ln_stats(res2, mean, rstd);
            linear_phase<4 * C, C>(P + O_FCW + (long long)l * 4 * C * C,
                [&](int b, int p, float (&o)[PK]) { ln_packet(res2, g, h, mean, rstd, b, p, o); },
                [&](int b, int n, float s) { fch[(long long)b * 4 * C + n] = from_f<floatX>(::gelu(s + to_f(bias[n]))); });
        }
        prefetch_columns<C, 4 * C>(P + O_FCPROJW + (long long)l * 4 * C * C);
        grid_barrier(bar);
        // x = res2 + (fch @ fcprojw^T + fcprojb)
        {
            const floatX *bias = P + O_FCPROJB + (long long)l * C;
            linear_phase<C, 4 * C>(P + O_FCPROJW + (long long)l * 4 * C * C,
                [&](int b, int p, float (&o)[PK]) { plain_packet<4 * C>(fch, b, p, o); },
                [&](int b, int n, float s) {
                    const long long at = (long long)b * C + n;
                    x[at] = from_f<floatX>(to_f(__ldcg(res2 + at)) + to_f(from_f<floatX>(s + to_f(bias[n]))));
                });
        }
        if (l + 1 < L) prefetch_columns<3 * C, C>(P + O_QKVW + (long long)(l + 1) * 3 * C * C);
        else prefetch_columns<Vp, C>(P + O_WTE);
        grid_barrier(bar);
    }
    // logits = LNf(x) @ wte^T
    float mean[B], rstd[B];
    ln_stats(x, mean, rstd);
    linear_phase<Vp, C>(P + O_WTE,
        [&](int b, int p, float (&o)[PK]) { ln_packet(x, P + O_LNFW, P + O_LNFB, mean, rstd, b, p, o); },
        [&](int b, int n, float s) { logits[(long long)b * Vp + n] = from_f<floatX>(s); });
}
