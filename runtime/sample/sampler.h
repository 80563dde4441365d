/* sampler: text generation with a key/value cache, on either backend, from one model's weights, with a plan set's
   plans (gen/planset.h): "decode", R rows one token at a time against their cache, whose backend holds the cache
   (and the weights, unless it runs on another backend's), and "prefill", R rows of the prompt's positions in one
   forward into that cache, the plan of the bucket the prompt's length rounds up to; its backend is kept while
   prompts fit that bucket. A prompt of n tokens runs once: its first n-1 positions in the prefill, the
   last as the first decode step, which draws the first new token; every later step feeds the token drawn before.
   Used by `gpt2gen sample` (cli/sample.c) and by training's samples (runtime/train/train.c). */
#ifndef GPT2GEN_SAMPLER_H
#define GPT2GEN_SAMPLER_H
#include "gen/planset.h"
#include "runtime/backend.h"
#include "runtime/sample/sampling.h"

typedef struct {
    int prompt_tokens, prefill_tokens, tokens;   /* tokens: steps run per row */
    double prefill_ms, decode_ms;                /* the prefill forward alone (not its plan's making); the steps */
} SampleStats;

/* called with each step's tokens (rows of them) as they are drawn; non-zero stops */
typedef int (*SampleCallback)(void *ctx, int step, const int32_t *row_tokens);

typedef struct {
    const PlanSet *plans;        /* its decode plan, and the prefill and forward plans of its buckets */
    char which[8];               /* "cpu" or "cuda" */
    int device, rows;
    const Env *env;
    Backend *weights;            /* the backend whose weights the plans run on: another's, or decode */
    int prefill_bucket, forward_bucket;   /* the buckets of prefill and forward, while they exist */
    Backend *decode, *prefill, *forward;  /* forward: sampler_generate_uncached's */
} Sampler;

/* A sampler with the plans of plans (gen/planset.h: its decode plan's rows, with shared weights exactly when
   weights is given), on the backend kind which ("cpu", "cuda", "auto": as weights' when given). weights: the
   backend whose parameters it runs on, or NULL: the decode backend holds them (set them with
   sampler_backend(s)->write(..., BACKEND_PARAMS, ...)). plans must outlive the sampler. */
int  sampler_open(Sampler *s, const PlanSet *plans, Backend *weights, const char *which, int device, const Env *env,
                  Err *err);
/* the backend whose write(BACKEND_PARAMS) loads the weights, when the sampler holds them */
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
#endif
