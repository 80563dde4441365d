/* cpu_decode: the decode step of the CPU backend, one token per row against the key/value cache, and the prefill
   that fills the cache (cpu_internal.h). The forward's layers (cpu_forward_rows) on B rows of one position, whose
   attention runs over the cached positions; the CUDA backend's decode is held to this. */
#include "runtime/cpu/cpu_internal.h"
#include "runtime/sample/sampling.h"   /* DecodeRun, sample_draw */
#include <string.h>

void cpu_prefill_fill(Backend *be) {
    Cpu *c = impl(be), *d = impl(c->cache_of);
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, T = be->plan->step.T, C = s->n_embd;
    size_t layer = (size_t)B * s->max_seq_len * C, nc3 = (size_t)B * T * 3 * C;
    for (int l = 0; l < s->n_layer; l++)
        cpu_kv_append(d->kcache + l * layer, d->vcache + l * layer, c->a.qkv + l * nc3, 0, B, T, C, s->n_head, s->max_seq_len);
}

/* one step: tokens (B) at position pos -> logits (B, Vp) in the activations */
static void decode_step(Backend *be, const int32_t *tokens, int pos) {
    Cpu *c = impl(be);
    int B = be->plan->step.B, C = be->plan->model.n_embd;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < C; i++)
            c->a.encoded[(size_t)b * C + i] = c->p[P_WTE][(size_t)tokens[b] * C + i] + c->p[P_WPE][(size_t)pos * C + i];
    c->pos = pos;
    cpu_forward_rows(be);
}

int cpu_decode(Backend *be, DecodeRun *run, Err *err) {
    Cpu *c = impl(be);
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, V = s->vocab_size, Vp = s->padded_vocab_size;
    if (run->pos < 0 || run->steps < 1 || run->steps > s->max_seq_len - run->pos)
        return err_set(err, "cpu backend: decode of %d steps from position %d: the cache holds %d positions", run->steps,
                       run->pos, s->max_seq_len);
    for (int b = 0; b < B; b++)
        if (run->tokens[b] < 0 || run->tokens[b] >= V)
            return err_set(err, "cpu backend: decode: row %d's token is %d, expected a token id in [0, %d)", b,
                           (int)run->tokens[b], V);
    memcpy(c->inputs, run->tokens, (size_t)B * sizeof(int32_t));
    for (int i = 0; i < run->steps; i++) {
        decode_step(be, c->inputs, run->pos + i);
        int32_t *out = run->drawn + (size_t)i * B;
        for (int b = 0; b < B; b++) out[b] = sample_draw(c->a.logits + (size_t)b * Vp, V, &run->s, &run->rng[b]);
        memcpy(c->inputs, out, (size_t)B * sizeof(int32_t));
        if (run->on_step && run->on_step(run->ctx, i, out)) return i + 1;
    }
    return run->steps;
}
