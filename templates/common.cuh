// common.cuh: device helpers shared by every kernel template, placed after the generated prelude
// (which defines B, T, C, NH, HS, L, V, Vp, maxT, floatX, PRECISION_*, the vector widths X128 and
// VEC_<row>, the tunables and the KERNEL(name) entry points).
// Holds: the key/value heads' columns of qkv, warp and block reductions (plain shuffles, no cooperative_groups), asynchronous copies into shared
// memory, a 128-bit packed vector type with cached / streaming loads and stores, conversions between floatX and
// float, stochastic rounding, GELU, and Hopper's warpgroup MMA (wgmma) with its shared-memory descriptors.
// No standard library: NVRTC has none.

#define FULL_MASK 0xffffffffu

// A TMA tensor map, CUDA's CUtensorMap (128 opaque bytes, 64-byte aligned): made on the host (runtime/cuda/linear.c,
// fc_gemm_map) and passed by value to kernels that read or write global memory through the tensor memory accelerator
struct __align__(64) TensorMap { unsigned long long opaque[16]; };
#define WARP_SIZE 32

// ---- the key/value heads. A relative's prelude has NKV and QKVW (gen/emit.c, emit_arch); GPT-2's, whose prelude
// stays as it was, has neither: multi-head, a row of qkv 3C wide. Query head h reads kv head kv_head_of(h)
// (grouped-query attention, docs/model.md "Architectures") from qkv's rows of QKVW features: q's NH heads, then
// k's NKV, then v's NKV.
#ifndef ARCH_CONSTANTS
constexpr int NKV = NH;
constexpr int QKVW = 3 * C;
#endif
constexpr int KV_GROUP = NH / NKV;                   // query heads a kv head serves
__device__ __forceinline__ int kv_head_of(int h) { return h / KV_GROUP; }
// where kv head j's key and value lie in a row of qkv
__device__ __forceinline__ int k_at(int j) { return (NH + j) * HS; }
__device__ __forceinline__ int v_at(int j) { return (NH + NKV + j) * HS; }
#ifdef ARCH_CONSTANTS
// RoPE's angle for channel pair i (channels i and i + HS/2 of a head) at position p, as cpu_rope makes it: in double,
// reduced to [-pi, pi] there, its cos and sin in fp32 (the angle itself rounded to fp32 is off by up to 1e-4 at
// positions in the thousands); rope.cu and rmsnorm.cu's QK-norm (QK_ROPE) rotate with it
__device__ __forceinline__ void rope_sincos(int p, int i, float *s, float *c) {
    double a = (double)p * pow(ROPE_THETA, -2.0 * i / HS);
    a -= 6.283185307179586 * rint(a * 0.15915494309189535);
    sincosf((float)a, s, c);
}
#endif

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

// Programmatic dependent launch (a family launched LAUNCH_OVERLAP, FamilyDecl.launch, in a plan with Plan.overlap): a kernel may
// start before the kernel ahead of it on the stream has ended. grid_dependency_wait() returns once that kernel has
// ended and its writes are visible (at once where the launch did not overlap); nothing before it may read what an
// earlier kernel writes, or write what one reads. grid_dependents_launch() lets the next kernel start. Before
// sm_90 both are nothing, and launches do not overlap. Every overlapping kernel calls the second only after the
// first, so when a kernel starts, every kernel before the one ahead has ended: before its wait a kernel may read
// what only those wrote (the weights, the cache's earlier positions, the step's position).
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// the 128-byte lines of [p, p + bytes) into L2, the lanes of a warp taking every 32nd line: a kernel that waits for
// the grid before it fetches its weights meanwhile
__device__ __forceinline__ void prefetch_l2(const void *p, long long bytes, int lane) {
    const char *c = (const char *)p;
    for (long long o = (long long)lane * 128; o < bytes; o += 32 * 128) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(c + o));
}

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
// the tanh form itself, through the tanh given (tanhf here in fp32; the special-function unit's in fc_gemm.cu)
template <class Tanh> __device__ __forceinline__ float gelu_with(float u, Tanh tanh_fn) {
    return 0.5f * u * (1.0f + tanh_fn(GELU_K * (u + 0.044715f * u * u * u)));
}
template <class Tanh> __device__ __forceinline__ float gelu_grad_with(float u, Tanh tanh_fn) {
    const float th = tanh_fn(GELU_K * (u + 0.044715f * u * u * u));
    const float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * u * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * u * u);
}
// tanh in one special-function operation (tanh.approx.f32, sm_75 on: relative error at most 2^-10.99, below a 16-bit
// rounding that follows), else through the logistic function as the 16-bit GELU below
__device__ __forceinline__ float tanh_approx(float x) {
#if __CUDA_ARCH__ >= 750
    float r;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
#else
    return 2.0f * __fdividef(1.0f, 1.0f + __expf(-2.0f * x)) - 1.0f;
#endif
}
// the logit soft-cap, cap tanh(z / cap) (a relative's model.logit_softcap): the exact tanhf in fp32, as the CPU
// reference; tanh_approx in 16 bits, where a rounding to floatX follows (classifier.cu says why it pays there)
__device__ __forceinline__ float softcap(float z, float cap) {
#ifdef PRECISION_FP32
    return cap * tanhf(z / cap);
#else
    return cap * tanh_approx(z / cap);
#endif
}
#ifdef PRECISION_FP32
__device__ __forceinline__ float gelu(float u) { return gelu_with(u, [](float z) { return tanhf(z); }); }
__device__ __forceinline__ float gelu_grad(float u) { return gelu_grad_with(u, [](float z) { return tanhf(z); }); }
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

// ---- Hopper's warpgroup MMA (wgmma.mma_async), for the templates that run it on sm_90a in 16 bits ----
// PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"; docs/hopper-attention.md has the layouts. Tiles
// in shared memory have rows of 64 16-bit elements (128 bytes) in the 128-byte swizzle: the 16-byte chunk c of row r
// sits at chunk c ^ (r % 8), tiles 1024-byte aligned. For a thread of a warpgroup (w = warp in its warpgroup, g =
// lane / 4, t = lane % 4), the fp32 accumulator d[x] of a 64 x N product is at row 16w + g + 8((x >> 1) & 1), column
// 8(x >> 2) + 2t + (x & 1). HOPPER_WGMMA is 1 where these compile (sm_90a, bf16 or fp16), else 0.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(PRECISION_FP32)
#define HOPPER_WGMMA 1
typedef unsigned long long u64;
constexpr int WG_THREADS = 128;
// element (r, c) of a swizzled tile
__device__ __forceinline__ int sw128(int r, int c) { return r * 64 + ((((c >> 3) ^ (r & 7)) << 3) | (c & 7)); }


// Shared-memory matrix descriptors of a swizzled tile at p (16-byte units; swizzle mode 1 = 128 bytes in bits
// 62-63). K-major (the product's k along a row: A, and B given as B^T): the stride between 8-row groups is 1024
// bytes, and the next 16 k are the next 32 bytes of the row. N-major (B as (k, n) rows: imm-trans-b 1): the next 8
// k are the next 1024 bytes, the next 16 k the next 2048 (16 rows); the offset to a next 64-column panel (LBO) is
// never used at n = 64.
__device__ __forceinline__ u64 desc_sw(const floatX *p, u32 lbo) {
    const u32 a = smem_addr(p);
    return (u64)((a & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ u64 desc_k(const floatX *tile, int kstep) { return desc_sw(tile + kstep * 16, 16); }

#if PRECISION_BF16
#define WGMMA_TYPES ".f32.bf16.bf16 "
#else
#define WGMMA_TYPES ".f32.f16.f16 "
#endif
#define WGMMA_OP(n) "wgmma.mma_async.sync.aligned.m64n" #n "k16" WGMMA_TYPES
#define ACC32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define ACC64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define ACC128 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63," \
    "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define ACC8(d, x) "+f"(d[x]), "+f"(d[x + 1]), "+f"(d[x + 2]), "+f"(d[x + 3]), "+f"(d[x + 4]), "+f"(d[x + 5]), "+f"(d[x + 6]), "+f"(d[x + 7])
#define ACC_OUT(d) ACC8(d, 0), ACC8(d, 8), ACC8(d, 16), ACC8(d, 24)
#define ACC_OUT64(d) ACC_OUT(d), ACC8(d, 32), ACC8(d, 40), ACC8(d, 48), ACC8(d, 56)
#define ACC_OUT128(d) ACC_OUT64(d), ACC8(d, 64), ACC8(d, 72), ACC8(d, 80), ACC8(d, 88), ACC8(d, 96), ACC8(d, 104), ACC8(d, 112), ACC8(d, 120)
// d (+)= A B, A and B from shared memory, N = 64, 128 or 256 columns (d: N / 2 accumulators a thread); accumulate 0
// overwrites d
template <int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float (&d)[32], u64 da, u64 db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" WGMMA_OP(64) ACC32 ", %32, %33, p, 1, 1, 0, %35;\n}\n"
                 : ACC_OUT(d) : "l"(da), "l"(db), "r"(accumulate), "n"(TRANS_B) : "memory");
}
template <int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float (&d)[64], u64 da, u64 db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" WGMMA_OP(128) ACC64 ", %64, %65, p, 1, 1, 0, %67;\n}\n"
                 : ACC_OUT64(d) : "l"(da), "l"(db), "r"(accumulate), "n"(TRANS_B) : "memory");
}
template <int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float (&d)[128], u64 da, u64 db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" WGMMA_OP(256) ACC128 ", %128, %129, p, 1, 1, 0, %131;\n}\n"
                 : ACC_OUT128(d) : "l"(da), "l"(db), "r"(accumulate), "n"(TRANS_B) : "memory");
}
// d += A B, A from registers (four packed pairs), B from shared memory
template <int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const u32 (&a)[4], u64 db) {
    asm volatile(WGMMA_OP(64) ACC32 ", {%32,%33,%34,%35}, %36, 1, 1, 1, %37;\n"
                 : ACC_OUT(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TRANS_B) : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// waits until at most N of the groups committed last are still running (all older ones are done)
template <int N = 0> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// after a wait: the compiler may not move reads of d above it
template <int N> __device__ __forceinline__ void pin(float (&d)[N]) {
    for (int x = 0; x < N; x++) asm volatile("" : "+f"(d[x])::"memory");
}

// the dynamic shared memory rounded up to 1024 bytes (the launch asks for 1 KiB more: gen/kernels.c)
__device__ __forceinline__ floatX *smem_1024(unsigned char *p) {
    const u32 a = smem_addr(p);
    return reinterpret_cast<floatX *>(p + ((1024 - (a & 1023)) & 1023));
}

// the copies into shared memory made by cp.async are visible to wgmma (the generic proxy's writes ordered before the
// async proxy's reads)
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#else
#define HOPPER_WGMMA 0
#endif
