/* kernels: the declarations of every kernel family (see kernels.h), and the lookups in them. The rules the
   declarations name (launch geometry, derived constants, checks, shape defaults) are gen/kernel_rules.c's. */
#include "gen/kernels.h"
#include "gen/kernel_rules.h"
#include <stdio.h>
#include <string.h>

#define BLOCK_SIZE_RULE .min = 32, .max = 1024, .multiple_of = 32

#define X(n) {KP_X, #n}
#define CX(n) {KP_CX, #n}
#define F32(n) {KP_F32, #n}
#define CF32(n) {KP_CF32, #n}
#define I32(n) {KP_I32, #n}
#define U64(n) {KP_U64, #n}
#define TMAP(n) {KP_TMAP, #n}
#define CI32(n) {KP_CI32, #n}
#define INT(n) {KP_INT, #n}
#define I64(n) {KP_I64, #n}
#define FLOAT(n) {KP_FLOAT, #n}

const FamilyDecl kernel_families[] = {
    {"encoder", "templates/encoder.cu", "token + position embedding and its backward",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE}}, {0}, NULL, NULL,
     {{"encoder_forward", {X(out), CI32(inp), CX(wte), CX(wpe)}, ENC_BLOCK, -1, kernel_enc_forward,
       "ceil(B*T*C/VEC_C / BLOCK_SIZE)", 0},
      {"encoder_backward_wpe", {X(dwpe), CX(dout)}, ENC_BLOCK, -1, kernel_enc_wpe, "ceil(T*C/VEC_C / BLOCK_SIZE)", 0},
      {"encoder_backward_wte", {X(dwte), CX(dout), CI32(bucket_token), CI32(bucket_start), CI32(positions), INT(n_buckets)},
       ENC_BLOCK, 5, kernel_enc_wte, "(n_buckets, ceil(C/VEC_C / block)), block min(BLOCK_SIZE, C/VEC_C rounded up to 32)", 0}}, NULL,
     STEP_BIT(STEP_TRAIN) | STEP_BIT(STEP_FORWARD), 0, NULL},
    {"layernorm", "templates/layernorm.cu", "LayerNorm forward (plain and fused with the residual add) and backward",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE},
      {"BWD_BLOCK_SIZE", 256, {128, 256, 512}, BLOCK_SIZE_RULE},
      {"BWD_SUMS", 1, {1, 2}, .min = 1, .max = 2, .multiple_of = 1},
      /* the backward's threads a multiprocessor is to hold at once: BWD_SM_THREADS / BWD_BLOCK_SIZE blocks (at least
         one) in __launch_bounds__, to which ptxas keeps the registers (256: no bound at these block sizes) */
      {"BWD_SM_THREADS", 256, {256, 512, 1024}, .min = 32, .max = 2048, .multiple_of = 32}},
     {"BWD_BLOCKS", "BWD_SMEM", "BWD_MINB"}, kernel_ln_derive, kernel_ln_check,
     {{"layernorm_forward", {X(out), F32(mean), F32(rstd), CX(inp), CX(weight), CX(bias)}, LN_BLOCK, -1, kernel_ln_forward,
       "ceil(B*T / (BLOCK_SIZE/32)): a warp per row", 0},
      {"fused_residual_layernorm_forward",
       {X(residual), X(out), F32(mean), F32(rstd), CX(inp1), CX(inp2), CX(weight), CX(bias)}, LN_BLOCK, -1, kernel_ln_forward,
       "ceil(B*T / (BLOCK_SIZE/32)): a warp per row", 0},
      {"layernorm_backward", {X(dinp), F32(scratch), X(out), CX(dout), CX(inp), CX(weight), CX(bias), CF32(mean), CF32(rstd)},
       LN_BWD_BLOCK, -1, kernel_ln_backward, "BWD_BLOCKS = min(ceil(B*T / (BWD_BLOCK_SIZE/32)), 512); BWD_SMEM bytes of shared memory",
       BOUNDS_DERIVED(LN_BWD_MINB)},
      {"layernorm_backward_reduce", {X(dweight), X(dbias), CF32(scratch)}, LN_BLOCK, -1, kernel_ln_reduce,
       "(ceil(C/32), 2): a block per 32 channels of dweight and of dbias", 0}}, kernel_ln_shape_defaults, 0, 0,
     kernel_layernorm_in_model},
    {"bias", "templates/bias.cu", "bias gradients beside the cuBLASLt matmuls (one folded into the GELU backward)",
     {{"BLOCK_SIZE", 512, {128, 256, 512}, BLOCK_SIZE_RULE},
      {"ROW_SPLITS", 64, {16, 32, 64, 128}, .min = 1, .max = 65535, .multiple_of = 1}},
     {"MIN_BLOCKS"}, kernel_bias_derive, NULL,
     {{"bias_backward_partial", {F32(scratch), CX(dout), INT(OC)}, BIAS_BLOCK, 2, kernel_bias_partial,
       "(ceil(OC / (32*VEC_C)), ROW_SPLITS)", BOUNDS_DERIVED(BIAS_MIN_BLOCKS)},
      {"bias_backward_reduce", {X(dbias), CF32(scratch), INT(OC)}, BIAS_BLOCK, 2, kernel_bias_reduce, "ceil(OC / BLOCK_SIZE)", 0},
      {"gelu_backward_bias_partial", {F32(scratch), X(dinout), CX(pre), INT(OC)}, BIAS_BLOCK, 3, kernel_bias_partial,
       "(ceil(OC / (32*VEC_C)), ROW_SPLITS), as bias_backward_partial", BOUNDS_DERIVED(BIAS_MIN_BLOCKS)}}, NULL,
     STEP_BIT(STEP_TRAIN), 0, NULL},
    {"attention", "templates/attention.cu", "causal flash attention: no (T,T) scores, deterministic backward",
     {{"Q_TILE", 64, {32, 64, 128}, .min = 16, .max = 256, .multiple_of = 16},
      {"KV_TILE", 64, {32, 64, 128}, .min = 16, .max = 128, .multiple_of = 16},
      {"BWD_TILE", 64, {32, 64, 128}, .min = 16, .max = 128, .multiple_of = 16},
      {"BWD_INNER", 64, {32, 64, 128}, .min = 16, .max = 128, .multiple_of = 16},
      {"Q_WARP_ROWS", 16, {16, 32}, .min = 16, .max = 32, .multiple_of = 16},
      {"BWD_WARP_ROWS", 16, {16, 32}, .min = 16, .max = 32, .multiple_of = 16},
      /* the tensor-core instructions of the forward and of the backward: 80 = mma.sync (sm_80 and later), 90 =
         wgmma (Hopper) */
      {"FWD_SM", 80, {80, 90}, .min = 80, .max = 90, .multiple_of = 10},
      {"BWD_SM", 80, {80, 90}, .min = 80, .max = 90, .multiple_of = 10}},
     {"FWD_THREADS", "BWD_THREADS", "BWD_BLOCKS"}, kernel_att_derive, kernel_att_check,
     {{"flash_forward", {X(out), F32(stats), CX(qkv)}, BOUNDS_DERIVED(ATT_FWD_THREADS), -1, kernel_att_forward,
       "(ceil(T/Q_TILE), NH, B), a warp per Q_WARP_ROWS query rows", 0},
      {"flash_backward_dq", {X(dqkv), F32(ddot), CX(qkv), CX(dout), CX(out), CF32(stats)}, BOUNDS_DERIVED(ATT_BWD_THREADS),
       -1, kernel_att_backward, "(ceil(T/BWD_TILE), NH, B), a warp per BWD_WARP_ROWS query rows; writes ddot",
       BOUNDS_DERIVED(ATT_BWD_BLOCKS)},
      {"flash_backward_dkdv", {X(dqkv), CX(qkv), CX(dout), CF32(stats), CF32(ddot)}, BOUNDS_DERIVED(ATT_BWD_THREADS), -1,
       kernel_att_dkdv, "(ceil(T/BWD_TILE), NKV, B), a warp per BWD_WARP_ROWS key rows of a key/value head",
       BOUNDS_DERIVED(ATT_BWD_BLOCKS)}},
     kernel_att_shape_defaults, STEP_BIT(STEP_TRAIN) | STEP_BIT(STEP_FORWARD), 0, NULL},
    {"gelu", "templates/gelu.cu", "GELU (tanh approximation) and its backward, elementwise",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE}}, {0}, NULL, NULL,
     {{"gelu_forward", {X(out), CX(inp), I64(n)}, GELU_BLOCK, 2, kernel_gelu_dims, "ceil(n/VEC_4C / BLOCK_SIZE)", 0},
      {"gelu_backward", {X(dinout), CX(inp), I64(n)}, GELU_BLOCK, 2, kernel_gelu_dims, "ceil(n/VEC_4C / BLOCK_SIZE)", 0}}, NULL,
     STEP_BIT(STEP_TRAIN), 0, kernel_gelu_in_model},
    /* TILE_N, STAGES, SM_BLOCKS: the block's columns, its stages of k, its blocks a multiprocessor (two: the registers
       of 128 a thread, which TILE_N 256's accumulators alone would take); EPI_BYTES: the epilogue's global accesses, 16 (its
       tensors through shared memory in 16-byte chunks of rows) or 4 (each thread's pairs of columns straight);
       WARPGROUPS: 2 (both load and compute) or 3 (a third only loads, by TMA, in persistent blocks; the tm_* maps of
       the operands: runtime/cuda/linear.c); CLUSTER: 1, or 2 (blocks in pairs on row tiles m and m + 1 of the same
       columns: each loads half of B's tile and TMA multicasts it to both, so that L2 serves a third less; measured
       slower on the H200); GRID: the persistent blocks of WARPGROUPS 3 (132: a wave of the H200's multiprocessors;
       the tests take fewer, so that each block goes through several tiles); TILE_WARPGROUPS: the consumer warpgroups
       of a tile with WARPGROUPS 3, 2 (64 rows each) or 1 (each a whole tile of its own, the two in turn, so that one's
       epilogue runs while the other's products do; TILE_N 128). Defaults: the fastest variant at gpt2-350M on the H200 and
       at 124M but for TILE_WARPGROUPS 1 (docs/kernels-and-tuning.md, "The GELU and the fc matmuls": 1.32x and 1.24x
       the cp.async variant's time; pingpong 4-5% faster at 124M, level at 350M, no faster in whole steps) */
    {"fc_gemm", "templates/fc_gemm.cu", "the fc matmul with the GELU, and the fcproj dinp with the GELU backward and "
     "the fc bias gradient (Hopper's wgmma; train.gelu = \"fused\")",
     {{"TILE_N", 256, {128, 256}, .min = 128, .max = 256, .multiple_of = 128},
      {"STAGES", 3, {3, 4, 5, 6}, .min = 3, .max = 8, .multiple_of = 1},
      {"SM_BLOCKS", 1, {1, 2}, .min = 1, .max = 2, .multiple_of = 1},
      {"EPI_BYTES", 16, {4, 16}, .min = 4, .max = 16, .multiple_of = 4},
      {"WARPGROUPS", 3, {2, 3}, .min = 2, .max = 3, .multiple_of = 1},
      {"CLUSTER", 1, {1, 2}, .min = 1, .max = 2, .multiple_of = 1},
      {"GRID", 132, {132}, .min = 2, .max = 65536, .multiple_of = 2},
      {"TILE_WARPGROUPS", 2, {1, 2}, .min = 1, .max = 2, .multiple_of = 1}},
     {"THREADS", "MIN_BLOCKS", "M_TILES", "CLUSTER_BLOCKS"}, kernel_fcg_derive, kernel_fcg_check,
     {{"fc_gelu_forward", {X(pre), X(out), CX(inp), CX(weight), CX(bias), TMAP(tm_inp), TMAP(tm_weight), TMAP(tm_pre),
                           TMAP(tm_out)}, BOUNDS_DERIVED(FCG_THREADS), -1, kernel_fcg_gemm,
       "M_TILES * ceil(4C / TILE_N) tiles of 128 x TILE_N (M_TILES = ceil(B*T / 128)): a block each, or with WARPGROUPS 3 "
       "GRID blocks that go through them (in clusters of CLUSTER)", BOUNDS_DERIVED(FCG_MIN_BLOCKS)},
      {"fcproj_dgelu_backward", {X(dpre), F32(scratch), CX(dout), CX(wt), CX(pre), TMAP(tm_dout), TMAP(tm_wt),
                                 TMAP(tm_pre), TMAP(tm_dpre)}, BOUNDS_DERIVED(FCG_THREADS), -1,
       kernel_fcg_gemm, "as fc_gelu_forward's", BOUNDS_DERIVED(FCG_MIN_BLOCKS)},
      {"transpose_fcproj", {X(wt), CX(weight)}, BOUNDS_DERIVED(FCG_THREADS), -1, kernel_fcg_transpose,
       "(ceil(4C / 32), ceil(C / 32)): a block per 32 x 32 tile", 0},
      {"fc_bias_reduce", {X(dbias), CF32(scratch)}, BOUNDS_DERIVED(FCG_THREADS), -1, kernel_fcg_reduce,
       "ceil(4C / 256): a thread per column", 0}}, NULL,
     STEP_BIT(STEP_TRAIN), 0, kernel_fcg_in_model},
    /* BLOCK_SIZE 256: the fastest of the candidates at gpt2-124M and 350M on the H200 (docs/kernels-and-tuning.md,
       "The classifier": 1.56x the old default of 1024). CHUNK_ROWS: logits are made for that many rows at a time; its
       one candidate keeps kernel sweeps off it, since what it changes is the matmuls' shape and the memory (the
       whole step measures it: bench/roofline.sh). UNROLL: the loads a thread has in flight where the row is read
       twice (longer than 16 packets a thread); 4 measured fastest at gpt2-124M on the H200, 4.62 ms a micro-step
       against 4.84 with 2 (docs/kernels-and-tuning.md, "The classifier"). SECOND_PASS 2: the second pass reads the
       row from shared memory where two blocks of it fit a multiprocessor (ROW_BYTES, kernel_cls_derive); 1: from
       registers where 16 packets a thread hold it, else from memory again. 1 stays the default: 2 measured within
       0.2% of it in whole steps at nanochat-d12 and 124M on the H100 (it is a candidate of `gpt2gen tune`'s sweep) */
    {"classifier", "templates/classifier.cu", "softmax + cross-entropy + dlogits in one pass, a chunk of rows at a time "
     "(through the logit soft-cap where the model caps)",
     {{"BLOCK_SIZE", 256, {128, 256, 512, 1024}, BLOCK_SIZE_RULE},
      {"CHUNK_ROWS", 8192, {8192}, .min = 1, .max = 1 << 24, .multiple_of = 1},
      {"UNROLL", 4, {1, 2, 4}, .min = 1, .max = 8, .multiple_of = 1},
      {"SECOND_PASS", 1, {1, 2}, .min = 1, .max = 2, .multiple_of = 1}},
     {"CHUNK", "ROW_BYTES"}, kernel_cls_derive, NULL,
     {{"classifier_forward", {F32(losses), X(logits), CI32(targets), FLOAT(dloss), INT(write_dlogits)}, CLS_BLOCK, -1,
       kernel_cls_dims, "CHUNK: a block per row of a chunk", 0}}, NULL,
     STEP_BIT(STEP_TRAIN) | STEP_BIT(STEP_FORWARD), 0, NULL},
    {"grad_norm", "templates/grad_norm.cu", "squared L2 norm, for the global gradient norm",
     {{"BLOCK_SIZE", 512, {128, 256, 512, 1024}, BLOCK_SIZE_RULE},
      {"GRID_SIZE", 1024, {256, 512, 1024, 2048}, .min = 1, .max = 65536, .multiple_of = 1}},
     {0}, NULL, NULL,
     {{"global_norm_squared", {F32(partials), CX(data), I64(n)}, NORM_BLOCK, -1, kernel_norm_dims, "GRID_SIZE", 0}}, NULL,
     STEP_BIT(STEP_TRAIN), 0, NULL},
    {"adamw", "templates/adamw.cu", "the AdamW update of one parameter tensor",
     {{"BLOCK_SIZE", 512, {128, 256, 512, 1024}, BLOCK_SIZE_RULE}}, {0}, NULL, NULL,
     {{"adamw_update",
       {X(params), F32(master), CX(grads), F32(m), F32(v), I64(n), I64(idx0), FLOAT(lr), FLOAT(beta1), FLOAT(beta2),
        FLOAT(bc1), FLOAT(bc2), FLOAT(eps), FLOAT(wd), FLOAT(grad_scale)},
       ADAMW_BLOCK, 5, kernel_adamw_dims, "ceil(n / BLOCK_SIZE)", 0}}, NULL, STEP_BIT(STEP_TRAIN), 0, NULL},
    {"decode", "templates/decode.cu",
     "one token per row against the key/value cache: embedding at a position, the cache append, split attention, the draw",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512}, BLOCK_SIZE_RULE},
      {"KV_CHUNK", 64, {32, 64, 128, 256}, .min = 16, .max = 1024, .multiple_of = 16},
      {"ATT_THREADS", 128, {64, 128, 256}, BLOCK_SIZE_RULE},
      {"SAMPLE_THREADS", 1024, {256, 512, 1024}, BLOCK_SIZE_RULE},
      {"LIN_THREADS", 128, {64, 128, 256}, BLOCK_SIZE_RULE},
      {"LIN_COLS", 2, {1, 2, 4}, .min = 1, .max = 8, .multiple_of = 1}},
     {"KV_SPLITS"}, kernel_dec_derive, kernel_dec_check,
     {{"decode_embed", {X(out), CI32(tokens), CX(wte), CX(wpe), CI32(pos)}, DEC_BLOCK, -1, kernel_dec_embed,
       "ceil(B*C/VEC_C / BLOCK_SIZE)", 0},
      {"kv_append", {X(kcache), X(vcache), CX(qkv), CI32(pos)}, DEC_BLOCK, -1, kernel_dec_append,
       "ceil(B*T*NKV*HS/KV_VEC / BLOCK_SIZE): a thread per packet of k's NKV heads", 0},
      {"decode_attention", {X(out), X(kcache), X(vcache), F32(partial), CX(qkv), CI32(pos), CX(qnw), CX(knw)},
       DEC_ATT_THREADS, -1,
       kernel_dec_attention, "(KV_SPLITS, NH, B): a block per KV_CHUNK cached positions of a head; the last to end combines", 0},
      {"sample_tokens", {I32(tokens), I32(drawn), U64(rng), CI32(pos), CX(logits), FLOAT(temperature), INT(top_k),
                         FLOAT(top_p)}, DEC_SAMPLE_THREADS, -1, kernel_dec_sample, "B: a block per row", 0},
      {"decode_advance", {I32(pos), U64(best), I32(tokens), I32(drawn)}, DEC_SAMPLE_THREADS, -1, kernel_dec_advance,
       "1 block of 32 threads", 0},
      {"decode_ln_linear", {X(out), CX(inp), CX(lnw), CX(lnb), CX(weight), CX(bias), CX(gate), CX(gate_bias), INT(OC),
                            INT(act), U64(best)}, DEC_LIN_THREADS, 8, kernel_dec_linear, "(ceil(OC / (LIN_THREADS/32 * LIN_COLS)), ceil(B / 8)): a warp per LIN_COLS columns of 8 rows", 0},
      {"decode_linear_residual", {X(out), CX(inp), CX(weight), CX(bias), CX(res), INT(OC), INT(IC)}, DEC_LIN_THREADS, 5,
       kernel_dec_linear, "(ceil(OC / (LIN_THREADS/32 * LIN_COLS)), ceil(B / 8)): as decode_ln_linear", 0}}, NULL,
     STEP_BIT(STEP_DECODE) | STEP_PREFILL, LAUNCH_OVERLAP, NULL},   /* a prefill appends to the cache: kv_append */
    /* the whole decode step of few rows in one persistent kernel (Plan.decode_persistent): THREADS a block, one block
       a multiprocessor (the linears' packets a thread keeps in flight: 4096 / THREADS, 2048 / THREADS at 1024) */
    {"decode_step", "templates/decode_step.cu", "a decode step of few rows in one persistent kernel, a grid barrier between its phases",
     {{"STEP_THREADS", 512, {256, 512, 1024}, BLOCK_SIZE_RULE}},
     {0}, NULL, NULL,
     {{"decode_step", {CX(params), CI32(tokens), CI32(pos), X(kcache), X(vcache), X(x), X(res2), X(qkv), X(atty), X(fch),
                       X(logits), I32(sync), INT(n_blocks)}, STEP_THREADS_T, 12, kernel_dec_step,
       "n_blocks (the multiprocessors), cooperative: every block resident", 0}}, NULL,
     STEP_BIT(STEP_DECODE), LAUNCH_COOPERATIVE, NULL},
    /* GPT-2's relatives (docs/model.md, "Architectures"), in the plans of the models that use them (in_model) */
    {"rmsnorm", "templates/rmsnorm.cu", "RMSNorm forward (plain and fused with the residual add) and backward; QK-norm",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE},
      {"BWD_BLOCK_SIZE", 256, {128, 256, 512}, BLOCK_SIZE_RULE}},
     {"BWD_BLOCKS", "QK_BLOCKS"}, kernel_rms_derive, NULL,   /* QK-norm's head size: model_gpu_check */
     {{"rmsnorm_forward", {X(out), F32(rstd), CX(inp), CX(weight)}, RMS_BLOCK, -1, kernel_rms_rows,
       "ceil(B*T / (BLOCK_SIZE/32)): a warp per row", 0},
      {"fused_residual_rmsnorm_forward", {X(residual), X(out), F32(rstd), CX(inp1), CX(inp2), CX(weight)}, RMS_BLOCK, -1,
       kernel_rms_rows, "ceil(B*T / (BLOCK_SIZE/32)): a warp per row", 0},
      {"rmsnorm_backward", {X(dinp), F32(scratch), CX(dout), CX(inp), CX(weight), CF32(rstd)}, RMS_BWD_BLOCK, -1,
       kernel_rms_backward, "BWD_BLOCKS = min(ceil(B*T / (BWD_BLOCK_SIZE/32)), 512), rows strided over their warps", 0},
      {"rmsnorm_backward_reduce", {X(dweight), CF32(scratch)}, RMS_BLOCK, -1, kernel_rms_reduce,
       "ceil(C / BLOCK_SIZE): a thread per channel", 0},
      {"qk_norm_forward", {X(out), F32(rstd), CX(inp), CX(qw), CX(kw), CI32(pos)}, RMS_BLOCK, -1, kernel_rms_rows,
       "ceil(B*T / (BLOCK_SIZE/32)): a warp per row, its q and k heads in turn (and v's copied)", 0},
      {"qk_norm_backward", {X(dinout), F32(scratch), CX(inp), CX(qw), CX(kw), CF32(rstd), CI32(pos)}, RMS_BWD_BLOCK, -1,
       kernel_qk_backward, "QK_BLOCKS = min(ceil(B*T / (BWD_BLOCK_SIZE/32)), 512), rows strided over warps", 0},
      {"qk_norm_backward_reduce", {X(dqw), X(dkw), CF32(scratch)}, RMS_BLOCK, -1, kernel_qk_reduce,
       "ceil(2*HS / BLOCK_SIZE): a thread per channel of qw and kw", 0}},
     NULL, 0, 0, kernel_rms_in_model},
    {"rope", "templates/rope.cu", "rotary position embedding of q and k and its backward; grouped-query attention's keys "
     "and values given to every query head, and their gradients summed back",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512}, BLOCK_SIZE_RULE}}, {0}, NULL, kernel_rope_check,
     {{"rope_forward", {X(qkv), CI32(pos)}, ROPE_BLOCK, -1, kernel_rope_dims,
       "ceil(B*T*HS/2 / BLOCK_SIZE): a thread per pair of channels of a row, over its q and k heads", 0},
      {"rope_backward", {X(dqkv), CI32(pos)}, ROPE_BLOCK, -1, kernel_rope_dims, "as rope_forward's", 0},
      {"kv_expand", {X(out), CX(qkv)}, ROPE_BLOCK, -1, kernel_kv_dims,
       "ceil(B*T*3C/VEC_HS / BLOCK_SIZE): a thread per packet of the (B, T, 3C) output", 0},
      {"kv_reduce", {X(dqkv), CX(dexp)}, ROPE_BLOCK, -1, kernel_kv_dims, "as kv_expand's, over the (B, T, 3C) input", 0}},
     NULL, 0, 0, kernel_rope_in_model},
    {"activation", "templates/activation.cu", "ReLU^2 and SwiGLU and their backward, elementwise; the logit soft-cap "
     "(a training step's loss caps in the classifier kernel)",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE}}, {0}, NULL, NULL,
     {{"relu2_forward", {X(out), CX(pre), I64(n)}, ACT_BLOCK, 2, kernel_act_dims, "ceil(n/VEC_FFN / BLOCK_SIZE)", 0},
      {"relu2_backward", {X(dinout), CX(pre), I64(n)}, ACT_BLOCK, 2, kernel_act_dims, "ceil(n/VEC_FFN / BLOCK_SIZE)", 0},
      {"swiglu_forward", {X(out), CX(up), CX(gate), I64(n)}, ACT_BLOCK, 3, kernel_act_dims, "ceil(n/VEC_FFN / BLOCK_SIZE)", 0},
      {"swiglu_backward", {X(dinout), X(dgate), CX(up), CX(gate), I64(n)}, ACT_BLOCK, 4, kernel_act_dims,
       "ceil(n/VEC_FFN / BLOCK_SIZE)", 0},
      {"softcap_forward", {X(logits), I64(n)}, ACT_BLOCK, 1, kernel_softcap_dims, "ceil(n/VEC_Vp / BLOCK_SIZE)", 0}},
     NULL, 0, 0, kernel_act_in_model},
    {0},
};

KernelEnv kernel_env(const GPT2Shape *model, const StepShape *step, const FamilyDecl *f, const int *tun) {
    KernelEnv e;
    memset(&e, 0, sizeof e);
    e.B = step->B;
    e.T = step->T;
    e.C = model->n_embd;
    e.NH = model->n_head;
    e.HS = e.C / e.NH;
    e.L = model->n_layer;
    e.V = model->vocab_size;
    e.Vp = model->padded_vocab_size;
    e.maxT = model->max_seq_len;
    e.NKV = model->n_kv_head ? model->n_kv_head : model->n_head;   /* gpt2_kv_heads, gpt2_ffn: not linked here */
    e.FFN = model->n_ffn ? model->n_ffn : 4 * e.C;
    e.cacheT = step->cache_T > 0 ? step->cache_T : model->max_seq_len;
    e.x128 = step->precision == PREC_FP32 ? 4 : 8;
    for (int i = 0; i < FAMILY_MAX_TUNABLES && f->tunables[i].name; i++) e.tun[i] = tun[i];
    if (f->derive) f->derive(&e);
    return e;
}

int kernel_count(void) {
    int n = 0;
    for (const FamilyDecl *f = kernel_families; f->family; f++)
        for (const KernelDecl *k = f->kernels; k < f->kernels + FAMILY_MAX_KERNELS && k->name; k++) n++;
    return n;
}

const KernelDecl *kernel_decl(int id, const FamilyDecl **family) {
    int n = 0;
    for (const FamilyDecl *f = kernel_families; f->family; f++)
        for (const KernelDecl *k = f->kernels; k < f->kernels + FAMILY_MAX_KERNELS && k->name; k++)
            if (n++ == id) {
                if (family) *family = f;
                return k;
            }
    return NULL;
}

int tunable_allowed(const TunableDecl *t, int v) {
    return v >= t->min && v <= t->max && v % t->multiple_of == 0;
}

void tunable_describe(const TunableDecl *t, char *out, size_t n) {
    if (t->multiple_of > 1) snprintf(out, n, "a multiple of %d from %d to %d", t->multiple_of, t->min, t->max);
    else snprintf(out, n, "an integer from %d to %d", t->min, t->max);
}

const char *kernel_bounds_name(const FamilyDecl *f, const KernelDecl *k) {
    return k->bounds >= FAMILY_MAX_TUNABLES ? f->derived_names[k->bounds - FAMILY_MAX_TUNABLES] : f->tunables[k->bounds].name;
}
const char *kernel_min_blocks_name(const FamilyDecl *f, const KernelDecl *k) {
    return k->min_blocks >= FAMILY_MAX_TUNABLES ? f->derived_names[k->min_blocks - FAMILY_MAX_TUNABLES] : NULL;
}
const char *kernel_cluster_name(const FamilyDecl *f, const KernelDecl *k) {
    if (k->min_blocks < FAMILY_MAX_TUNABLES) return NULL;
    for (int i = 0; i < FAMILY_MAX_DERIVED && f->derived_names[i]; i++)
        if (!strcmp(f->derived_names[i], "CLUSTER_BLOCKS")) return f->derived_names[i];
    return NULL;
}

void kernel_param_cuda(const KernelParam *p, char *out, size_t n) {
    static const char *const types[] = {"floatX *", "const floatX *", "float *", "const float *", "int *",
                                        "const int *", "int ", "long long ", "float ",
                                        "unsigned long long *", "const __grid_constant__ TensorMap "};
    snprintf(out, n, "%s%s", types[p->type], p->name);
}
