/* kernel_rules_arch: the rules of the kernel families of GPT-2's relatives (docs/model.md, "Architectures";
   gen/kernels.c declares them): their launch geometry, derived constants and checks, and which models' plans have
   them (a GPT-2 plan has none of them). */
#include "gen/kernel_rules.h"
#include <stdint.h>
#include <stdio.h>

#define WARP 32

static long long rows(const KernelEnv *e) { return e->B * e->T; }
static long long min_ll(long long a, long long b) { return a < b ? a : b; }
static LaunchDims dims(long long gx, int block) {
    LaunchDims d = {{gx < 0 || gx > UINT32_MAX ? UINT32_MAX : (unsigned)gx, 1, 1}, (unsigned)block, 0};   /* as kernel_rules.c's */
    return d;
}
/* common/gpt2.c's gpt2_kv_heads and gpt2_ffn, which tools/kernel_launchers (linked without common/) cannot call */
static int kv_heads(const GPT2Shape *m) { return m->n_kv_head ? m->n_kv_head : m->n_head; }
static int ffn(const GPT2Shape *m) { return m->n_ffn ? m->n_ffn : 4 * m->n_embd; }

/* ---- rmsnorm.cu: RMSNorm, with qk_norm each head's q and k ---- */
int kernel_rms_in_model(const GPT2Shape *m) { return m->norm == NORM_RMSNORM || m->qk_norm; }
void kernel_rms_derive(KernelEnv *e) {
    long long warps = e->tun[RMS_BWD_BLOCK] / WARP;
    e->derived[RMS_BWD_BLOCKS] = min_ll(ceil_div_u(rows(e), warps), 512);
    e->derived[RMS_QK_BLOCKS] = min_ll(ceil_div_u(rows(e), warps), 512);
}
LaunchDims kernel_rms_rows(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e), e->tun[RMS_BLOCK] / WARP), e->tun[RMS_BLOCK]);
}
LaunchDims kernel_rms_backward(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->derived[RMS_BWD_BLOCKS], e->tun[RMS_BWD_BLOCK]);
}
LaunchDims kernel_rms_reduce(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(e->C, e->tun[RMS_BLOCK]), e->tun[RMS_BLOCK]);
}
LaunchDims kernel_qk_backward(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->derived[RMS_QK_BLOCKS], e->tun[RMS_BWD_BLOCK]);
}
LaunchDims kernel_qk_reduce(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(2 * e->HS, e->tun[RMS_BLOCK]), e->tun[RMS_BLOCK]);
}

/* ---- rope.cu: RoPE, and grouped-query attention's keys and values expanded to the query heads ---- */
int kernel_rope_in_model(const GPT2Shape *m) { return m->position == POS_ROPE || kv_heads(m) != m->n_head; }
const char *kernel_rope_check(const KernelEnv *e, char *why, size_t n) {
    if (e->HS % 2 == 0) return NULL;
    snprintf(why, n, "RoPE rotates pairs of channels: the head size (%lld) must be even", e->HS);
    return why;
}
LaunchDims kernel_rope_dims(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e) * (e->HS / 2), e->tun[ROPE_BLOCK]), e->tun[ROPE_BLOCK]);
}
LaunchDims kernel_kv_dims(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e) * 3 * e->C / kernel_vec(e->x128, e->HS), e->tun[ROPE_BLOCK]), e->tun[ROPE_BLOCK]);
}

/* ---- activation.cu: ReLU^2, SwiGLU, the soft-cap ---- */
int kernel_act_in_model(const GPT2Shape *m) { return m->mlp != MLP_GELU || m->logit_softcap > 0; }
LaunchDims kernel_act_dims(const KernelEnv *e, long long n) {
    return dims(ceil_div_u(n / kernel_vec(e->x128, e->FFN), e->tun[ACT_BLOCK]), e->tun[ACT_BLOCK]);
}
LaunchDims kernel_softcap_dims(const KernelEnv *e, long long n) {
    return dims(ceil_div_u(n / kernel_vec(e->x128, e->Vp), e->tun[ACT_BLOCK]), e->tun[ACT_BLOCK]);
}

/* ---- GPT-2's own families, in a relative's plans where it uses them ---- */
int kernel_layernorm_in_model(const GPT2Shape *m) { return m->norm == NORM_LAYERNORM; }
int kernel_gelu_in_model(const GPT2Shape *m) { return m->mlp == MLP_GELU; }
/* a ReLU^2 MLP that fc_gemm's fused matmuls take (FC_RELU2): one of 4C, the width their tiles are made for */
int kernel_fcg_relu2(const GPT2Shape *m) { return m->mlp == MLP_RELU2 && ffn(m) == 4 * m->n_embd; }
/* fc_gemm's fused matmuls: the GELU's, or ReLU^2's (the plan takes them where train.gelu asks) */
int kernel_fcg_in_model(const GPT2Shape *m) { return m->mlp == MLP_GELU || kernel_fcg_relu2(m); }
