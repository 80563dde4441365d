// gelu.cu: GELU, tanh approximation: 0.5u(1 + tanh(sqrt(2/pi)(u + 0.044715u^3))), elementwise over n values
// (n a multiple of the vector width; the model's n is B*T*4C). With train.gelu = "kernel" the training step's GELU
// runs here, beside the fc matmul's plain bias epilogue; its backward is bias.cu's gelu_backward_bias_partial.
//   gelu_forward   out = GELU(inp)
//   gelu_backward  dinout = GELU'(inp) * dinout, in place

constexpr int VEC = VEC_4C;
typedef Packed<floatX, VEC> xvec;   // gelu() and gelu_grad(): common.cuh

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
