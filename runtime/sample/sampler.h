/* sampler: text generation with a key/value cache, on either backend, from one model's weights. Two plans per
   sampler (gen/plan.h): "decode", R rows one token at a time against their cache, whose backend holds the cache
   (and the weights, unless it runs on another backend's), and "prefill", R rows of the prompt's positions in one
   forward into that cache, made for the prompt's length rounded up to a power of two (at least 64, at most
   maxT) and kept while prompts fit it. A prompt of n tokens runs once: its first n-1 positions in the prefill, the
   last as the first decode step, which draws the first new token; every later step feeds the token drawn before.
   Used by `gpt2gen sample` (cli/sample.c) and by training's samples (runtime/train/train.c). */
#ifndef GPT2GEN_SAMPLER_H
#define GPT2GEN_SAMPLER_H
#include "runtime/backend.h"
#include "runtime/sample/sampling.h"

typedef struct {
    int prompt_tokens, prefill_tokens, tokens;   /* tokens: steps run per row */
    double prefill_ms, decode_ms;                /* the prefill forward alone (not its plan's making); the steps */
} SampleStats;

/* called with each step's tokens (rows of them) as they are drawn; non-zero stops */
typedef int (*SampleCallback)(void *ctx, int step, const int32_t *row_tokens);

typedef struct {
    const Config *cfg;           /* the model and precision the plans are made from */
    char arch[16];
    char which[8];               /* "cpu" or "cuda" */
    int device, rows;
    const Env *env;
    Backend *weights;            /* the backend whose weights the plans run on: another's, or decode */
    Plan *decode_plan, *prefill_plan, *forward_plan;   /* forward_plan: sampler_generate_uncached's */
    int own_decode_plan;
    Backend *decode, *prefill, *forward;
} Sampler;

/* A sampler of rows rows for the model of cfg, on the backend kind which ("cpu", "cuda": as weights' when given).
   decode_plan: a decode plan made already (plan_make_decode, with rows rows, shared weights exactly when weights is
   given), or NULL to make one for arch. weights: the backend whose parameters it runs on, or NULL: the decode
   backend holds them (set them with sampler_backend(s)->set_params). */
int  sampler_open(Sampler *s, const Config *cfg, const Plan *decode_plan, int rows, Backend *weights, const char *which,
                  const char *arch, int device, const Env *env, Err *err);
/* the backend whose set_params loads the weights, when the sampler holds them */
Backend *sampler_backend(Sampler *s);
/* Generates up to max_new tokens per row after prompt[0..n) (n >= 1; the same prompt for every row), the rows' draws
   from rng[rows] (advanced). drawn[i*rows + b]: row b's i-th token. Stops after a step in which every row has drawn
   eot by then (eot < 0: never), or when on_step returns non-zero. n + max_new must fit maxT. Returns the steps run,
   or -1. */
int  sampler_generate(Sampler *s, const int32_t *prompt, int n, int max_new, const SampleSettings *ss, uint64_t *rng,
                      int eot, int32_t *drawn, SampleCallback on_step, void *ctx, SampleStats *st, Err *err);
/* The same without the cache, for comparison: every token re-runs the forward over the whole prefix (a forward plan
   of rows rows and the sequence's length rounded up as above), drawing on the host. */
int  sampler_generate_uncached(Sampler *s, const int32_t *prompt, int n, int max_new, const SampleSettings *ss,
                               uint64_t *rng, int eot, int32_t *drawn, SampleCallback on_step, void *ctx,
                               SampleStats *st, Err *err);
void sampler_close(Sampler *s);
/* the prefill's positions for a prompt of n positions: n rounded up to a power of two, at least 64, at most maxT */
int  sampler_bucket(int n, int maxT);
#endif
