/* sampling: how the next token is drawn from a row of logits, the one rule of every backend (the CUDA backend's
   sample_tokens kernel, templates/decode.cu, follows it step by step; this is its reference).
 *
 *   1. temperature <= 0, or top_k == 1: greedy, the argmax (the lowest id among equal maxima); no random number.
 *   2. Else each id i < V gets the integer weight w_i = (uint64)((double)expf((z_i - max) / temperature) * 2^32)
 *      (z: the logits), so that every sum below is exact and the same in any order.
 *   3. top_k > 0 (and < V): keep the ids whose key is at least the k-th largest key (ties at the boundary kept);
 *      a key is the float's bits mapped so that unsigned order is float order (sample_key).
 *   4. top_p < 1: of those, keep the ids whose key is at least the largest key t such that the kept weights of keys
 *      >= t sum to at least (uint64)((double)top_p * S), S the sum of the weights step 3 kept.
 *   5. Draw u = rng_uniform(rng) (common/rng.h), r = (uint64)((double)u * W), W the sum of the kept weights; the
 *      token is the first kept id, in id order, whose running sum of kept weights exceeds r (the last kept id if
 *      none does).
 * Each row has its own generator, so a row's text depends only on its tokens, the settings and its seed. */
#ifndef GPT2GEN_SAMPLING_H
#define GPT2GEN_SAMPLING_H
#include <stdint.h>

typedef struct {
    float temperature;   /* 0: greedy */
    int top_k;           /* 0: off */
    float top_p;         /* 1: off */
} SampleSettings;

/* step 1's test: the draw is the argmax */
static inline int sample_is_greedy(const SampleSettings *s) { return s->temperature <= 0 || s->top_k == 1; }
/* the next token of a row of logits[0..V) */
int sample_draw(const float *logits, int V, const SampleSettings *s, uint64_t *rng);
/* the order-preserving key of a float (step 3) */
static inline uint32_t sample_key(float f) {
    union { float f; uint32_t u; } x = {f};
    return (x.u & 0x80000000u) ? ~x.u : x.u | 0x80000000u;
}
/* row's generator state for seed: rows of one seed draw independent streams */
uint64_t sample_row_seed(uint64_t seed, int row);

/* One BACKEND_DECODE run of a decode plan's backend (runtime/backend.h): steps tokens per row, each against the
   row's key/value cache, each drawn by the rule above with settings s. */
typedef struct DecodeRun {
    const int32_t *tokens;   /* B: each row's token at position pos */
    int pos;                 /* the cache holds positions 0..pos-1 of every row: a prefill's, or earlier steps' */
    int steps;               /* 1..maxT-pos: step i feeds position pos+i and draws each row's token for pos+i+1 */
    SampleSettings s;
    uint64_t *rng;           /* B generator states (sample_row_seed), advanced by the draws */
    int32_t *drawn;          /* steps*B: drawn[i*B+b] is row b's token drawn at step i (its input at step i+1) */
    /* called as each step's tokens are known, in order (NULL: not called); non-zero stops the call after step i
       (on the GPU, steps already queued behind it run, and their tokens are dropped) */
    int (*on_step)(void *ctx, int i, const int32_t *row_tokens);
    void *ctx;
} DecodeRun;
#endif
