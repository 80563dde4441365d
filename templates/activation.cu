// activation.cu: the MLP activations of GPT-2's relatives, elementwise over n values (n = B*T*FFN, a multiple of the
// vector width), and the logit soft-cap.
//   relu2_forward    out = relu(pre)^2
//   relu2_backward   dinout *= 2 relu(pre)
//   swiglu_forward   out = silu(gate) * up, silu(x) = x sigmoid(x)
//   swiglu_backward  from d = dinout: dgate = d up silu'(gate), dinout = d silu(gate); silu'(x) = s (1 + x (1 - s))
//   softcap_forward  logits = SOFTCAP tanh(logits / SOFTCAP), n values: a decode step's, and logits read without
//                    a loss (a training step's loss caps inside the classifier kernel, templates/classifier.cu)

constexpr int VEC = VEC_FFN;
typedef Packed<floatX, VEC> xvec;

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

KERNEL(relu2_forward) {
    const long long i = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * VEC;
    if (i >= n) return;
    const xvec x = load_vec_cs<floatX, VEC>(pre + i);
    xvec o;
    for (int k = 0; k < VEC; k++) { const float u = to_f(x[k]); o[k] = from_f<floatX>(u > 0.0f ? u * u : 0.0f); }
    store_vec<floatX, VEC>(out + i, o);
}

KERNEL(relu2_backward) {
    const long long i = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * VEC;
    if (i >= n) return;
    const xvec x = load_vec_cs<floatX, VEC>(pre + i);
    xvec d = load_vec_cs<floatX, VEC>(dinout + i);
    for (int k = 0; k < VEC; k++) { const float u = to_f(x[k]); d[k] = from_f<floatX>(to_f(d[k]) * (u > 0.0f ? 2.0f * u : 0.0f)); }
    store_vec_cs<floatX, VEC>(dinout + i, d);
}

KERNEL(swiglu_forward) {
    const long long i = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * VEC;
    if (i >= n) return;
    const xvec u = load_vec_cs<floatX, VEC>(up + i), g = load_vec_cs<floatX, VEC>(gate + i);
    xvec o;
    for (int k = 0; k < VEC; k++) { const float x = to_f(g[k]); o[k] = from_f<floatX>(x * sigmoidf(x) * to_f(u[k])); }
    store_vec<floatX, VEC>(out + i, o);
}

KERNEL(swiglu_backward) {
    const long long i = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * VEC;
    if (i >= n) return;
    const xvec u = load_vec_cs<floatX, VEC>(up + i), g = load_vec_cs<floatX, VEC>(gate + i);
    xvec d = load_vec_cs<floatX, VEC>(dinout + i), dg;
    for (int k = 0; k < VEC; k++) {
        const float x = to_f(g[k]), s = sigmoidf(x), dk = to_f(d[k]);
        dg[k] = from_f<floatX>(dk * to_f(u[k]) * s * (1.0f + x * (1.0f - s)));
        d[k] = from_f<floatX>(dk * x * s);
    }
    store_vec_cs<floatX, VEC>(dgate + i, dg);
    store_vec_cs<floatX, VEC>(dinout + i, d);
}

// ---- the soft-cap over rows of Vp logits ----
constexpr int LVEC = VEC_Vp;
typedef Packed<floatX, LVEC> lvec;

KERNEL(softcap_forward) {
    const long long i = ((long long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * LVEC;
    if (i >= n) return;
    lvec x = load_vec<floatX, LVEC>(logits + i);
    for (int k = 0; k < LVEC; k++) x[k] = from_f<floatX>(softcap(to_f(x[k]), SOFTCAP));
    store_vec<floatX, LVEC>(logits + i, x);
}
