/* cpu_ops: the fp32 reference ops of GPT-2 (docs/model.md, "The model"), plain C with OpenMP.
 *
 * These are the oracle the GPU kernels are tested against, so they favour clarity and determinism:
 * work is split over rows or outputs only, each output element is computed by one thread in a fixed
 * order, and no float is ever reduced across threads. Two runs give the same bits on any thread count.
 *
 * Conventions: row-major arrays; N = B*T rows; backward functions ACCUMULATE (+=) into their gradient
 * outputs (dinp, dweight, dbias, dwte, dwpe, dqkv), so callers zero them once per step. The attention
 * scratch arrays dpreatt and datt are the exception: they are overwritten. */
#ifndef GPT2GEN_CPU_OPS_H
#define GPT2GEN_CPU_OPS_H
#include <stddef.h>
#include <stdint.h>

/* out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] */
void cpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T, int C);
void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C);

/* Per row: (x - mean) * rstd * weight + bias; eps 1e-5, biased variance. mean and rstd (N each) are saved
   for the backward. */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C);
void cpu_layernorm_forward_eps(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                               const float *bias, int N, int C, float eps);   /* bias may be NULL (then dbias too) */
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C);

/* out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be NULL). */
void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
/* dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += column sums of dout (may be NULL). */
void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC);
/* its three parts, the same sums: dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout */
void cpu_matmul_backward_dinp(float *dinp, const float *dout, const float *weight, int N, int C, int OC);
void cpu_matmul_backward_dw(float *dweight, const float *dout, const float *inp, int N, int C, int OC);
void cpu_bias_backward(float *dbias, const float *dout, int N, int OC);

/* Causal self-attention per head. qkv (B,T,3C) is q|k|v with heads contiguous inside each; out (B,T,C);
   preatt and att (B,NH,T,T) hold the scaled scores and the softmax (entries above the diagonal are 0). */
void cpu_attention_forward(float *out, float *preatt, float *att, const float *qkv, int B, int T, int C, int NH);
/* dqkv += d(out)/d(qkv) . dout; dpreatt and datt are scratch (B,NH,T,T), overwritten. */
void cpu_attention_backward(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH);

/* The key/value cache of a layer: kcache and vcache (B,NH,maxT,HS). kv_append writes the keys and values of qkv
   (B,T,3C) at positions pos..pos+T-1; attention_cached gives out (B,C): each row's last query of qkv (at position
   pos+T-1) attending over the cached positions 0..pos+T-1, as cpu_attention_forward does over a whole row. */
void cpu_kv_append(float *kcache, float *vcache, const float *qkv, int pos, int B, int T, int C, int NH, int maxT);
void cpu_attention_cached(float *out, const float *qkv, const float *kcache, const float *vcache, int pos, int B, int T,
                          int C, int NH, int maxT);

/* The same with grouped-query heads (docs/model.md, "Architectures"): qkv's rows are q (NH heads) | k (NKV) | v (NKV),
   HS each; query head h attends with key/value head h / (NH/NKV); out (B,T,NH*HS); the cache (B,NKV,maxT,HS). */
typedef struct { int B, T, NH, NKV, HS; } CpuHeads;
void cpu_attention_forward_gqa(float *out, float *preatt, float *att, const float *qkv, CpuHeads g);
void cpu_attention_backward_gqa(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                                const float *att, CpuHeads g);
void cpu_kv_append_gqa(float *kcache, float *vcache, const float *qkv, int pos, CpuHeads g, int maxT);
void cpu_attention_cached_gqa(float *out, const float *qkv, const float *kcache, const float *vcache, int pos, CpuHeads g,
                              int maxT);

/* GPT-2's relatives' ops (cpu_ops_arch.c; docs/model.md, "Architectures"); backwards accumulate as above, except
   the in-place ones (qk_norm_backward, rope with dir -1, relu2_backward, swiglu_backward), which transform dinout.
   RMSNorm per row: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps), saved (N). */
void cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
void cpu_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                          int N, int C);
/* QK-norm: RMSNorm over each head of q (weights qw, HS) and of k (kw) in qkv rows (N, (NH+2NKV)HS); v copied; rstd
   (N, NH+NKV) or NULL. out may be inp. The backward turns d(out) into d(inp) in place. */
void cpu_qk_norm_forward(float *out, float *rstd, const float *inp, const float *qw, const float *kw, int N, CpuHeads g,
                         float eps);
void cpu_qk_norm_backward(float *dinout, const float *inp, const float *qw, const float *kw, const float *rstd, float *dqw,
                          float *dkw, int N, CpuHeads g);
/* RoPE (rotate_half): q and k heads of qkv (B,T,width) rotated in place by position (pos + t) * theta^(-2i/HS);
   dir 1 forward, -1 the backward (the inverse rotation of the gradient). */
void cpu_rope(float *qkv, int pos, CpuHeads g, double theta, int dir);
void cpu_relu2_forward(float *out, const float *pre, size_t n);
void cpu_relu2_backward(float *dinout, const float *pre, size_t n);
void cpu_swiglu_forward(float *out, const float *up, const float *gate, size_t n);
void cpu_swiglu_backward(float *dinout, float *dgate, const float *up, const float *gate, size_t n);
/* x = cap * tanh(x / cap) in place; the backward: d *= 1 - (capped / cap)^2 */
void cpu_softcap_forward(float *x, size_t n, float cap);
void cpu_softcap_backward(float *d, const float *capped, size_t n, float cap);

/* GELU, tanh approximation: 0.5u(1 + tanh(sqrt(2/pi)(u + 0.044715u^3))). */
void cpu_gelu_forward(float *out, const float *inp, size_t n);
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

void cpu_residual_forward(float *out, const float *a, const float *b, size_t n);

/* The CPU's meaning of a declared kernel (gen/kernels.c) that the schedule launches as it is (OP_KERNEL,
   gen/schedule.h): its pointer parameters in order (fp32 arrays here), its scalar one n. cpu_ops.c registers one per
   kernel name; NULL where there is none. */
typedef void (*CpuKernelFn)(float *const *a, long long n);
CpuKernelFn cpu_kernel_find(const char *kernel);

/* Per row i of logits (N,Vp), of which the first V columns are real: losses[i] = -log softmax(row)[target].
   With dlogits, writes (softmax - onehot(target)) * dloss there, and 0 on the padded columns V..Vp-1;
   dlogits may be logits itself (in place). */
void cpu_softmax_crossentropy(float *losses, float *dlogits, const float *logits, const int32_t *targets,
                              float dloss, int N, int V, int Vp);

/* AdamW, step 1-based (bias correction). g = grads * grad_scale;
   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; param -= lr * (mhat / (sqrt(vhat) + eps) + wd * param). */
void cpu_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, float grad_scale, int step);
#endif
