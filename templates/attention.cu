// attention.cu: causal self-attention without cuDNN, around two cuBLASLt strided-batched matmuls per pass.
// Forward:  qkv (B,T,3C) --attention_permute--> q,k,v (B,NH,T,HS); preatt = q k^T (cuBLASLt);
//           att = attention_softmax_forward(preatt): causal softmax of preatt / sqrt(HS), zeros above the
//           diagonal; vaccum = att v (cuBLASLt); out (B,T,C) = attention_unpermute(vaccum).
// Backward: dvaccum = attention_unpermute_backward(dout); datt = dvaccum v^T, dv = att^T dvaccum (cuBLASLt);
//           dpreatt = attention_softmax_backward(datt, att) (scale fused; in place allowed);
//           dq = dpreatt k, dk = dpreatt^T q (cuBLASLt); dqkv = attention_permute_backward(dq, dk, dv).

constexpr int HVEC = VEC_HS;                   // elements per access along a head
constexpr int HPACKETS = HS / HVEC;
constexpr long long N_PACKETS = (long long)B * NH * T * HPACKETS;
constexpr int TVEC = VEC_T;                    // elements per access along an attention row
constexpr int TPACKETS = T / TVEC;
constexpr int TPER_LANE = (TPACKETS + WARP_SIZE - 1) / WARP_SIZE;
constexpr double const_sqrt(double x) {             // Newton's method, at compile time
    double r = x > 1.0 ? x : 1.0;
    for (int i = 0; i < 64; i++) r = 0.5 * (r + x / r);
    return r;
}
constexpr float SCALE = (float)(1.0 / const_sqrt((double)HS));
constexpr float LOG2E = 1.4426950408889634f;
typedef Packed<floatX, HVEC> hvec;
typedef Packed<floatX, TVEC> tvec;

// Packet i of the (B,NH,T,HS) layout -> offset of the same values in a (B,T,n*C) row-major tensor.
__device__ __forceinline__ long long btc_offset(long long i, int row_width) {
    const int p = (int)(i % HPACKETS);
    const long long r = i / HPACKETS;
    const int t = (int)(r % T), h = (int)((r / T) % NH), b = (int)(r / ((long long)T * NH));
    return ((long long)b * T + t) * row_width + h * HS + p * HVEC;
}

KERNEL(attention_permute) {
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= N_PACKETS) return;
    const long long src = btc_offset(i, 3 * C);
    store_vec<floatX, HVEC>(q + i * HVEC, load_vec_cs<floatX, HVEC>(qkv + src));
    store_vec<floatX, HVEC>(k + i * HVEC, load_vec_cs<floatX, HVEC>(qkv + src + C));
    store_vec<floatX, HVEC>(v + i * HVEC, load_vec_cs<floatX, HVEC>(qkv + src + 2 * C));
}

KERNEL(attention_unpermute) {
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= N_PACKETS) return;
    store_vec<floatX, HVEC>(out + btc_offset(i, C), load_vec_cs<floatX, HVEC>(vaccum + i * HVEC));
}

// dqkv is overwritten
KERNEL(attention_permute_backward) {
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= N_PACKETS) return;
    const long long dst = btc_offset(i, 3 * C);
    store_vec<floatX, HVEC>(dqkv + dst, load_vec_cs<floatX, HVEC>(dq + i * HVEC));
    store_vec<floatX, HVEC>(dqkv + dst + C, load_vec_cs<floatX, HVEC>(dk + i * HVEC));
    store_vec<floatX, HVEC>(dqkv + dst + 2 * C, load_vec_cs<floatX, HVEC>(dv + i * HVEC));
}

KERNEL(attention_unpermute_backward) {
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= N_PACKETS) return;
    store_vec<floatX, HVEC>(dvaccum + i * HVEC, load_vec_cs<floatX, HVEC>(dout + btc_offset(i, C)));
}

// One warp per row (b,h,t) of the (B,NH,T,T) scores; row t keeps columns 0..t. att may alias preatt.
KERNEL(attention_softmax_forward) {
    const int lane = threadIdx.x % WARP_SIZE;
    const long long row = (long long)blockIdx.x * (SOFTMAX_BLOCK_SIZE / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= (long long)B * NH * T) return;
    const int t = (int)(row % T);
    const floatX *in = preatt + row * T;
    floatX *out = att + row * T;
    // scores in log2 units, scale folded in; online max and sum per lane
    float x[TPER_LANE][TVEC];
    float m = -3.0e38f, s = 0.0f;
    for (int i = 0; i < TPER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= TPACKETS || p * TVEC > t) continue;
        const tvec v = load_vec<floatX, TVEC>(in + p * TVEC);
        for (int k = 0; k < TVEC; k++) {
            const int j = p * TVEC + k;
            x[i][k] = to_f(v[k]) * (SCALE * LOG2E);
            if (j <= t) {
                if (x[i][k] > m) { s = s * exp2f(m - x[i][k]) + 1.0f; m = x[i][k]; }
                else s += exp2f(x[i][k] - m);
            }
        }
    }
    const float M = warp_max(m);
    const float S = warp_sum(s * exp2f(m - M));
    const float inv = 1.0f / S;
    for (int i = 0; i < TPER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= TPACKETS) continue;
        tvec o;
        for (int k = 0; k < TVEC; k++) {
            const int j = p * TVEC + k;
            o[k] = from_f<floatX>(j <= t ? exp2f(x[i][k] - M) * inv : 0.0f);
        }
        store_vec<floatX, TVEC>(out + p * TVEC, o);
    }
}

// dpreatt = scale * att * (datt - sum_j att_j datt_j) on the causal part, 0 above it. dpreatt may alias datt.
KERNEL(attention_softmax_backward) {
    const int lane = threadIdx.x % WARP_SIZE;
    const long long row = (long long)blockIdx.x * (SOFTMAX_BLOCK_SIZE / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= (long long)B * NH * T) return;
    const int t = (int)(row % T);
    float a[TPER_LANE][TVEC], d[TPER_LANE][TVEC];
    float s = 0.0f;
    for (int i = 0; i < TPER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= TPACKETS || p * TVEC > t) continue;
        const tvec av = load_vec<floatX, TVEC>(att + row * T + p * TVEC);
        const tvec dv = load_vec<floatX, TVEC>(datt + row * T + p * TVEC);
        for (int k = 0; k < TVEC; k++) {
            a[i][k] = to_f(av[k]); d[i][k] = to_f(dv[k]);
            if (p * TVEC + k <= t) s += a[i][k] * d[i][k];
        }
    }
    s = warp_sum(s);
    for (int i = 0; i < TPER_LANE; i++) {
        const int p = lane + i * WARP_SIZE;
        if (p >= TPACKETS) continue;
        tvec o;
        for (int k = 0; k < TVEC; k++) {
            const int j = p * TVEC + k;
            o[k] = from_f<floatX>(j <= t ? SCALE * a[i][k] * (d[i][k] - s) : 0.0f);
        }
        store_vec<floatX, TVEC>(dpreatt + row * T + p * TVEC, o);
    }
}
