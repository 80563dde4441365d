/* cpu_decode: the decode steps of the CPU backend, one token per row against the key/value cache (cpu_internal.h):
   the decode plan's forward (its schedule, cpu_step.c: the embedding at the position, the layers, whose attention
   runs over the cached positions, the logits), then each row's draw. The CUDA backend's decode is held to this. */
#include "runtime/cpu/cpu_internal.h"
#include "runtime/sample/sampling.h"   /* DecodeRun, sample_draw */
#include <string.h>

/* one step: the tokens in c->inputs (B) at position pos -> logits (B, Vp) in the activations */
static int decode_step(Backend *be, int pos, Err *err) {
    Cpu *c = impl(be);
    c->pos = pos;
    if (cpu_run_phase(be, NULL, &be->plan->schedule.forward, err)) return -1;
    c->have_forward = 1;
    return 0;
}

int cpu_decode(Backend *be, DecodeRun *run, Err *err) {
    Cpu *c = impl(be);
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, V = s->vocab_size, Vp = s->padded_vocab_size;
    int cached = be->plan->step.cache_T;
    if (run->pos < 0 || run->steps < 1 || run->steps > cached - run->pos)
        return err_set(err, "cpu backend: decode of %d steps from position %d: the cache holds %d positions", run->steps,
                       run->pos, cached);
    for (int b = 0; b < B; b++)
        if (run->tokens[b] < 0 || run->tokens[b] >= V)
            return err_set(err, "cpu backend: decode: row %d's token is %d, expected a token id in [0, %d)", b,
                           (int)run->tokens[b], V);
    memcpy(c->inputs, run->tokens, (size_t)B * sizeof(int32_t));
    for (int i = 0; i < run->steps; i++) {
        if (decode_step(be, run->pos + i, err)) return -1;
        int32_t *out = run->drawn + (size_t)i * B;
        for (int b = 0; b < B; b++) out[b] = sample_draw(c->a.logits + (size_t)b * Vp, V, &run->s, &run->rng[b]);
        memcpy(c->inputs, out, (size_t)B * sizeof(int32_t));
        if (run->on_step && run->on_step(run->ctx, i, out)) return i + 1;
    }
    return run->steps;
}
