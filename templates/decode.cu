// decode.cu: generation, one token per row against the key/value cache, and the draw of the next token.
// Longer than a C file may be, on purpose: its kernels share one tile layout, fragment maps and pipeline, and read
// better whole than split across files that must agree on every constant (docs/kernels-and-tuning.md).
//   decode_embed              out[b,:] = wte[tokens[b],:] + wpe[pos,:]                 (the decode plan has T = 1)
//   kv_append                 kcache[b,j,pos+t,:] = k of qkv[b,t] kv head j, vcache likewise with v (the cache of one
//                             layer: (B, NKV, cacheT, HS), NKV = NH but with grouped-query attention; T is the
//                             plan's: 1 for decode, the prompt for a prefill)
//   decode_attention          split attention of the last query of each row over the cached positions 0..len-1
//                             (len = pos + T): a block per (split of KV_CHUNK positions, head, row). With one
//                             split in use, its block writes out[b, h*HS + d]; with more, each writes its max score
//                             m, l = sum exp(s - m) and acc = sum exp(s - m) v to partial, and the last of them to
//                             end combines: out = sum_s e^(m_s-M) acc_s[d] / sum_s e^(m_s-M) l_s, splits in order
//                             (flash-decoding in one kernel). The split of position len - 1 also appends the row's
//                             last token to the cache (read from qkv: a decode step needs no kv_append), by the
//                             first query head of each kv head's group. A relative's QK-norm (weights qnw, knw) and
//                             RoPE are applied here to the row's query and new key, as qkv's matmul left them
//                             (ATT_PREP: a decode step has no QK-norm or RoPE op; the cache holds keys after both)
// Query head h reads kv head kv_head_of(h) (grouped-query attention, docs/model.md "Architectures"), from the cache
// and from qkv's rows of QKVW features (q's NH heads, then k's NKV, then v's NKV), as they are: no kv_expand.
//   sample_tokens             each row's next token by the rule of runtime/sample/sampling.h, step for step
//   decode_advance            pos += 1, the step's last kernel (every other kernel reads pos); after a greedy step's
//                             classifier, each row's token from the classifier's keys (greedy_key)
//   decode_ln_linear, decode_linear_residual: a decode step's linears of few rows, below
// pos is a device pointer to one int: a step's kernels are recorded once and replayed. Every sum runs in a fixed
// order, with no float atomics: the same inputs give the same bits, and the same tokens, on every run.
// Every kernel first waits for the one ahead of it (grid_dependency_wait, templates/common.cuh): the family's
// launches may overlap (FamilyDecl.launch, LAUNCH_OVERLAP).

// ---------------------------------------------------------------------------------------------------------
// The key/value heads: common.cuh's NKV, QKVW, kv_head_of, k_at and v_at.
// the first position of cache head j of row b in a layer's cache
__device__ __forceinline__ long long cache_head(int b, int j) { return ((long long)b * NKV + j) * cacheT; }

// ---------------------------------------------------------------------------------------------------------
// decode_embed: a thread per packet of VEC_C channels of a row; kv_append: of KV_VEC channels of k's NKV heads.
constexpr int CVEC = VEC_C;
constexpr int C_PACKETS = C / CVEC;
typedef Packed<floatX, CVEC> cvec;
constexpr int KV_VEC = (NKV * HS) % X128 == 0 ? X128 : 1;   // gen/kernel_rules.c kernel_vec: VEC_C where NKV = NH
constexpr int KV_PACKETS = NKV * HS / KV_VEC;
typedef Packed<floatX, KV_VEC> kvvec;

// decode_embed: a thread per packet of one row's C channels; the position is pos[0] for every row.
KERNEL(decode_embed) {
    grid_dependency_wait();   // the kernel ahead has ended (Plan.overlap)
    grid_dependents_launch();
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= (long long)B * C_PACKETS) return;
    const int b = (int)(i / C_PACKETS), p = (int)(i % C_PACKETS), t = pos[0];
    const cvec a = load_vec<floatX, CVEC>(wte + (long long)tokens[b] * C + p * CVEC);
    const cvec e = load_vec<floatX, CVEC>(wpe + (long long)t * C + p * CVEC);
    cvec o;
    for (int k = 0; k < CVEC; k++) o[k] = from_f<floatX>(to_f(a[k]) + to_f(e[k]));
    store_vec<floatX, CVEC>(out + (long long)b * C + p * CVEC, o);
}

// kv_append: a thread per packet of KV_VEC channels of one token's k (its NKV heads) and the same packet of its v.
// A packet lies inside one head when the head size is a multiple of it (VEC_HS == KV_VEC), and is stored whole; else
// (VEC_HS is 1) element by element.
KERNEL(kv_append) {
    grid_dependency_wait();   // the kernel ahead has ended (Plan.overlap)
    grid_dependents_launch();
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= (long long)B * T * KV_PACKETS) return;
    const int bt = (int)(i / KV_PACKETS), p = (int)(i % KV_PACKETS), b = bt / T, t = pos[0] + bt % T, c0 = p * KV_VEC;
    const floatX *row = qkv + (long long)bt * QKVW;
    const kvvec k = load_vec<floatX, KV_VEC>(row + k_at(0) + c0), v = load_vec<floatX, KV_VEC>(row + v_at(0) + c0);
    if constexpr (VEC_HS == KV_VEC) {
        const int j = c0 / HS, d = c0 % HS;
        const long long at = (cache_head(b, j) + t) * HS + d;
        store_vec<floatX, KV_VEC>(kcache + at, k);
        store_vec<floatX, KV_VEC>(vcache + at, v);
    } else {
        for (int e = 0; e < KV_VEC; e++) {
            const int j = (c0 + e) / HS, d = (c0 + e) % HS;
            const long long at = (cache_head(b, j) + t) * HS + d;
            kcache[at] = k[e];
            vcache[at] = v[e];
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// decode_attention: a block of ATT_THREADS per (split s, head h, row b), for the positions
// [s*KV_CHUNK, min((s+1)*KV_CHUNK, len)) of the cache. Head rows are read in packets of VEC_HS elements (16 bytes
// where the head size allows), PK packets per row.
//   scores: KG lanes per key (KG the largest power of two <= 32 dividing PK), each lane a fixed set of the row's
//           packets; the lanes' partial dots are summed by a shuffle tree; scores go to shared memory
//   softmax: m = block max, p_j = exp(s_j - m) in place, l = block sum (fixed trees)
//   values:  the block as VGROUPS groups of PK threads, thread (g, k) owns packet k of the head and the positions
//            j = g, g + VGROUPS, ... (its values are loaded before the scores are computed, to overlap the two
//            reads); the groups' sums meet in shared memory and are added in group order.
constexpr double const_sqrt(double x) {             // Newton's method, at compile time
    double r = x > 1.0 ? x : 1.0;
    for (int i = 0; i < 64; i++) r = 0.5 * (r + x / r);
    return r;
}
constexpr float ATT_SCALE = (float)(1.0 / const_sqrt((double)HS));
constexpr int AVEC = VEC_HS;
constexpr int PK = HS / AVEC;                        // packets per head row
typedef Packed<floatX, AVEC> avec;
constexpr int pow2_divisor(int n, int cap) {
    int g = 1;
    while (g * 2 <= cap && n % (g * 2) == 0) g *= 2;
    return g;
}
constexpr int KG = pow2_divisor(PK, WARP_SIZE);      // lanes per key in the score phase
constexpr int KPL = PK / KG;                         // packets per lane of a key row
constexpr int KEYS_PER_PASS = ATT_THREADS / KG;
constexpr int SCORE_ITERS = (KV_CHUNK + KEYS_PER_PASS - 1) / KEYS_PER_PASS;
constexpr int VGROUPS = ATT_THREADS / PK;            // >= 1: the declaration's check has ATT_THREADS >= HS
constexpr int V_ITERS = (KV_CHUNK + VGROUPS - 1) / VGROUPS;
// value packets held in registers across the score phase (fewer in big blocks: 64 registers a thread at 1024)
constexpr int V_PRE_MAX = ATT_THREADS >= 1024 ? 2 : ATT_THREADS >= 512 ? 4 : 8;
constexpr int V_PRE = V_ITERS < V_PRE_MAX ? V_ITERS : V_PRE_MAX;
constexpr int PART = HS + 2;                         // floats per split in partial: m, l, acc[HS]
constexpr float NO_SCORE = -3.0e38f;

// a relative's QK-norm and RoPE, which a decode step applies to the row's query and new key here (gen/schedule.c)
#ifdef ARCH_CONSTANTS
constexpr bool ATT_QK_NORM = QK_NORM, ATT_ROPE = POS_ROPE;
#else
constexpr bool ATT_QK_NORM = false, ATT_ROPE = false;
#endif
constexpr bool ATT_PREP = ATT_QK_NORM || ATT_ROPE;

// head src (HS channels of qkv) as the attention reads it, into dst (shared memory), by one warp: QK-norm with
// weights w (rmsnorm.cu's QK-norm: rstd of the head, each value rounded to floatX as it stores it), then RoPE at
// position p (channels i and i + HS/2 rotated, rounded as rope.cu stores them)
__device__ __forceinline__ void att_prep_head(const floatX *src, const floatX *w, floatX *dst, int p, int lane) {
#ifdef ARCH_CONSTANTS
    float r = 1.0f;
    if constexpr (ATT_QK_NORM) {
        float s = 0.0f;
        for (int c = lane; c < HS; c += WARP_SIZE) { const float x = to_f(src[c]); s += x * x; }
        r = rsqrtf(warp_sum(s) / HS + NORM_EPS);
    }
    for (int c = lane; c < HS; c += WARP_SIZE)
        dst[c] = ATT_QK_NORM ? from_f<floatX>(to_f(src[c]) * r * to_f(w[c])) : src[c];
    __syncwarp();
    if constexpr (ATT_ROPE)
        for (int i = lane; i < HS / 2; i += WARP_SIZE) {
            float sn, cs;
            rope_sincos(p, i, &sn, &cs);
            const float x1 = to_f(dst[i]), x2 = to_f(dst[i + HS / 2]);
            dst[i] = from_f<floatX>(x1 * cs - x2 * sn);
            dst[i + HS / 2] = from_f<floatX>(x2 * cs + x1 * sn);
        }
#endif
}

__device__ __forceinline__ int cache_len(const int *pos) {
    const int len = pos[0] + T;
    return len < cacheT ? len : cacheT;
}

// the count of a (row, head)'s splits that have written their partial: B*NH of them after the partials, each back
// at 0 when its step's attention is done (runtime/cuda/decode.c clears them once, as the cache is opened)
constexpr long long ARRIVALS_AT = (long long)B * NH * KV_SPLITS * PART;

// combine: out = sum_s e^(m_s-M) acc_s / sum_s e^(m_s-M) l_s over the ns splits' partials, in split order (the
// same sums whichever block runs it); thread d < HS writes channel d. The partials are other blocks' stores: read
// past L1 (__ldcg).
__device__ __forceinline__ void combine_splits(floatX *out, const float *base, int ns, int tid) {
    __shared__ float s_w[KV_SPLITS], s_l[KV_SPLITS];   // e^(m_s - M) and l_s of each split
    float mloc = NO_SCORE;
    for (int s = tid; s < ns; s += ATT_THREADS) mloc = fmaxf(mloc, __ldcg(base + (long long)s * PART));
    const float M = block_max<ATT_THREADS>(mloc);
    for (int s = tid; s < ns; s += ATT_THREADS) {
        s_w[s] = expf(__ldcg(base + (long long)s * PART) - M);
        s_l[s] = __ldcg(base + (long long)s * PART + 1);
    }
    __syncthreads();
    if (tid < HS) {
        float num = 0.0f, den = 0.0f;
        for (int s = 0; s < ns; s++) {
            num += s_w[s] * __ldcg(base + (long long)s * PART + 2 + tid);
            den += s_w[s] * s_l[s];
        }
        out[tid] = from_f<floatX>(num / den);
    }
}

KERNEL(decode_attention) {
    __shared__ float s_p[KV_CHUNK];                  // scores, then exp(score - m)
    __shared__ float s_acc[VGROUPS * HS];            // each value group's sums
    __shared__ int s_last;
    const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
    // pos is the step's (decode_advance, the last kernel of the step before, moves it): read before the wait
    const int len = cache_len(pos), start = s * KV_CHUNK, ns = (len + KV_CHUNK - 1) / KV_CHUNK;
    if (start >= len) return;                        // a split past the cached positions: nothing to do
    const int n = len - start < KV_CHUNK ? len - start : KV_CHUNK;
    const int kvh = kv_head_of(h);
    const long long head = cache_head(b, kvh);
    const floatX *kbase = kcache + (head + start) * HS, *vbase = vcache + (head + start) * HS;
    // the row's last token (position len - 1) is read from qkv, and its split appends it to the cache: no block
    // reads that position of the cache in this step (a decode step needs no kv_append)
    const floatX *last = qkv + ((long long)b * T + T - 1) * QKVW;
    const floatX *kcur = last + k_at(kvh), *vcur = last + v_at(kvh), *q = last + h * HS;
    const int jcur = len - 1 - start;                // the split's index of that position (>= n: not this split)
    // Before the wait for the kernel ahead (qkv's matmul), the cached values this thread will weigh and its first KB
    // keys: earlier steps wrote them, and when this kernel starts every kernel but the one ahead has ended (each
    // waits before it lets the next start). No branch guards these loads: a position past the split reads the
    // split's last one (clamped), and what it gives is never used, so the loads go out together rather than one
    // round trip after another. Position len - 1's slots are loaded again from qkv after the wait.
    const int vg = tid / PK, vk = tid % PK, kl = tid % KG, kj = tid / KG;   // kl: lane of key group kj
    const bool v_active = vg < VGROUPS;
    constexpr int KB = SCORE_ITERS < 8 ? SCORE_ITERS : 8;   // keys a thread loads at once
    const auto vj = [&](int it) { return min(it * VGROUPS + vg, n - 1); };
    const auto kjj = [&](int it) { return min(it * KEYS_PER_PASS + kj, n - 1); };
    avec vpre[V_PRE > 0 ? V_PRE : 1], kr[KB][KPL];
#pragma unroll
    for (int it = 0; it < V_PRE; it++) vpre[it] = load_vec<floatX, AVEC>(vbase + (long long)vj(it) * HS + vk * AVEC);
#pragma unroll
    for (int u = 0; u < KB; u++)
#pragma unroll
        for (int i = 0; i < KPL; i++) kr[u][i] = load_vec<floatX, AVEC>(kbase + (long long)kjj(u) * HS + (kl + i * KG) * AVEC);
    grid_dependency_wait();   // the kernel ahead has ended (Plan.overlap)
    grid_dependents_launch();
    if constexpr (ATT_PREP) {   // the query, and the new key where this split holds it, QK-normed and rotated
        __shared__ __align__(16) floatX s_qk[2][HS];
        const int warp = tid / WARP_SIZE, lane = tid % WARP_SIZE, kwarp = ATT_THREADS >= 2 * WARP_SIZE ? 1 : 0;
        if (warp == 0) att_prep_head(q, qnw, s_qk[0], len - 1, lane);
        if (warp == kwarp && jcur < n) att_prep_head(kcur, knw, s_qk[1], len - 1, lane);
        __syncthreads();
        q = s_qk[0];
        kcur = s_qk[1];
    }
    auto krow = [&](int j) { return j == jcur ? kcur : kbase + (long long)j * HS; };
    auto vrow = [&](int j) { return j == jcur ? vcur : vbase + (long long)j * HS; };
#pragma unroll
    for (int it = 0; it < V_PRE; it++)
        if (vj(it) == jcur) vpre[it] = load_vec<floatX, AVEC>(vcur + vk * AVEC);
#pragma unroll
    for (int u = 0; u < KB; u++)
#pragma unroll
        for (int i = 0; i < KPL; i++)
            if (kjj(u) == jcur) kr[u][i] = load_vec<floatX, AVEC>(kcur + (kl + i * KG) * AVEC);

    // scores: lane kl of key group kj holds packets kl, kl + KG, ... of the query
    float qf[KPL][AVEC];
#pragma unroll
    for (int i = 0; i < KPL; i++) {
        const avec x = load_vec<floatX, AVEC>(q + (kl + i * KG) * AVEC);
        for (int e = 0; e < AVEC; e++) qf[i][e] = to_f(x[e]);
    }
    // KB keys at a time, their packets all loaded before their dots (a key group's lanes share a key, so a clamped
    // key's dot stays in its group and is not stored); the first KB are in already
    for (int it0 = 0; it0 < SCORE_ITERS; it0 += KB) {
        if (it0 > 0)   // a chunk of more than KB passes (the same for every thread)
#pragma unroll
            for (int u = 0; u < KB; u++)
#pragma unroll
                for (int i = 0; i < KPL; i++) kr[u][i] = load_vec<floatX, AVEC>(krow(kjj(it0 + u)) + (kl + i * KG) * AVEC);
#pragma unroll
        for (int u = 0; u < KB; u++) {
            const int j = (it0 + u) * KEYS_PER_PASS + kj;
            float dot = 0.0f;
#pragma unroll
            for (int i = 0; i < KPL; i++)
                for (int e = 0; e < AVEC; e++) dot += qf[i][e] * to_f(kr[u][i][e]);
            for (int o = KG / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(FULL_MASK, dot, o);
            if (kl == 0 && j < n) s_p[j] = dot * ATT_SCALE;
        }
    }
    __syncthreads();

    // softmax of the split
    float mloc = NO_SCORE;
    for (int j = tid; j < n; j += ATT_THREADS) mloc = fmaxf(mloc, s_p[j]);
    const float m = block_max<ATT_THREADS>(mloc);
    float lloc = 0.0f;
    for (int j = tid; j < n; j += ATT_THREADS) {
        const float p = expf(s_p[j] - m);
        s_p[j] = p;
        lloc += p;
    }
    const float l = block_sum<ATT_THREADS>(lloc);    // its barriers also publish s_p

    // values: acc[d] = sum_j p_j v_j[d], per group, then over the groups in order; V_PRE positions at a time, the
    // first V_PRE loaded before the scores, each later batch's packets all loaded before its sums
    float acc[AVEC];
    for (int e = 0; e < AVEC; e++) acc[e] = 0.0f;
    for (int it0 = 0; it0 < V_ITERS; it0 += V_PRE) {
        if (it0 > 0)   // a chunk of more than V_PRE passes (the same for every thread)
#pragma unroll
            for (int u = 0; u < V_PRE; u++) vpre[u] = load_vec<floatX, AVEC>(vrow(vj(it0 + u)) + vk * AVEC);
#pragma unroll
        for (int u = 0; u < V_PRE; u++) {
            const int j = (it0 + u) * VGROUPS + vg;
            if (v_active && j < n) {
                const float p = s_p[j];
                for (int e = 0; e < AVEC; e++) acc[e] += p * to_f(vpre[u][e]);
            }
        }
    }
    if (v_active)
        for (int e = 0; e < AVEC; e++) s_acc[vg * HS + vk * AVEC + e] = acc[e];
    __syncthreads();
    // the row's new key and value into the cache, once per kv head (by its group's first query head), after every
    // read of the cache above: the compiler cannot tell that no block reads that position in this step, so a store
    // ahead of the loads would hold them back
    if (jcur < n && tid < HS && h % KV_GROUP == 0) {
        kcache[(head + len - 1) * HS + tid] = kcur[tid];
        vcache[(head + len - 1) * HS + tid] = vcur[tid];
    }
    floatX *o = out + (long long)b * C + h * HS;
    if (ns == 1) {                                   // the only split: its result is the head's
        if (tid < HS) {
            float sum = 0.0f;
            for (int g = 0; g < VGROUPS; g++) sum += s_acc[g * HS + tid];
            o[tid] = from_f<floatX>(sum / l);
        }
        return;
    }
    float *base = partial + ((long long)b * NH + h) * KV_SPLITS * PART, *dst = base + (long long)s * PART;
    for (int d = tid; d < HS; d += ATT_THREADS) {
        float sum = 0.0f;
        for (int g = 0; g < VGROUPS; g++) sum += s_acc[g * HS + d];
        dst[2 + d] = sum;
    }
    if (tid == 0) { dst[0] = m; dst[1] = l; }
    __threadfence();                                 // the partial is visible to every block before it is counted
    __syncthreads();
    if (tid == 0) {
        unsigned *arrived = reinterpret_cast<unsigned *>(partial + ARRIVALS_AT) + (long long)b * NH + h;
        s_last = atomicAdd(arrived, 1u) == (unsigned)ns - 1;
        if (s_last) *arrived = 0;                    // every split is in: the count starts again at the next step
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    combine_splits(o, base, ns, tid);
}

// ---------------------------------------------------------------------------------------------------------
// sample_tokens: a block of SAMPLE_THREADS per row b of logits (B, Vp), the first V columns real. The rule is
// runtime/sample/sampling.h's, in its integer fixed point (sampling.c's sample_draw is the reference):
//   1. greedy (temperature <= 0 or top_k == 1): the block argmax, the lowest id among equal maxima; no draw
//   2. weights w_i = (uint64)((double)expf((z_i - max) / temperature) * 2^32), recomputed wherever needed (the
//      product and its truncation done exactly in integers from expf's bits)
//   3. top_k: the k-th largest key (keys: the floats' bits in unsigned order), by radix select
//   4. top_p: the largest key t whose kept weight at keys >= t reaches (uint64)(top_p * S), by radix select
//   5. r = (uint64)((double)u * W), u from the row's xorshift64* state (common/rng.c, bit for bit); the token is
//      the first kept id whose running sum of kept weights exceeds r
// Layout: round i of thread t is packet i*SAMPLE_THREADS + t of the row (coalesced); every pass reads the row
// again (from L1 / L2 after the first) and recomputes keys and weights from the logits.
// Passes over the row: the argmax (which also counts the first digit of top-k), 3 more digits for top-k, 4 digits
// for top-p, the sums of the draw, and one packet per lane of one warp to find the token.
// Radix select: 4 passes over 8-bit digits from the top; a digit's histogram is in shared memory with a copy per
// lane (int counts for top-k: 32 copies, so that no two lanes of a warp ever hit one word; uint64 weight sums for
// top-p: 16 copies), warps add the copies into 256 bins, then one warp finds the bin where the running count
// (weight) from the top reaches what is needed. Integer atomics only: the result is the same on every run.
// The draw: the kept weight of each segment (one warp's packets of one round: consecutive ids), in id order; one
// warp scans the segments and finds the one holding r; that segment's warp scans its lanes, and the lane holding r
// walks its ids.
constexpr int LVEC = VEC_Vp;
typedef Packed<floatX, LVEC> lvec;
constexpr int L_REAL_PACKETS = (V + LVEC - 1) / LVEC;                        // packets holding real ids
constexpr int L_ROUNDS = (L_REAL_PACKETS + SAMPLE_THREADS - 1) / SAMPLE_THREADS;   // packets per thread
constexpr int S_WARPS = SAMPLE_THREADS / WARP_SIZE;
constexpr int N_SEGS = L_ROUNDS * S_WARPS;                                    // segment i*S_WARPS + w
constexpr int SEGS_PER_LANE = (N_SEGS + WARP_SIZE - 1) / WARP_SIZE;
constexpr int NO_ID = 0x7fffffff;
typedef unsigned long long u64;

// the order-preserving key of a float: unsigned order of keys is float order (sampling.h sample_key)
__device__ __forceinline__ unsigned sample_key(float f) {
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
// xorshift64* (common/rng.c rng_next, rng_uniform)
__device__ __forceinline__ u64 rng_next(u64 *state) {
    u64 x = *state ? *state : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}
__device__ __forceinline__ float rng_uniform(u64 *state) {
    return __fdiv_rn(__ull2float_rn(rng_next(state) >> 40), 16777216.0f);   // exact: a 24-bit integer / 2^24
}
// (uint64)((double)e * 2^32) for e = expf(x) in [0, 1], exactly: e = m * 2^(ex-150) with the 24-bit mantissa m,
// so e * 2^32 = m * 2^(ex-118), truncated. Zero and subnormals give 0, as does what is not a number.
__device__ __forceinline__ u64 weight_of(float e) {
    const unsigned u = __float_as_uint(e);
    const int ex = (int)(u >> 23) & 255, sh = ex - 118;
    const u64 m = (u & 0x7fffffu) | 0x800000u;
    if (ex == 0 || ex > 127) return 0ull;
    return sh >= 0 ? m << sh : sh > -24 ? m >> -sh : 0ull;
}
// step 2's weight, with the host's roundings: float subtract and divide, expf (not __expf), the product truncated.
// At -24 and below (after the temperature) the weight is 0 whatever expf's last bit: expf is skipped there.
__device__ __forceinline__ u64 sample_weight(float z, float mx, float temperature) {
    const float d = __fsub_rn(z, mx);
    if (d < -24.0f * temperature) return 0ull;
    return weight_of(expf(temperature == 1.0f ? d : __fdiv_rn(d, temperature)));
}
// (v, i) beats (bv, bi): larger, or equal with a lower id (NaN never wins)
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }
__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ u64 warp_incl_scan_u64(u64 v, int lane) {
    for (int o = 1; o < WARP_SIZE; o <<= 1) {
        const u64 x = __shfl_up_sync(FULL_MASK, v, o);
        if (lane >= o) v += x;
    }
    return v;
}

struct SampleShared {
    union { u64 w[256 * 16]; int c[256 * 32]; } hist;   // digit histogram, a copy per lane (see above)
    u64 bins[256];                                      // the histogram, copies added
    u64 seg[N_SEGS];                                    // the draw: kept weight per segment
    float bv[S_WARPS];                                  // argmax: warp winners
    int bi[S_WARPS];
    int last[S_WARPS];                                  // the last kept id per warp (the draw's fallback)
    unsigned prefix;                                    // radix select: the digits found so far
    u64 need;                                           // radix select: the count (weight) still needed
    u64 r, base;                                        // the draw: r, and the kept weight before segment g
    int g;                                              // the draw: the segment holding r (-1: none)
};
template <bool W> struct WeightTag { static constexpr bool weights = W; };

KERNEL(sample_tokens) {
    grid_dependency_wait();   // the kernel ahead has ended (Plan.overlap)
    grid_dependents_launch();
    __shared__ SampleShared sm;
    const int b = blockIdx.x, tid = threadIdx.x, lane = tid % WARP_SIZE, warp = tid / WARP_SIZE;
    const floatX *row = logits + (long long)b * Vp;
    const bool greedy = temperature <= 0.0f || top_k == 1;
    const bool use_k = !greedy && top_k > 0 && top_k < V;
    // f(id, z) for every real id of this thread's packets
    auto each = [&](auto &&f) {
        for (int i = 0; i < L_ROUNDS; i++) {
            const int p = i * SAMPLE_THREADS + tid;
            if (p >= L_REAL_PACKETS) break;
            const lvec x = load_vec<floatX, LVEC>(row + (long long)p * LVEC);
#pragma unroll
            for (int k = 0; k < LVEC; k++)
                if (p * LVEC + k < V) f(p * LVEC + k, to_f(x[k]));
        }
    };
    if (use_k) {
        for (int i = tid; i < 256 * 16; i += SAMPLE_THREADS) sm.hist.w[i] = 0ull;
        __syncthreads();
    }

    // 1. the argmax: per thread, per warp (shuffles), over the warps in order; top-k's first digit counted with it
    float bv = -__int_as_float(0x7f800000);
    int bi = NO_ID;
    each([&](int id, float z) {
        if (beats(z, id, bv, bi)) { bv = z; bi = id; }
        if (use_k) atomicAdd(&sm.hist.c[(sample_key(z) >> 24) * 32 + lane], 1);
    });
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(FULL_MASK, bv, o);
        const int i2 = __shfl_xor_sync(FULL_MASK, bi, o);
        if (beats(v2, i2, bv, bi)) { bv = v2; bi = i2; }
    }
    if (lane == 0) { sm.bv[warp] = bv; sm.bi[warp] = bi; }
    __syncthreads();
    float mx = sm.bv[0];
    int arg = sm.bi[0];
    for (int w = 1; w < S_WARPS; w++)
        if (beats(sm.bv[w], sm.bi[w], mx, arg)) { mx = sm.bv[w]; arg = sm.bi[w]; }
    if (arg == NO_ID) arg = 0;                        // only NaNs: sample_draw's answer
    const int at = pos[0];
    auto emit = [&](int token) {
        tokens[b] = token;
        drawn[(long long)at * B + b] = token;
    };
    if (greedy) {
        if (tid == 0) emit(arg);
        return;
    }

    // 3, 4. radix select of a threshold key among the keys >= lo: by counts (need0: the rank k) or by weights (need:
    // (uint64)(top_p * S), S the total of the first digit's histogram). counted: the first digit's histogram is
    // already in shared memory.
    auto select = [&](auto tag, unsigned lo, u64 need0, bool counted) -> unsigned {
        constexpr bool WEIGHTS = decltype(tag)::weights;
        __syncthreads();                              // the previous select's result is read
        if (tid == 0) { sm.prefix = 0u; sm.need = need0; }
        if (!counted)
            for (int i = tid; i < 256 * 16; i += SAMPLE_THREADS) sm.hist.w[i] = 0ull;
        __syncthreads();
        for (int shift = 24; shift >= 0; shift -= 8) {
            const unsigned prefix = sm.prefix, hi = shift == 24 ? 0u : 0xffffffffu << (shift + 8);
            if (shift < 24 || !counted)
                each([&](int, float z) {
                    const unsigned key = sample_key(z);
                    if (key < lo || (key & hi) != prefix) return;
                    const int d = (key >> shift) & 255;
                    if constexpr (WEIGHTS) {
                        const u64 w = sample_weight(z, mx, temperature);
                        if (w) atomicAdd(&sm.hist.w[d * 16 + (lane & 15)], w);
                    } else {
                        atomicAdd(&sm.hist.c[d * 32 + lane], 1);
                    }
                });
            __syncthreads();
            // the copies added into bins, and zeroed for the next digit
            if constexpr (WEIGHTS) {
                for (int pr = warp; pr < 128; pr += S_WARPS) {
                    const int d = pr * 2 + (lane >> 4), i = d * 16 + (lane & 15);
                    u64 v = sm.hist.w[i];
                    sm.hist.w[i] = 0ull;
                    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
                    if ((lane & 15) == 0) sm.bins[d] = v;
                }
            } else {
                for (int d = warp; d < 256; d += S_WARPS) {
                    int v = sm.hist.c[d * 32 + lane];
                    sm.hist.c[d * 32 + lane] = 0;
                    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
                    if (lane == 0) sm.bins[d] = (u64)v;
                }
            }
            __syncthreads();
            // one warp: lane l holds digits 255-8l down to 248-8l; the first nonempty bin from the top where the
            // running sum reaches need
            if (warp == 0) {
                u64 own = 0ull;
                for (int j = 0; j < 8; j++) own += sm.bins[255 - 8 * lane - j];
                const u64 incl = warp_incl_scan_u64(own, lane);
                const u64 total = __shfl_sync(FULL_MASK, incl, WARP_SIZE - 1);
                const u64 need = WEIGHTS && shift == 24 ? __double2ull_rz(__dmul_rn((double)top_p, (double)total))
                                                        : sm.need;
                const unsigned ballot = __ballot_sync(FULL_MASK, own > 0 && incl >= need);
                const int first = ballot ? __ffs(ballot) - 1 : 0;   // always found, but for NaNs
                if (lane == first) {
                    u64 run = incl - own;
                    int digit = 248 - 8 * lane;
                    for (int j = 0; j < 8; j++) {
                        const int d = 255 - 8 * lane - j;
                        const u64 c = sm.bins[d];
                        if (c > 0 && run + c >= need) { digit = d; break; }
                        run += c;
                    }
                    sm.prefix = prefix | ((unsigned)digit << shift);
                    sm.need = run < need ? need - run : 0ull;
                }
            }
            __syncthreads();
        }
        return sm.prefix;
    };
    unsigned lo = 0u;
    if (use_k) lo = select(WeightTag<false>{}, 0u, (u64)top_k, true);
    if (top_p < 1.0f) lo = select(WeightTag<true>{}, lo, 0ull, false);

    // 5. the draw. The kept weight of each segment (a warp's packets of one round), and the last kept id.
    int last = -1;
    for (int i = 0; i < L_ROUNDS; i++) {              // the same count in every lane: all shuffle
        const int p = i * SAMPLE_THREADS + tid;
        u64 s = 0ull;
        if (p < L_REAL_PACKETS) {
            const lvec x = load_vec<floatX, LVEC>(row + (long long)p * LVEC);
#pragma unroll
            for (int k = 0; k < LVEC; k++) {
                const float z = to_f(x[k]);
                if (p * LVEC + k < V && sample_key(z) >= lo) {
                    s += sample_weight(z, mx, temperature);
                    last = p * LVEC + k;
                }
            }
        }
        s = warp_sum_u64(s);
        if (lane == 0) sm.seg[i * S_WARPS + warp] = s;
    }
    for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(FULL_MASK, last, o));
    if (lane == 0) sm.last[warp] = last;
    __syncthreads();
    // warp 0: lane l scans segments l*SEGS_PER_LANE.. in order; W, the draw of r, the segment holding r
    if (warp == 0) {
        u64 own = 0ull;
        for (int j = 0; j < SEGS_PER_LANE; j++) {
            const int g = lane * SEGS_PER_LANE + j;
            if (g < N_SEGS) own += sm.seg[g];
        }
        const u64 incl = warp_incl_scan_u64(own, lane);
        const u64 W = __shfl_sync(FULL_MASK, incl, WARP_SIZE - 1);
        u64 r = 0ull;
        if (lane == 0) {
            u64 state = rng[b];
            const float u = rng_uniform(&state);
            rng[b] = state;
            r = __double2ull_rz(__dmul_rn((double)u, (double)W));
            sm.r = r;
            sm.g = -1;                                // stays when r >= W: no weight at all
        }
        r = __shfl_sync(FULL_MASK, r, 0);
        __syncwarp();
        u64 run = incl - own;
        if (own > 0 && run <= r && r - run < own)     // one lane
            for (int j = 0; j < SEGS_PER_LANE; j++) {
                const int g = lane * SEGS_PER_LANE + j;
                const u64 c = g < N_SEGS ? sm.seg[g] : 0ull;
                if (c > 0 && r - run < c) { sm.g = g; sm.base = run; break; }
                run += c;
            }
    }
    __syncthreads();
    const int g = sm.g;
    if (g < 0) {                                      // sample_draw's fallback: the last kept id
        if (tid == 0) {
            int l = -1;
            for (int w = 0; w < S_WARPS; w++) l = max(l, sm.last[w]);
            emit(l >= 0 ? l : arg);
        }
        return;
    }
    if (warp != g % S_WARPS) return;
    // the warp of segment g: its lanes' kept weights, scanned; the lane holding r walks its ids
    const u64 r = sm.r;
    const int p = (g / S_WARPS) * SAMPLE_THREADS + tid;
    u64 w8[LVEC];
    u64 s = 0ull;
    lvec x = lvec::zeros();
    if (p < L_REAL_PACKETS) x = load_vec<floatX, LVEC>(row + (long long)p * LVEC);
#pragma unroll
    for (int k = 0; k < LVEC; k++) {
        const float z = to_f(x[k]);
        w8[k] = p < L_REAL_PACKETS && p * LVEC + k < V && sample_key(z) >= lo ? sample_weight(z, mx, temperature) : 0ull;
        s += w8[k];
    }
    const u64 incl = warp_incl_scan_u64(s, lane);
    u64 run = sm.base + incl - s;
    if (s > 0 && run <= r && r - run < s) {           // one lane
        int tok = -1;
#pragma unroll
        for (int k = 0; k < LVEC; k++) {
            run += w8[k];
            if (tok < 0 && run > r) tok = p * LVEC + k;
        }
        emit(tok);
    }
}

// The greedy draw inside the classifier (Plan.decode_greedy_fused, a greedy step of the decode linears): each block
// of decode_ln_linear folds its logits into one integer per row, best[b] = max over its columns of greedy_key, with
// atomicMax (an integer max: the same result in any order); decode_advance reads the row's token from it. The key is
// sample_tokens' argmax as one integer: the logit's key (sample_key) above its id reversed, so that the largest key is
// the largest logit at its lowest id; -0 as +0 (beats: equal floats tie) and NaN lowest (it never wins; a row of
// NaNs gives id 0, as sample_tokens does)
__device__ __forceinline__ u64 greedy_key(float z, int id) {
    const unsigned key = z != z ? 0u : sample_key(z == 0.0f ? 0.0f : z);
    return (u64)key << 32 | (u64)(0xffffffffu - (unsigned)id);
}

// decode_advance: the step's last kernel. After a greedy step's classifier (best not null) it writes each row's
// token where sample_tokens would, and clears best for the next step; then it moves the position on.
KERNEL(decode_advance) {
    grid_dependency_wait();   // the kernel ahead has ended (Plan.overlap)
    grid_dependents_launch();
    if (blockIdx.x != 0) return;
    const int at = pos[0];
    if (best)
        for (int b = threadIdx.x; b < B; b += blockDim.x) {
            const int token = (int)(0xffffffffu - (unsigned)best[b]);
            tokens[b] = token;
            drawn[(long long)at * B + b] = token;
            best[b] = 0ull;
        }
    __syncthreads();   // every thread has read pos
    if (threadIdx.x == 0) pos[0] = at + 1;
}

// ---------------------------------------------------------------------------------------------------------
// The linears of a decode step of few rows (Plan.decode_linear), each weight streamed once for the rows:
//   decode_ln_linear        out[b, n] = act(sum_k LN(inp)[b, k] weight[n, k] + bias[n]): the norm of the C-wide
//                           input rows (the model's: LayerNorm with lnw, lnb as templates/layernorm.cu's, or RMSNorm
//                           with lnw as rmsnorm.cu's, each value rounded to floatX as those kernels store it) made
//                           by every warp itself, so no kernel and no buffer stand between the residual stream and
//                           the matmul. Where act is 1 (the MLP's up projection) the sums go through the model's
//                           activation: the GELU, ReLU^2, or for SwiGLU silu(g) u, u this sum and g the same row's
//                           with gate and gate_bias; where act is 2 (a capped model's classifier), the logit soft-cap
//                           of each logit as stored. bias and gate_bias may be null (the classifier; a model without
//                           biases)
//   decode_linear_residual  out[b, n] = res[b, n] + (sum_k inp[b, k] weight[n, k] + bias[n]), the sum rounded to
//                           floatX before the add, as the matmul's output and the residual add store it; IC is C or
//                           the MLP's hidden size; bias may be null
// A warp per LIN_COLS output columns and up to LIN_ROWS rows (blockIdx.y picks the rows). Before it waits for the
// kernel ahead (grid_dependency_wait) it loads every weight packet it will sum into registers, all in flight at once
// (nothing in a step writes a weight); then, row by row, it loads the row's packets of inp, all at once, makes the
// norm from them where LN, and sums in a fixed order (lane, then the warp's butterfly). No branch stands between a
// lane's loads: a column past OC, a packet past the row and a row past B read clamped addresses, and what they give
// is never summed or never stored, so the loads go out together rather than one round trip after another. IC is a
// multiple of the packet (C is; the plan takes these linears where the MLP's hidden size is too: gen/plan.c).
constexpr int LIN_PACKET = X128;
constexpr int LIN_ROWS = B < 8 ? B : 8;
// the model's norm, MLP and hidden size (GPT-2's prelude has no ARCH_CONSTANTS: LayerNorm at 1e-5, the GELU, 4C)
#ifdef ARCH_CONSTANTS
constexpr bool LIN_RMS = NORM_RMS;
constexpr float LIN_LN_EPS = NORM_EPS;
constexpr int LIN_FFN = FFN;
constexpr int LIN_MLP = MLP_KIND;
constexpr float LIN_SOFTCAP = SOFTCAP;
#else
constexpr bool LIN_RMS = false;
constexpr float LIN_LN_EPS = 1e-5f;                  // templates/layernorm.cu's
constexpr int LIN_FFN = 4 * C;
constexpr int LIN_MLP = 0;
constexpr float LIN_SOFTCAP = 0.0f;
#endif
enum { LIN_GELU = 0, LIN_RELU2 = 1, LIN_SWIGLU = 2 };   // MLP_KIND's values (gen/emit.c)
typedef Packed<floatX, LIN_PACKET> linvec;

// the packets of a row of IC that a lane sums, p = lane + i * WARP_SIZE for i < lin_ppl(IC), those < IC / LIN_PACKET
constexpr int lin_ppl(int IC) { return (IC / LIN_PACKET + WARP_SIZE - 1) / WARP_SIZE; }
__device__ __forceinline__ int lin_packet(int IC, int lane, int i) {   // packet i of the lane, clamped into the row
    return min(lane + i * WARP_SIZE, IC / LIN_PACKET - 1);
}

// w[i][c] = packet i of the lane in column n0 + c of weight (OC rows of IC), the column clamped below OC
template <int IC>
__device__ __forceinline__ void linear_weights(linvec (&w)[lin_ppl(IC)][LIN_COLS], const floatX *weight, int n0, int OC,
                                               int lane) {
#pragma unroll
    for (int i = 0; i < lin_ppl(IC); i++)
#pragma unroll
        for (int c = 0; c < LIN_COLS; c++)
            w[i][c] = load_vec_cs<floatX, LIN_PACKET>(weight + (long long)min(n0 + c, OC - 1) * IC +
                                                      lin_packet(IC, lane, i) * LIN_PACKET);
}

// x (the lane's packets of one row of C) normalized in place by the model's norm, its statistics summed in
// templates/layernorm.cu's order (RMSNorm: rstd alone, as rmsnorm.cu's, and no bias), each value rounded to floatX
// as the norm kernels store it
constexpr int LN_PPL = lin_ppl(C);
__device__ __forceinline__ void linear_norm_row(linvec (&x)[LN_PPL], const linvec (&g)[LN_PPL], const linvec (&h)[LN_PPL],
                                                int lane) {
    float s = 0.0f, m = 0.0f;
    if constexpr (!LIN_RMS) {
#pragma unroll
        for (int i = 0; i < LN_PPL; i++)
            if (lane + i * WARP_SIZE < C / LIN_PACKET)
                for (int k = 0; k < LIN_PACKET; k++) s += to_f(x[i][k]);
        m = warp_sum(s) / C;
    }
    float s2 = 0.0f;
#pragma unroll
    for (int i = 0; i < LN_PPL; i++)
        if (lane + i * WARP_SIZE < C / LIN_PACKET)
            for (int k = 0; k < LIN_PACKET; k++) { const float d = to_f(x[i][k]) - m; s2 += d * d; }
    const float r = rsqrtf(warp_sum(s2) / C + LIN_LN_EPS);
#pragma unroll
    for (int i = 0; i < LN_PPL; i++)
        for (int k = 0; k < LIN_PACKET; k++)
            x[i][k] = from_f<floatX>((to_f(x[i][k]) - m) * r * to_f(g[i][k]) + (LIN_RMS ? 0.0f : to_f(h[i][k])));
}

// acc[c][r] = the warp's dot products of its columns (their packets in w) with rows b0 + r of inp, or of LN(inp)
// where LN (inp then C wide)
template <bool LN, int IC>
__device__ __forceinline__ void linear_dots(float (&acc)[LIN_COLS][LIN_ROWS], const linvec (&w)[lin_ppl(IC)][LIN_COLS],
                                            const floatX *inp, const floatX *lnw, const floatX *lnb, int b0, int lane) {
    constexpr int PPL = lin_ppl(IC);
    linvec g[LN ? PPL : 1], h[LN ? PPL : 1];
    if constexpr (LN) {
#pragma unroll
        for (int i = 0; i < PPL; i++) {
            g[i] = load_vec<floatX, LIN_PACKET>(lnw + lin_packet(IC, lane, i) * LIN_PACKET);
            h[i] = LIN_RMS ? linvec::zeros() : load_vec<floatX, LIN_PACKET>(lnb + lin_packet(IC, lane, i) * LIN_PACKET);
        }
    }
#pragma unroll
    for (int r = 0; r < LIN_ROWS; r++) {
        const floatX *row = inp + (long long)min(b0 + r, B - 1) * IC;
        linvec x[PPL];
#pragma unroll
        for (int i = 0; i < PPL; i++) x[i] = load_vec<floatX, LIN_PACKET>(row + lin_packet(IC, lane, i) * LIN_PACKET);
        if constexpr (LN) linear_norm_row(x, g, h, lane);
#pragma unroll
        for (int c = 0; c < LIN_COLS; c++) {
            float a = 0.0f;
#pragma unroll
            for (int i = 0; i < PPL; i++)
                if (lane + i * WARP_SIZE < IC / LIN_PACKET)
                    for (int k = 0; k < LIN_PACKET; k++) a += to_f(w[i][c][k]) * to_f(x[i][k]);
            acc[c][r] = a;
        }
    }
}

// what the linears do before their stores: the weights' loads, the wait for the kernel ahead, pre(n0, b0) (the
// epilogue's own loads, so that they travel with the rows'), the dots and the warp's sums; epi(c, r, b, n, sum,
// gate_sum) stores column n = n0 + c of row b = b0 + r (lane 0 of the warp). GATE: the same dots with gate too
// (SwiGLU's up projection; gate_sum is 0 otherwise)
template <bool LN, int IC, bool GATE, class Pre, class Epi>
__device__ __forceinline__ void linear_rows(const floatX *inp, const floatX *lnw, const floatX *lnb, const floatX *weight,
                                            const floatX *gate, int OC, Pre pre, Epi epi) {
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int n0 = (blockIdx.x * (LIN_THREADS / WARP_SIZE) + warp) * LIN_COLS, b0 = blockIdx.y * LIN_ROWS;
    if (n0 >= OC) return;                            // a warp past the columns: nothing to read or write
    linvec w[lin_ppl(IC)][LIN_COLS], wg[GATE ? lin_ppl(IC) : 1][LIN_COLS];
    linear_weights<IC>(w, weight, n0, OC, lane);
    if constexpr (GATE) linear_weights<IC>(wg, gate, n0, OC, lane);
    grid_dependency_wait();                          // the kernel ahead has ended (Plan.overlap)
    grid_dependents_launch();
    pre(n0, b0);
    float acc[LIN_COLS][LIN_ROWS], accg[LIN_COLS][LIN_ROWS];
    linear_dots<LN, IC>(acc, w, inp, lnw, lnb, b0, lane);
    if constexpr (GATE) linear_dots<LN, IC>(accg, wg, inp, lnw, lnb, b0, lane);
#pragma unroll
    for (int c = 0; c < LIN_COLS; c++)
#pragma unroll
        for (int r = 0; r < LIN_ROWS; r++) {
            const float s = warp_sum(acc[c][r]);
            float sg = 0.0f;
            if constexpr (GATE) sg = warp_sum(accg[c][r]);
            if (lane == 0 && n0 + c < OC && b0 + r < B) epi(c, r, b0 + r, n0 + c, s, sg);
        }
}

// the MLP's activation of a sum (u) and, for SwiGLU, its gate's (g), each rounded to floatX where the plain step's
// matmuls store them before their activation kernels: activation.cu's relu(u)^2 and silu(g) u, or the GELU
__device__ __forceinline__ float mlp_act(float u, float g) {
    if constexpr (LIN_MLP == LIN_RELU2) {
        const float r = fmaxf(to_f(from_f<floatX>(u)), 0.0f);
        return r * r;
    } else if constexpr (LIN_MLP == LIN_SWIGLU) {
        const float gr = to_f(from_f<floatX>(g));
        return gr * (1.0f / (1.0f + expf(-gr))) * to_f(from_f<floatX>(u));
    } else {
        return ::gelu(u);
    }
}

// best (the classifier of a greedy step, else null): the rows' greedy keys, folded in (greedy_key, above)
KERNEL(decode_ln_linear) {
    constexpr int WARPS = LIN_THREADS / WARP_SIZE;
    __shared__ u64 warp_best[WARPS][LIN_ROWS];
    const int b0 = blockIdx.y * LIN_ROWS;
    u64 mine[LIN_ROWS];   // lane 0's best key per row over its warp's columns
#pragma unroll
    for (int r = 0; r < LIN_ROWS; r++) mine[r] = 0ull;
    float bv[LIN_COLS], gbv[LIN_COLS];   // the columns' bias and gate bias, where the model has them
    const auto pre = [&](int n0, int) {
#pragma unroll
        for (int c = 0; c < LIN_COLS; c++) {
            const int n = min(n0 + c, OC - 1);
            bv[c] = bias ? to_f(bias[n]) : 0.0f;
            gbv[c] = gate_bias ? to_f(gate_bias[n]) : 0.0f;
        }
    };
    const auto epi = [&](int c, int r, int b, int n, float s, float sg) {
        if (bias) s += bv[c];
        if (gate_bias) sg += gbv[c];
        if (act == 1) s = mlp_act(s, sg);
        if constexpr (LIN_SOFTCAP > 0.0f)   // softcap_forward's: the logit as stored, capped (common.cuh's softcap)
            if (act == 2) s = softcap(to_f(from_f<floatX>(s)), LIN_SOFTCAP);
        const floatX stored = from_f<floatX>(s);
        out[(long long)b * OC + n] = stored;
        if (best && n < V) mine[r] = max(mine[r], greedy_key(to_f(stored), n));
    };
    // SwiGLU's up projection (act 1) also takes the gate's dots; its other linears and every other model's do not. The
    // branch is the same for every thread of the launch
    if (LIN_MLP == LIN_SWIGLU && act == 1) linear_rows<true, C, true>(inp, lnw, lnb, weight, gate, OC, pre, epi);
    else linear_rows<true, C, false>(inp, lnw, lnb, weight, nullptr, OC, pre, epi);
    if (!best) return;   // the same for every thread of the launch
    const int tid = threadIdx.x;
    if (tid % WARP_SIZE == 0)
#pragma unroll
        for (int r = 0; r < LIN_ROWS; r++) warp_best[tid / WARP_SIZE][r] = mine[r];
    __syncthreads();
    if (tid < LIN_ROWS && b0 + tid < B) {   // the block's best per row: one atomic a row
        u64 m = 0ull;
        for (int w = 0; w < WARPS; w++) m = max(m, warp_best[w][tid]);
        atomicMax(best + b0 + tid, m);
    }
}

KERNEL(decode_linear_residual) {
    float bv[LIN_COLS], rv[LIN_COLS][LIN_ROWS];   // the columns' bias where the model has one, the residual's values
    const auto pre = [&](int n0, int b0) {
#pragma unroll
        for (int c = 0; c < LIN_COLS; c++) {
            const int n = min(n0 + c, OC - 1);
            bv[c] = bias ? to_f(bias[n]) : 0.0f;
#pragma unroll
            for (int r = 0; r < LIN_ROWS; r++) rv[c][r] = to_f(res[(long long)min(b0 + r, B - 1) * OC + n]);
        }
    };
    const auto epi = [&](int c, int r, int b, int n, float s, float) {
        if (bias) s += bv[c];
        out[(long long)b * OC + n] = from_f<floatX>(rv[c][r] + to_f(from_f<floatX>(s)));
    };
    // the two widths the residual linears read (attproj's C, fcproj's hidden size), each unrolled; the branch is the
    // same for every thread of the launch, and another width is a bug that ends the launch with an error
    if (IC == C) linear_rows<false, C, false>(inp, nullptr, nullptr, weight, nullptr, OC, pre, epi);
    else if (IC == LIN_FFN) linear_rows<false, LIN_FFN, false>(inp, nullptr, nullptr, weight, nullptr, OC, pre, epi);
    else __trap();
}
