// encoder.cu: token + position embedding.
//   encoder_forward       out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
//   encoder_backward_wpe  dwpe[t,:] += sum over b of dout[b,t,:]             (b in order)
//   encoder_backward_wte  dwte[tok,:] += sum of dout over the positions holding tok, one bucket per distinct
//                         token, positions in increasing order (the host builds the buckets from the inputs)
// Every sum runs in a fixed order with no atomics: the backward gives the same bits on every run.

constexpr int VEC = VEC_C;
constexpr int PACKETS = C / VEC;
typedef Packed<floatX, VEC> xvec;

KERNEL(encoder_forward) {
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= (long long)B * T * PACKETS) return;
    const int bt = (int)(i / PACKETS), p = (int)(i % PACKETS), t = bt % T;
    const xvec a = load_vec<floatX, VEC>(wte + (long long)inp[bt] * C + p * VEC);
    const xvec b = load_vec<floatX, VEC>(wpe + (long long)t * C + p * VEC);
    xvec o;
    for (int k = 0; k < VEC; k++) o[k] = from_f<floatX>(to_f(a[k]) + to_f(b[k]));
    store_vec<floatX, VEC>(out + (long long)bt * C + p * VEC, o);
}

KERNEL(encoder_backward_wpe) {
    const int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= T * PACKETS) return;
    const int t = i / PACKETS, p = i % PACKETS;
    float acc[VEC];
    for (int k = 0; k < VEC; k++) acc[k] = 0.0f;
    for (int b = 0; b < B; b++) {
        const xvec g = load_vec<floatX, VEC>(dout + ((long long)b * T + t) * C + p * VEC);
        for (int k = 0; k < VEC; k++) acc[k] += to_f(g[k]);
    }
    xvec d = load_vec<floatX, VEC>(dwpe + (long long)t * C + p * VEC);
    for (int k = 0; k < VEC; k++) d[k] = from_f<floatX>(to_f(d[k]) + acc[k]);
    store_vec<floatX, VEC>(dwpe + (long long)t * C + p * VEC, d);
}

// One block row per bucket, blocks of it over the packets. Bucket j is token bucket_token[j]; its positions (b*T+t)
// are positions[bucket_start[j] .. bucket_start[j+1]).
KERNEL(encoder_backward_wte) {
    const int j = blockIdx.x, p = blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= n_buckets || p >= PACKETS) return;
    float acc[VEC];
    for (int k = 0; k < VEC; k++) acc[k] = 0.0f;
    for (int q = bucket_start[j]; q < bucket_start[j + 1]; q++) {
        const xvec g = load_vec<floatX, VEC>(dout + (long long)positions[q] * C + p * VEC);
        for (int k = 0; k < VEC; k++) acc[k] += to_f(g[k]);
    }
    floatX *dst = dwte + (long long)bucket_token[j] * C + p * VEC;
    xvec d = load_vec<floatX, VEC>(dst);
    for (int k = 0; k < VEC; k++) d[k] = from_f<floatX>(to_f(d[k]) + acc[k]);
    store_vec<floatX, VEC>(dst, d);
}
