/* sampling: the draw of the next token (sampling.h), on the host. */
#include "runtime/sample/sampling.h"
#include "common/err.h"
#include "common/rng.h"
#include <math.h>
#include <stdlib.h>

uint64_t sample_row_seed(uint64_t seed, int row) {
    /* splitmix64 of (seed, row): neighbouring seeds and rows give unrelated streams; never 0 (rng.h's fixed point) */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(row + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 1;
}

static int by_key_desc(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int sample_draw(const float *logits, int V, const SampleSettings *s, uint64_t *rng) {
    int arg = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[arg]) arg = i;
    if (sample_is_greedy(s)) return arg;
    float mx = logits[arg];
    uint64_t *w = xmalloc((size_t)V * sizeof *w);
    uint32_t *keys = xmalloc((size_t)V * sizeof *keys);
    for (int i = 0; i < V; i++) {
        w[i] = (uint64_t)((double)expf((logits[i] - mx) / s->temperature) * 4294967296.0);
        keys[i] = sample_key(logits[i]);
    }
    /* the keys in descending order give both thresholds */
    uint32_t *sorted = xmalloc((size_t)V * sizeof *sorted);
    for (int i = 0; i < V; i++) sorted[i] = keys[i];
    qsort(sorted, (size_t)V, sizeof *sorted, by_key_desc);
    uint32_t lo = 0;
    if (s->top_k > 0 && s->top_k < V) lo = sorted[s->top_k - 1];
    if (s->top_p < 1) {
        /* the weight of each key value, in descending key order: a weight per id, found by key */
        uint64_t S = 0;
        for (int i = 0; i < V; i++) if (keys[i] >= lo) S += w[i];
        uint64_t target = (uint64_t)((double)s->top_p * (double)S);
        /* mass(>= t) for t running down the distinct keys: the first key where it reaches target */
        uint64_t *wsorted = xmalloc((size_t)V * sizeof *wsorted);
        /* ids sorted by key: pair each sorted key with its weight (weights depend on the key alone) */
        for (int i = 0; i < V; i++) {
            union { uint32_t u; float f; } x;
            x.u = (sorted[i] & 0x80000000u) ? sorted[i] & 0x7FFFFFFFu : ~sorted[i];
            wsorted[i] = (uint64_t)((double)expf((x.f - mx) / s->temperature) * 4294967296.0);
        }
        uint64_t acc = 0;
        for (int i = 0; i < V && sorted[i] >= lo; i++) {
            acc += wsorted[i];
            /* all ids of this key count before the test: ties at the boundary are kept together */
            if (i + 1 < V && sorted[i + 1] == sorted[i]) continue;
            if (acc >= target) { lo = sorted[i]; break; }
        }
        free(wsorted);
    }
    uint64_t W = 0;
    int last = arg;
    for (int i = 0; i < V; i++) if (keys[i] >= lo) W += w[i];
    uint64_t r = (uint64_t)((double)rng_uniform(rng) * (double)W), run = 0;
    int tok = -1;
    for (int i = 0; i < V && tok < 0; i++) {
        if (keys[i] < lo) continue;
        last = i;
        run += w[i];
        if (run > r) tok = i;
    }
    free(w); free(keys); free(sorted);
    return tok >= 0 ? tok : last;
}
