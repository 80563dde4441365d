// rope.cu: rotary position embedding (RoPE) of q and k, and grouped-query attention's keys and values for the
// attention kernels, which take a head of k and v per query head.
//   rope_forward   each q and k head of qkv (B*T rows of QKVW) rotated in place: channels i and i + HS/2 of a head at
//                  position p by the angle p ROPE_THETA^(-2i/HS): x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin
//                  (rotate_half, as Llama's; cpu_rope is the reference)
//   rope_backward  the gradient rotated back (the angle negated), in place in dqkv
//   kv_expand      out (B*T rows of 3C) = q as it is, then for each query head h the k and v of kv head h / (NH/NKV)
//   kv_reduce      dqkv (B*T rows of QKVW) from d(out): dq as it is, each kv head's dk and dv the sums (fp32, in head
//                  order) over its NH/NKV query heads
// The position p is t, or (ROPE_AT_POS: a decode step, a prefill) pos[0] + t; the angle is common.cuh's rope_sincos.
// A thread takes a pair of channels of a row over all its q and k heads, which share the angle. With QK-norm at a
// head size that is a multiple of 64 (QK_ROPE), rmsnorm.cu's QK-norm kernels rotate instead, and no plan calls these.

constexpr int HALF = HS / 2;
constexpr int QK_HEADS = NH + NKV;

template <int DIR>
__device__ __forceinline__ void rope_rotate(floatX *qkv, const int *pos) {
    const long long idx = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (idx >= (long long)B * T * HALF) return;
    const int i = (int)(idx % HALF);
    const long long row = idx / HALF;
    const int t = (int)(row % T);
    float s, c;
    rope_sincos(ROPE_AT_POS ? pos[0] + t : t, i, &s, &c);
    s *= (float)DIR;
    floatX *x = qkv + row * QKVW;
    for (int h = 0; h < QK_HEADS; h++) {   // q's heads, then k's
        floatX *xh = x + h * HS;
        const float x1 = to_f(xh[i]), x2 = to_f(xh[i + HALF]);
        xh[i] = from_f<floatX>(x1 * c - x2 * s);
        xh[i + HALF] = from_f<floatX>(x2 * c + x1 * s);
    }
}

KERNEL(rope_forward) { rope_rotate<1>(qkv, pos); }
KERNEL(rope_backward) { rope_rotate<-1>(dqkv, pos); }

// ---- grouped-query attention: NH query heads, NKV key/value heads, KV_GROUP query heads a kv head (common.cuh) ----
constexpr int KVEC = VEC_HS;   // divides HS, so a packet stays in one head
typedef Packed<floatX, KVEC> kvec;

// feature f of a row of 3C (q, then NH heads of k, then NH of v) -> its feature in a row of QKVW
__device__ __forceinline__ int kv_source(int f) {
    const int part = f / C, h = (f % C) / HS, c = f % HS;
    if (part == 0) return f;
    return (part == 1 ? NH : NH + NKV) * HS + (h / KV_GROUP) * HS + c;
}

KERNEL(kv_expand) {
    const long long idx = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * KVEC;
    if (idx >= (long long)B * T * 3 * C) return;
    const long long row = idx / (3 * C);
    const int f = (int)(idx % (3 * C));
    store_vec<floatX, KVEC>(out + idx, load_vec<floatX, KVEC>(qkv + row * QKVW + kv_source(f)));
}

KERNEL(kv_reduce) {
    const long long idx = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * KVEC;   // in dqkv
    if (idx >= (long long)B * T * QKVW) return;
    const long long row = idx / QKVW;
    const int f = (int)(idx % QKVW);
    const floatX *src = dexp + row * 3 * C;
    if (f < C) {
        store_vec<floatX, KVEC>(dqkv + idx, load_vec<floatX, KVEC>(src + f));
        return;
    }
    const int part = f < (NH + NKV) * HS ? 1 : 2, j = (f - (part == 1 ? NH : NH + NKV) * HS) / HS, c = f % HS;
    float acc[KVEC];
    for (int k = 0; k < KVEC; k++) acc[k] = 0.0f;
    for (int g = 0; g < KV_GROUP; g++) {
        const kvec v = load_vec<floatX, KVEC>(src + part * C + (j * KV_GROUP + g) * HS + c);
        for (int k = 0; k < KVEC; k++) acc[k] += to_f(v[k]);
    }
    kvec o;
    for (int k = 0; k < KVEC; k++) o[k] = from_f<floatX>(acc[k]);
    store_vec<floatX, KVEC>(dqkv + idx, o);
}
