/* step: what a plan runs, its step shape. A plan is made from the model, one step shape and the arch (gen/plan.h);
   one model has several plans side by side, one per shape it runs. */
#ifndef GPT2GEN_STEP_H
#define GPT2GEN_STEP_H
#include "gen/spec.h"
struct Config;   /* gen/config.h */

/* STEP_TRAIN: a forward with targets, the backward and AdamW, the activations kept per layer for the backward.
   STEP_FORWARD: a forward only (logits for every position, and the loss when targets are given), for sampling and
   evaluation: no gradients, no optimizer state, one layer's activations reused by every layer; with fills_cache
   (the prefill of sampling) it writes every layer's keys and values into a decode plan's cache and keeps no logits.
   STEP_DECODE: one token per row (T = 1) against a key/value cache of model.max_seq_len positions per row and
   layer, and the draw of each row's next token on the device (runtime/sample/sampling.h). */
typedef enum { STEP_TRAIN = 0, STEP_FORWARD, STEP_DECODE } StepKind;

typedef struct {
    StepKind kind;
    int B, T;                  /* rows and tokens per row */
    Precision precision;
    int recompute;             /* STEP_TRAIN: 0 none, 1 recompute GELU, 2 GELU + LayerNorm */
    int master_weights;        /* STEP_TRAIN with a 16-bit model: an fp32 master copy of the weights */
    int ranks, zero_stage;     /* STEP_TRAIN: train.num_gpus data-parallel ranks, ZeRO stage 0 or 1 */
    int grad_accum;            /* STEP_TRAIN: micro-steps per optimizer step (plan.txt only) */
    int shared_weights;        /* STEP_FORWARD, STEP_DECODE: runs with the weights of another plan's backend */
    int fills_cache;           /* STEP_FORWARD: a prefill, writing a decode plan's cache (positions 0..T-1) */
    int cache_T;               /* STEP_DECODE and a prefill: the positions each row's key/value cache holds, at most
                                  the model's context (the same in a decode plan and its prefills); else 0 */
} StepShape;

/* The config's training step. */
StepShape step_train(const struct Config *cfg);
/* A forward of B rows of T tokens in the config's precision; shared_weights as above. */
StepShape step_forward(const struct Config *cfg, int B, int T, int shared_weights);
/* B rows decoding one token each against the cache; shared_weights as above. */
StepShape step_decode(const struct Config *cfg, int B, int shared_weights);
/* The prefill of B rows of T positions into a decode plan's cache. */
StepShape step_prefill(const struct Config *cfg, int B, int T, int shared_weights);
const char *step_kind_name(StepKind k);   /* "train", "forward", "decode" */
#endif
