// grad_norm.cu: the squared L2 norm of a vector, for the global gradient norm.
//   global_norm_squared  partials[block] = sum of squares of a fixed, grid-strided share of data; the caller
//                        adds the gridDim.x partials in order. No atomics: same bits on every run.

constexpr int VEC = X128;
typedef Packed<floatX, VEC> xvec;

// Handles the tail (n not a multiple of VEC) with scalar loads.
KERNEL(global_norm_squared) {
    float acc = 0.0f;
    const long long stride = (long long)gridDim.x * BLOCK_SIZE;
    const long long nvec = n / VEC;
    for (long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x; i < nvec; i += stride) {
        const xvec x = load_vec_cs<floatX, VEC>(data + i * VEC);
        for (int k = 0; k < VEC; k++) { const float f = to_f(x[k]); acc += f * f; }
    }
    for (long long i = nvec * VEC + (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x; i < n; i += stride) {
        const float f = to_f(data[i]);
        acc += f * f;
    }
    const float s = block_sum<BLOCK_SIZE>(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}
