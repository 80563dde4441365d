// common.cuh: device helpers shared by every kernel template, placed after the generated prelude
// (which defines B, T, C, NH, HS, L, V, Vp, maxT, floatX, PRECISION_*, the vector widths X128 and
// VEC_<row>, the tunables and the KERNEL(name) entry points).
// Holds: warp and block reductions (plain shuffles, no cooperative_groups), asynchronous copies into shared
// memory, a 128-bit packed vector type with cached / streaming loads and stores, conversions between floatX and
// float, stochastic rounding, and GELU.
// No standard library: NVRTC has none.

#define FULL_MASK 0xffffffffu
#define WARP_SIZE 32

// ---- reductions ----
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}
// Sum over a block of NT threads (NT a multiple of 32); every thread gets the result. Fixed order: deterministic.
template <int NT>
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[NT / WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_sum(v);
    __syncthreads();                       // earlier uses of `partial` are done
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float s = lane < NT / WARP_SIZE ? partial[lane] : 0.0f;
    return warp_sum(s);
}
template <int NT>
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partial[NT / WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float s = lane < NT / WARP_SIZE ? partial[lane] : -3.0e38f;
    return warp_max(s);
}

// ---- conversions ----
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename Tout> __device__ __forceinline__ Tout from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
#ifdef PRECISION_FP16
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
#endif

// ---- asynchronous copies global -> shared (cp.async, sm_80 and later) ----
typedef unsigned int u32;
__device__ __forceinline__ u32 smem_addr(const void *p) { return (u32)__cvta_generic_to_shared(p); }
// 16 bytes; zero-fills when !valid (src then is not read)
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// waits until at most N of this thread's committed groups are still in flight
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- packed vectors: N elements of Tp loaded / stored as one access (128 bits when N*sizeof(Tp) == 16) ----
template <typename Tp, int N>
struct alignas(sizeof(Tp) * N) Packed {
    Tp v[N];
    __device__ __forceinline__ Tp &operator[](int i) { return v[i]; }
    __device__ __forceinline__ const Tp &operator[](int i) const { return v[i]; }
    __device__ __forceinline__ static Packed zeros() {
        Packed p;
        for (int i = 0; i < N; i++) p.v[i] = from_f<Tp>(0.0f);
        return p;
    }
};

template <typename Tp, int N> __device__ __forceinline__ Packed<Tp, N> load_vec(const Tp *p) {
    return *reinterpret_cast<const Packed<Tp, N> *>(p);
}
template <typename Tp, int N> __device__ __forceinline__ void store_vec(Tp *p, const Packed<Tp, N> &x) {
    *reinterpret_cast<Packed<Tp, N> *>(p) = x;
}
// streaming variants (evict-first): for data read or written once
template <typename Tp, int N> __device__ __forceinline__ Packed<Tp, N> load_vec_cs(const Tp *p) {
    Packed<Tp, N> r;
    if constexpr (sizeof(Tp) * N == 16) {
        int4 t = __ldcs(reinterpret_cast<const int4 *>(p));
        r = *reinterpret_cast<Packed<Tp, N> *>(&t);
    } else {
        r = *reinterpret_cast<const Packed<Tp, N> *>(p);
    }
    return r;
}
template <typename Tp, int N> __device__ __forceinline__ void store_vec_cs(Tp *p, const Packed<Tp, N> &x) {
    if constexpr (sizeof(Tp) * N == 16) {
        __stcs(reinterpret_cast<int4 *>(p), *reinterpret_cast<const int4 *>(&x));
    } else {
        *reinterpret_cast<Packed<Tp, N> *>(p) = x;
    }
}

// ---- stochastic rounding float -> floatX ----
// The random bits are a counter-based hash (a few rounds of multiply-xorshift) of the element's index and the
// fp32 value's own bits: the bf16 result is a function of the fp32 value alone, so the host can reproduce it
// (common/bf16.h, which must match this bit for bit) and a resumed run gets the same weights.
__device__ __forceinline__ unsigned int hash_u32(unsigned int x, unsigned int seed) {
    x ^= seed * 0x9E3779B9u;
    x ^= x >> 16; x *= 0x7feb352du;
    x ^= x >> 15; x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}
__device__ __forceinline__ void round_store(float *out, float x, unsigned int) { *out = x; }
__device__ __forceinline__ void round_store(__nv_bfloat16 *out, float x, unsigned int idx) {
    // add 16 random bits below the bf16 mantissa, then truncate: rounds up with probability = the dropped fraction
    unsigned int bits = __float_as_uint(x);
    unsigned int r = hash_u32(idx, bits) & 0xffffu;
    if ((bits & 0x7f800000u) != 0x7f800000u) bits += r;   // leave inf / nan alone
    *out = __ushort_as_bfloat16((unsigned short)(bits >> 16));
}
#ifdef PRECISION_FP16
__device__ __forceinline__ void round_store(__half *out, float x, unsigned int) { *out = __float2half_rn(x); }
#endif

// ---- GELU, tanh approximation: 0.5u(1 + tanh(sqrt(2/pi)(u + 0.044715u^3))), and its derivative ----
// In 16 bits the tanh goes through the logistic function, 0.5(1 + tanh z) = 1/(1 + exp(-2z)): one fast exponential
// and one fast reciprocal (about 1e-6 from tanhf, far below a 16-bit rounding) in place of tanhf's long sequence,
// which made the GELU backward arithmetic-bound. fp32 keeps tanhf, as the CPU reference does.
constexpr float GELU_K = 0.7978845608028654f;   // sqrt(2/pi)
#ifdef PRECISION_FP32
__device__ __forceinline__ float gelu(float u) {
    return 0.5f * u * (1.0f + tanhf(GELU_K * (u + 0.044715f * u * u * u)));
}
__device__ __forceinline__ float gelu_grad(float u) {
    const float z = GELU_K * (u + 0.044715f * u * u * u);
    const float th = tanhf(z);
    const float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * u * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * u * u);
}
#else
// s = 0.5(1 + tanh z); exp(-2z) = inf gives s = 0
__device__ __forceinline__ float gelu_sigmoid(float u) {
    const float z = GELU_K * (u + 0.044715f * u * u * u);
    return __fdividef(1.0f, 1.0f + __expf(-2.0f * z));
}
__device__ __forceinline__ float gelu(float u) { return u * gelu_sigmoid(u); }
// with s as above, 1 - tanh^2 z = 4s(1 - s)
__device__ __forceinline__ float gelu_grad(float u) {
    const float s = gelu_sigmoid(u);
    return s + 2.0f * u * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * 0.044715f * u * u);
}
#endif
