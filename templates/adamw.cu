// adamw.cu: the AdamW update over one parameter tensor of n elements, fp32 optimizer state (m, v).
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * p)
// With a master copy (fp32), p is read from and written to it, and the floatX weights get p stochastically
// rounded (a function of the fp32 value and its index in the tensor, idx0 + i: see round_store); without one, p is
// the floatX weight. idx0: where this launch starts in the tensor (a ZeRO-1 shard may start inside one), so the
// rounding is the same however the tensor is cut.

KERNEL(adamw_update) {
    const long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i >= n) return;
    const float g = to_f(grads[i]) * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = master ? master[i] : to_f(params[i]);
    p -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p);
    if (master) master[i] = p;
    round_store(params + i, p, (unsigned int)(idx0 + i));
}
