/* config_validate: the checks across a config's fields once its values are read (gen/config_read.c), and the
 * values derived from them (the padded vocabulary, seq_len, total_batch_size and the accumulation steps, the
 * checkpoint folder); the arch and loss scale rules that others check too. The model's own checks are
 * gen/config_model.c's. */
#include "gen/config.h"
#include "gen/config_internal.h"
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- cross-field checks */

int config_arch_valid(const char *arch) {
    if (strncmp(arch, "sm_", 3)) return 0;
    const char *p = arch + 3;
    int v = 0, digits = 0;
    for (; isdigit((unsigned char)*p) && digits < 4; p++, digits++) v = v * 10 + (*p - '0');
    if (*p == 'a') p++;
    return digits >= 2 && !*p && v >= 70;
}

/* a*b and a+b that stop at UINT64_MAX instead of wrapping */
static uint64_t mul_sat(uint64_t a, uint64_t b) { uint64_t r; return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r; }
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

#define MAX_STEP_BYTES (1ull << 50)   /* one micro-step's activations (1 PiB) */

/* The batch: seq_len and total_batch_size derived, the accumulation steps, and the sizes every later stage
   computes in int (a micro-batch's tokens, the accumulation steps) and in 64 bits (the plan's memory in
   gen/memory.c: a bound on a micro-step's activations and scratch), checked without overflow. */
static int validate_batch(Config *c, Err *err) {
    const char *f = c->path;
    if (c->run.train.seq_len == 0) c->run.train.seq_len = c->model.max_seq_len;
    if (c->run.train.seq_len > c->model.max_seq_len)
        return err_set(err, "%s: train.seq_len: %d is larger than model.max_seq_len %d", f, c->run.train.seq_len, c->model.max_seq_len);
    uint64_t B = (uint64_t)c->run.train.batch_size, T = (uint64_t)c->run.train.seq_len, G = (uint64_t)c->run.train.num_gpus;
    uint64_t tokens = mul_sat(mul_sat(B, T), G);
    if (tokens > INT_MAX)
        return err_set(err, "%s: train.batch_size: batch_size*seq_len*num_gpus = %d*%d*%d is out of range: at most %d tokens per micro-step",
                       f, c->run.train.batch_size, c->run.train.seq_len, c->run.train.num_gpus, INT_MAX);
    if (c->run.train.total_batch_size == 0) c->run.train.total_batch_size = (long)tokens;
    if (c->run.train.total_batch_size % (long)tokens)
        return err_set(err, "%s: train.total_batch_size: %ld is not a multiple of batch_size*seq_len*num_gpus = %d*%d*%d = %ld",
                       f, c->run.train.total_batch_size, c->run.train.batch_size, c->run.train.seq_len, c->run.train.num_gpus, (long)tokens);
    if (c->run.train.total_batch_size / (long)tokens > INT_MAX)
        return err_set(err, "%s: train.total_batch_size: %ld is out of range: at most %ld (batch_size*seq_len*num_gpus = %ld tokens, "
                       "times at most %d accumulation steps)", f, c->run.train.total_batch_size, (long)tokens * INT_MAX, (long)tokens, INT_MAX);
    c->run.train.grad_accum = (int)(c->run.train.total_batch_size / (long)tokens);
    uint64_t L = (uint64_t)c->model.n_layer, C = (uint64_t)c->model.n_embd, NH = (uint64_t)c->model.n_head;
    uint64_t Vp = (uint64_t)c->model.padded_vocab_size, BT = mul_sat(B, T);
    uint64_t att = mul_sat(mul_sat(B, NH), mul_sat(T, T));
    /* a row of a layer: 16 C for the attention's side and 4 of the MLP's widths (4 C each for GPT-2: 32 C in all;
       SwiGLU's gate doubles the width) */
    uint64_t ffn = c->model.n_ffn > 0 ? (uint64_t)c->model.n_ffn : 4 * C;
    uint64_t mlp = c->model.mlp == MLP_SWIGLU ? mul_sat(2, ffn) : ffn;
    uint64_t row = add_sat(add_sat(mul_sat(16, C), mul_sat(4, mlp)), 32);
    uint64_t layer_bytes = add_sat(mul_sat(BT, row), mul_sat(2, att));
    uint64_t step_bytes = mul_sat(4, add_sat(mul_sat(L + 2, layer_bytes), mul_sat(BT, Vp)));
    if (step_bytes > MAX_STEP_BYTES)
        return err_set(err, "%s: train.batch_size: batch_size=%d, seq_len=%d with n_layer=%d, n_head=%d, n_embd=%d need %.3g bytes "
                       "of activations per micro-step: out of range: at most %.3g (1 PiB)", f, c->run.train.batch_size, c->run.train.seq_len,
                       c->model.n_layer, c->model.n_head, c->model.n_embd, (double)step_bytes, (double)MAX_STEP_BYTES);
    return 0;
}

/* The optimizer, precision and sampling rules, the arch, and the checkpoint folder's default. */
static int validate_run(Config *c, Err *err) {
    const char *f = c->path;
    if (c->run.train.final_lr_frac > 1) return err_set(err, "%s: train.final_lr_frac: expected a number in [0, 1], got %g", f, c->run.train.final_lr_frac);
    if (c->run.train.beta1 >= 1 || c->run.train.beta2 >= 1) return err_set(err, "%s: train.beta1/beta2: expected numbers in [0, 1)", f);
    if (!config_loss_scale_valid(c->run.train.loss_scale))
        return err_set(err, "%s: train.loss_scale: expected a power of two from 1 to 2^24 = %.0f, got %g", f, LOSS_SCALE_MAX, c->run.train.loss_scale);
    if (c->model.precision == PREC_FP16 && !c->run.train.master_weights)
        return err_set(err, "%s: train.master_weights: precision fp16 needs true: AdamW keeps the weights in fp32 and rounds them "
                       "to fp16 to nearest; without that fp32 copy, updates below half an fp16 step would be lost", f);
    if (c->run.train.recompute > 2) return err_set(err, "%s: train.recompute: expected 0 (none), 1 (GELU) or 2 (GELU and LayerNorm), got %d", f, c->run.train.recompute);
    /* samples start after end-of-text and run through the key/value cache: the model's context bounds them */
    if (c->run.eval.sample_tokens > c->model.max_seq_len)
        return err_set(err, "%s: eval.sample_tokens: %d is more than the model's context, model.max_seq_len %d", f,
                       c->run.eval.sample_tokens, c->model.max_seq_len);
    if (c->run.arch[0] && !config_arch_valid(c->run.arch))
        return err_set(err, "%s: arch: expected \"sm_XX\" with XX >= 70 (e.g. \"sm_90\"), got \"%s\"", f, c->run.arch);
    if (!c->run.checkpoint.dir[0]) snprintf(c->run.checkpoint.dir, sizeof c->run.checkpoint.dir, "runs/%s", c->name);   /* name < 128 */
    return 0;
}

/* The model's checks are model_spec_validate's (gen/config_model.c), which a checkpoint's header goes through too. */
int config_validate(Config *c, Err *err) {
    if (model_spec_validate(&c->model, c->path, err)) return -1;
    return validate_batch(c, err) || validate_run(c, err) ? -1 : 0;
}

int config_loss_scale_valid(double x) {
    int e;
    return x >= 1 && x <= LOSS_SCALE_MAX && frexp(x, &e) == 0.5;
}
