// classifier.cu: softmax + cross-entropy + dlogits in one kernel, without materializing probabilities.
//   classifier_forward  per row of logits (B*T, Vp), first V columns real: losses[row] = -log softmax[target];
//                       with write_dlogits, overwrites the row in place with (softmax - onehot) * dloss, and 0
//                       on the padded columns (with the soft-cap: below). One block per row; pass 1 is an online
//                       max/sum, pass 2 writes.
// Between the passes the row is kept where it fits, so that it is read from memory once:
//   - in dynamic shared memory (SECOND_PASS 2, ROW_BYTES > 0: gen/kernel_rules.c gives it where two blocks of the
//     row fit a multiprocessor, 100,528 bytes for GPT-2's vocabulary in 16 bits);
//   - else in registers, up to 16 packets a thread (up to 32, at 256 threads a row of 50304 bf16 logits, spilled:
//     3.5x slower on the H200, docs/kernels-and-tuning.md);
//   - else it is read twice, UNROLL packets a thread at a time, so that that many loads are in flight.
// Pass 1 takes each packet's max first and rescales the running sum once a packet: one exponential per value.
// With a logit soft-cap (a relative's model.logit_softcap; GPT-2's prelude has no SOFTCAP) the row holds the raw
// logits z and the kernel works on y = SOFTCAP tanh(z / SOFTCAP), rounded to floatX as a stored logit is: the loss
// is y's, the dlogits are the gradient with respect to z, (softmax(y) - onehot) * dloss * (1 - (y / SOFTCAP)^2), and
// without write_dlogits the row gets y in its place, so that the buffer holds the logits the model gives. The cap
// costs no pass over the logits of its own.

constexpr int VEC = VEC_Vp;
constexpr int PACKETS = Vp / VEC;
constexpr int REAL_PACKETS = (V + VEC - 1) / VEC;    // packets holding at least one real column
typedef Packed<floatX, VEC> xvec;
#ifdef ARCH_CONSTANTS
constexpr float CAP = SOFTCAP;
#else
constexpr float CAP = 0.0f;
#endif
// a logit as the loss sees it: capped where the model caps (common.cuh's softcap), rounded to floatX once. In 16
// bits its tanh is one special-function operation: the exact tanhf, twice a value in a row read twice, made the
// kernel arithmetic-bound (2.2% slower a step at nanochat-d12 than a separate pass).
__device__ __forceinline__ floatX cap_of(floatX z) {
    if constexpr (CAP > 0.0f) {
        return from_f<floatX>(softcap(to_f(z), CAP));
    } else {
        return z;
    }
}
__device__ __forceinline__ float logit_of(floatX z) { return to_f(cap_of(z)); }
// a packet of logits as the loss sees them
__device__ __forceinline__ xvec capped(const xvec &v) {
    if constexpr (CAP == 0.0f) return v;
    xvec y;
    for (int k = 0; k < VEC; k++) y[k] = cap_of(v[k]);
    return y;
}
constexpr bool IN_SMEM = ROW_BYTES > 0;   // the capped row kept in shared memory, a packet per REAL_PACKETS
static_assert(!IN_SMEM || ROW_BYTES == REAL_PACKETS * (int)sizeof(xvec), "ROW_BYTES: the real packets of a row");
constexpr int PER_THREAD = (PACKETS + BLOCK_SIZE - 1) / BLOCK_SIZE;
constexpr int CACHED = !IN_SMEM && PER_THREAD <= 16 ? PER_THREAD : 0;   // else in shared memory or read twice

// (max, sum of exp(x - max)) pairs combined: the sum rescaled to the larger max
__device__ __forceinline__ void online_merge(float &m, float &s, float m2, float s2) {
    const float M = fmaxf(m, m2);
    s = s * __expf(m - M) + s2 * __expf(m2 - M);
    m = M;
}

KERNEL(classifier_forward) {
    __shared__ float s_m[BLOCK_SIZE / WARP_SIZE], s_s[BLOCK_SIZE / WARP_SIZE];
    extern __shared__ __align__(16) unsigned char dyn_smem[];   // ROW_BYTES: the capped row where IN_SMEM
    xvec *kept = reinterpret_cast<xvec *>(dyn_smem);
    const long long row = blockIdx.x;
    floatX *x = logits + row * Vp;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    float m = -3.0e38f, s = 0.0f;
    auto accumulate = [&](const xvec &v, int p) {   // v capped; p < REAL_PACKETS: its columns from V on are padding
        const int real = V - p * VEC;
        float f[VEC], pm = -3.0e38f;
        for (int k = 0; k < VEC; k++) {
            f[k] = k < real ? to_f(v[k]) : -3.0e38f;
            pm = fmaxf(pm, f[k]);
        }
        const float M = fmaxf(m, pm);
        float t = 0.0f;
        for (int k = 0; k < VEC; k++) t += __expf(f[k] - M);   // the padding adds exp(-3e38 - M) = 0
        s = s * __expf(m - M) + t;
        m = M;
    };
    xvec cache[CACHED > 0 ? CACHED : 1];
#pragma unroll
    for (int i = 0; i < CACHED; i++) {   // unrolled: the cache stays in registers, capped (once a value)
        const int p = threadIdx.x + i * BLOCK_SIZE;
        if (p < REAL_PACKETS) {
            cache[i] = capped(load_vec_cs<floatX, VEC>(x + p * VEC));
            accumulate(cache[i], p);
        }
    }
    // the packets not cached, UNROLL loads of a thread at a time; f(v, p) for each
    auto uncached = [&](auto load, auto f) {
        int p = threadIdx.x + CACHED * BLOCK_SIZE;
        for (; p + (UNROLL - 1) * BLOCK_SIZE < REAL_PACKETS; p += UNROLL * BLOCK_SIZE) {
            xvec v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) v[u] = load(p + u * BLOCK_SIZE);
#pragma unroll
            for (int u = 0; u < UNROLL; u++) f(v[u], p + u * BLOCK_SIZE);
        }
        for (; p < REAL_PACKETS; p += BLOCK_SIZE) f(load(p), p);
    };
    if constexpr (IN_SMEM) {   // read once: evict first
        uncached([&](int p) { return capped(load_vec_cs<floatX, VEC>(x + p * VEC)); },
                 [&](const xvec &v, int p) { kept[p] = v; accumulate(v, p); });
    } else {   // kept in L2 for the second read
        uncached([&](int p) { return capped(load_vec<floatX, VEC>(x + p * VEC)); }, accumulate);
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
        online_merge(m, s, m2, s2);
    }
    if (lane == 0) { s_m[warp] = m; s_s[warp] = s; }
    __syncthreads();
    m = -3.0e38f; s = 0.0f;
    for (int w = 0; w < BLOCK_SIZE / WARP_SIZE; w++) online_merge(m, s, s_m[w], s_s[w]);   // same order in every thread
    const int target = targets[row];
    if (threadIdx.x == 0) losses[row] = logf(s) + m - logit_of(x[target]);
    if (!write_dlogits && CAP == 0.0f) return;   // the row stays as it is
    __syncthreads();                      // everyone has read x[target] before it is overwritten
    const float inv = 1.0f / s;
    auto write = [&](const xvec &v, int p) {   // v capped; p < REAL_PACKETS; the padded columns get 0
        xvec d;
        for (int k = 0; k < VEC; k++) {
            const int j = p * VEC + k;
            const float y = to_f(v[k]);
            if (!write_dlogits) { d[k] = v[k]; continue; }   // the capped logit
            const float prob = j < V ? __expf(y - m) * inv : 0.0f;
            float g = j < V ? (prob - (j == target ? 1.0f : 0.0f)) * dloss : 0.0f;
            if constexpr (CAP > 0.0f) g *= 1.0f - (y / CAP) * (y / CAP);
            d[k] = from_f<floatX>(g);
        }
        store_vec_cs<floatX, VEC>(x + p * VEC, d);
    };
#pragma unroll
    for (int i = 0; i < CACHED; i++) {
        const int p = threadIdx.x + i * BLOCK_SIZE;
        if (p < REAL_PACKETS) write(cache[i], p);
    }
    if constexpr (IN_SMEM) {   // each thread reads back the packets it kept
        uncached([&](int p) { return kept[p]; }, write);
    } else {
        uncached([&](int p) { return capped(load_vec_cs<floatX, VEC>(x + p * VEC)); }, write);
    }
    for (int p = REAL_PACKETS + threadIdx.x; p < PACKETS; p += BLOCK_SIZE) {   // packets of padding only
        xvec d = xvec::zeros();
        if (!write_dlogits) d = capped(load_vec<floatX, VEC>(x + p * VEC));   // capped, as the rest of the row
        store_vec_cs<floatX, VEC>(x + p * VEC, d);
    }
}
