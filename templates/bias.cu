// bias.cu: the bias gradients beside the cuBLASLt matmuls (whose bias and GELU epilogues do the forward).
//   bias_backward_partial  scratch[split, oc] = sum of dout[n, oc] over the rows of one of ROW_SPLITS slices
//   bias_backward_reduce   dbias[oc] += sum over the slices, in order
//   gelu_backward_bias_partial  dinout[n, oc] *= GELU'(pre[n, oc]) in place (the fc layer's GELU backward, with
//                          train.gelu = "kernel"), and scratch as bias_backward_partial of the result: the fc bias
//                          gradient in the same pass over the data
// Fixed summation order everywhere (no atomics): same bits on every run. OC is a multiple of C.

constexpr int VEC = VEC_C;
constexpr int N_ROWS = B * T;
constexpr int WARPS = BLOCK_SIZE / WARP_SIZE;
constexpr int COLS_PER_BLOCK = WARP_SIZE * VEC;
typedef Packed<floatX, VEC> xvec;

// The column sums of one ROW_SPLITS slice of rows: each lane VEC columns, a warp every WARPS-th row of the slice,
// ROWS_IN_FLIGHT rows at a time whose loads are all issued before any is used (the memory's latency overlaps); the
// warps' sums added in shared memory, in order. rows(Rows<n>(), i, pitch, acc) adds the n rows at elements i,
// i + pitch, ... to acc (n = ROWS_IN_FLIGHT, then 1 at the slice's end: no branch on a row count inside, so that the
// kernels fit the 64 registers of MIN_BLOCKS blocks a multiprocessor without spilling).
constexpr int ROWS_IN_FLIGHT = 4;
template <int N> struct Rows { static constexpr int n = N; };
template <typename RowsFn>
__device__ __forceinline__ void column_partials(float *scratch, int OC, RowsFn rows) {
    __shared__ float s_part[WARPS][COLS_PER_BLOCK];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int col = blockIdx.x * COLS_PER_BLOCK + lane * VEC;
    constexpr int ROWS_PER_SPLIT = (N_ROWS + ROW_SPLITS - 1) / ROW_SPLITS;
    const int r0 = blockIdx.y * ROWS_PER_SPLIT;
    const int r1 = r0 + ROWS_PER_SPLIT < N_ROWS ? r0 + ROWS_PER_SPLIT : N_ROWS;
    float acc[VEC];
    for (int k = 0; k < VEC; k++) acc[k] = 0.0f;
    if (col < OC) {
        const long long pitch = (long long)WARPS * OC;      // elements between a warp's rows
        long long i = (long long)(r0 + warp) * OC + col;
        int r = r0 + warp;
        for (; r + (ROWS_IN_FLIGHT - 1) * WARPS < r1; r += ROWS_IN_FLIGHT * WARPS, i += ROWS_IN_FLIGHT * pitch)
            rows(Rows<ROWS_IN_FLIGHT>(), i, pitch, acc);
        for (; r < r1; r += WARPS, i += pitch) rows(Rows<1>(), i, pitch, acc);
    }
    for (int k = 0; k < VEC; k++) s_part[warp][lane * VEC + k] = acc[k];
    __syncthreads();
    for (int c = threadIdx.x; c < COLS_PER_BLOCK; c += BLOCK_SIZE) {
        const int oc = blockIdx.x * COLS_PER_BLOCK + c;
        if (oc >= OC) continue;
        float s = 0.0f;
        for (int w = 0; w < WARPS; w++) s += s_part[w][c];
        scratch[(long long)blockIdx.y * OC + oc] = s;
    }
}

KERNEL(bias_backward_partial) {
    column_partials(scratch, OC, [&](auto count, long long i, long long pitch, float *acc) {
        constexpr int n = decltype(count)::n;
        xvec g[n];
#pragma unroll
        for (int u = 0; u < n; u++) g[u] = load_vec<floatX, VEC>(dout + i + u * pitch);
#pragma unroll
        for (int u = 0; u < n; u++)
            for (int k = 0; k < VEC; k++) acc[k] += to_f(g[u][k]);
    });
}

// the sums are of the stored (rounded) gradient, as bias_backward_partial would read it
KERNEL(gelu_backward_bias_partial) {
    column_partials(scratch, OC, [&](auto count, long long i, long long pitch, float *acc) {
        constexpr int n = decltype(count)::n;
        xvec x[n], d[n];
#pragma unroll
        for (int u = 0; u < n; u++) {
            x[u] = load_vec_cs<floatX, VEC>(pre + i + u * pitch);
            d[u] = load_vec_cs<floatX, VEC>(dinout + i + u * pitch);
        }
#pragma unroll
        for (int u = 0; u < n; u++) {
            for (int k = 0; k < VEC; k++) {
                d[u][k] = from_f<floatX>(gelu_grad(to_f(x[u][k])) * to_f(d[u][k]));
                acc[k] += to_f(d[u][k]);
            }
            store_vec<floatX, VEC>(dinout + i + u * pitch, d[u]);
        }
    });
}

KERNEL(bias_backward_reduce) {
    const int oc = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (oc >= OC) return;
    float s = 0.0f;
    for (int j = 0; j < ROW_SPLITS; j++) s += scratch[(long long)j * OC + oc];
    dbias[oc] = from_f<floatX>(to_f(dbias[oc]) + s);
}
