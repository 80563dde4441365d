// gelu.cu: GELU, tanh approximation: 0.5u(1 + tanh(sqrt(2/pi)(u + 0.044715u^3))), elementwise over n values
// (n a multiple of the vector width; the model's n is B*T*4C).
//   gelu_forward   out = GELU(inp)
//   gelu_backward  dinout = GELU'(inp) * dinout, in place

constexpr int VEC = VEC_4C;
typedef Packed<floatX, VEC> xvec;
constexpr float GELU_K = 0.7978845608028654f;   // sqrt(2/pi)

__device__ __forceinline__ float gelu(float u) {
    return 0.5f * u * (1.0f + tanhf(GELU_K * (u + 0.044715f * u * u * u)));
}
__device__ __forceinline__ float gelu_grad(float u) {
    const float z = GELU_K * (u + 0.044715f * u * u * u);
    const float th = tanhf(z);
    const float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * u * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * u * u);
}

KERNEL(gelu_forward) {
    const long long i = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * VEC;
    if (i >= n) return;
    const xvec x = load_vec_cs<floatX, VEC>(inp + i);
    xvec o;
    for (int k = 0; k < VEC; k++) o[k] = from_f<floatX>(gelu(to_f(x[k])));
    store_vec<floatX, VEC>(out + i, o);
}

KERNEL(gelu_backward) {
    const long long i = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * VEC;
    if (i >= n) return;
    const xvec x = load_vec_cs<floatX, VEC>(inp + i);
    xvec d = load_vec_cs<floatX, VEC>(dinout + i);
    for (int k = 0; k < VEC; k++) d[k] = from_f<floatX>(gelu_grad(to_f(x[k])) * to_f(d[k]));
    store_vec_cs<floatX, VEC>(dinout + i, d);
}
