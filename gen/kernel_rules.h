/* kernel_rules: the indices of each family's tunables and derived constants, and the rules (gen/kernel_rules.c)
   that gen/kernels.c's declarations name. Shared by those two files only: not an interface for anyone else.
   Each family's first enum lists its tunables, the second its derived constants, in the order of its
   declaration's tunables and derived_names. */
#ifndef GPT2GEN_KERNEL_RULES_H
#define GPT2GEN_KERNEL_RULES_H
#include "gen/kernels.h"
#include <stddef.h>

/* templates/encoder.cu */
enum { ENC_BLOCK };
LaunchDims kernel_enc_forward(const KernelEnv *e, long long n);
LaunchDims kernel_enc_wpe(const KernelEnv *e, long long n);
LaunchDims kernel_enc_wte(const KernelEnv *e, long long n_buckets);

/* templates/layernorm.cu */
enum { LN_BLOCK, LN_BWD_BLOCK, LN_BWD_SUMS, LN_BWD_SM_THREADS };
enum { LN_BWD_BLOCKS, LN_BWD_SMEM, LN_BWD_MINB };
void kernel_ln_derive(KernelEnv *e);
const char *kernel_ln_check(const KernelEnv *e, char *why, size_t n);
void kernel_ln_shape_defaults(const KernelEnv *e, int *tun);
LaunchDims kernel_ln_forward(const KernelEnv *e, long long n);
LaunchDims kernel_ln_backward(const KernelEnv *e, long long n);
LaunchDims kernel_ln_reduce(const KernelEnv *e, long long n);

/* templates/bias.cu */
enum { BIAS_BLOCK, BIAS_ROW_SPLITS };
enum { BIAS_MIN_BLOCKS };
void kernel_bias_derive(KernelEnv *e);
LaunchDims kernel_bias_partial(const KernelEnv *e, long long OC);
LaunchDims kernel_bias_reduce(const KernelEnv *e, long long OC);

/* templates/attention.cu */
enum { ATT_Q_TILE, ATT_KV_TILE, ATT_BWD_TILE, ATT_BWD_INNER, ATT_Q_WARP_ROWS, ATT_BWD_WARP_ROWS, ATT_FWD_SM, ATT_BWD_SM };
enum { ATT_FWD_THREADS, ATT_BWD_THREADS, ATT_BWD_BLOCKS };
void kernel_att_derive(KernelEnv *e);
const char *kernel_att_check(const KernelEnv *e, char *why, size_t n);
void kernel_att_shape_defaults(const KernelEnv *e, int *tun);
LaunchDims kernel_att_forward(const KernelEnv *e, long long n);
LaunchDims kernel_att_backward(const KernelEnv *e, long long n);
LaunchDims kernel_att_dkdv(const KernelEnv *e, long long n);

/* templates/gelu.cu */
enum { GELU_BLOCK };
LaunchDims kernel_gelu_dims(const KernelEnv *e, long long n);

/* templates/fc_gemm.cu */
enum { FCG_TILE_N, FCG_STAGES, FCG_SM_BLOCKS, FCG_EPI_BYTES, FCG_WARPGROUPS, FCG_CLUSTER, FCG_GRID, FCG_TILE_WARPGROUPS };
enum { FCG_THREADS, FCG_MIN_BLOCKS, FCG_M_TILES, FCG_CLUSTER_BLOCKS };
void kernel_fcg_derive(KernelEnv *e);
const char *kernel_fcg_check(const KernelEnv *e, char *why, size_t n);
LaunchDims kernel_fcg_gemm(const KernelEnv *e, long long n);
LaunchDims kernel_fcg_transpose(const KernelEnv *e, long long n);
LaunchDims kernel_fcg_reduce(const KernelEnv *e, long long n);

/* templates/classifier.cu */
enum { CLS_BLOCK, CLS_CHUNK_ROWS, CLS_UNROLL, CLS_SECOND_PASS };
enum { CLS_CHUNK, CLS_ROW_BYTES };
void kernel_cls_derive(KernelEnv *e);
LaunchDims kernel_cls_dims(const KernelEnv *e, long long n);

/* templates/grad_norm.cu */
enum { NORM_BLOCK, NORM_GRID };
LaunchDims kernel_norm_dims(const KernelEnv *e, long long n);

/* templates/adamw.cu */
enum { ADAMW_BLOCK };
LaunchDims kernel_adamw_dims(const KernelEnv *e, long long n);

/* templates/decode.cu */
enum { DEC_BLOCK, DEC_KV_CHUNK, DEC_ATT_THREADS, DEC_SAMPLE_THREADS, DEC_LIN_THREADS, DEC_LIN_COLS };
enum { DEC_KV_SPLITS };
void kernel_dec_derive(KernelEnv *e);
const char *kernel_dec_check(const KernelEnv *e, char *why, size_t n);
LaunchDims kernel_dec_embed(const KernelEnv *e, long long n);
LaunchDims kernel_dec_append(const KernelEnv *e, long long n);
LaunchDims kernel_dec_attention(const KernelEnv *e, long long n);
LaunchDims kernel_dec_sample(const KernelEnv *e, long long n);
LaunchDims kernel_dec_linear(const KernelEnv *e, long long OC);
LaunchDims kernel_dec_advance(const KernelEnv *e, long long n);
/* decode_step (templates/decode_step.cu): n_blocks blocks, one a multiprocessor */
enum { STEP_THREADS_T, STEP_COLS_T };
LaunchDims kernel_dec_step(const KernelEnv *e, long long n_blocks);
/* gen/kernel_rules_arch.c: the families of GPT-2's relatives, and which models have them */
/* templates/rmsnorm.cu */
enum { RMS_BLOCK, RMS_BWD_BLOCK };
enum { RMS_BWD_BLOCKS, RMS_QK_BLOCKS };
void kernel_rms_derive(KernelEnv *e);
LaunchDims kernel_rms_rows(const KernelEnv *e, long long n);
LaunchDims kernel_rms_backward(const KernelEnv *e, long long n);
LaunchDims kernel_rms_reduce(const KernelEnv *e, long long n);
LaunchDims kernel_qk_backward(const KernelEnv *e, long long n);
LaunchDims kernel_qk_reduce(const KernelEnv *e, long long n);
int kernel_rms_in_model(const GPT2Shape *m);
/* templates/rope.cu */
enum { ROPE_BLOCK };
const char *kernel_rope_check(const KernelEnv *e, char *why, size_t n);
LaunchDims kernel_rope_dims(const KernelEnv *e, long long n);
LaunchDims kernel_kv_dims(const KernelEnv *e, long long n);
int kernel_rope_in_model(const GPT2Shape *m);
/* templates/activation.cu */
enum { ACT_BLOCK };
LaunchDims kernel_act_dims(const KernelEnv *e, long long n);
LaunchDims kernel_softcap_dims(const KernelEnv *e, long long n);
int kernel_act_in_model(const GPT2Shape *m);
int kernel_fcg_in_model(const GPT2Shape *m);
/* GPT-2's own families in the relatives' plans: LayerNorm's where the model has LayerNorm, GELU's (and its fused fc
   matmuls') where it has the GELU MLP */
int kernel_layernorm_in_model(const GPT2Shape *m);
int kernel_gelu_in_model(const GPT2Shape *m);
#endif
