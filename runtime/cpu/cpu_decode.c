/* cpu_decode: the decode step of the CPU backend, one token per row against the key/value cache, and the prefill
   that fills the cache (cpu_internal.h). The same ops as the forward (docs/model.md, "The model") on B rows of one
   position, with attention over the cached positions; the CUDA backend's decode is held to this. */
#include "runtime/cpu/cpu_internal.h"
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
    Acts *a = &c->a;
    const GPT2Shape *s = &be->plan->model;
    int B = be->plan->step.B, C = s->n_embd, NH = s->n_head, maxT = s->max_seq_len;
    size_t nc = (size_t)B * C, layer = (size_t)B * maxT * C;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < C; i++)
            a->encoded[(size_t)b * C + i] = c->p[P_WTE][(size_t)tokens[b] * C + i] + c->p[P_WPE][(size_t)pos * C + i];
    const float *x = a->encoded;
    for (int l = 0; l < s->n_layer; l++) {
        float *ln1 = a->ln1 + l * nc, *qkv = a->qkv + l * 3 * nc, *atty = a->atty + l * nc, *attproj = a->attproj + l * nc;
        float *res2 = a->residual2 + l * nc, *ln2 = a->ln2 + l * nc, *fch = a->fch + l * 4 * nc;
        float *fchg = a->fch_gelu + l * 4 * nc, *fcproj = a->fcproj + l * nc, *res3 = a->residual3 + l * nc;
        cpu_layernorm_forward(ln1, a->ln1_mean + (size_t)l * B, a->ln1_rstd + (size_t)l * B, x, c->p[P_LN1W] + l * C,
                              c->p[P_LN1B] + l * C, B, C);
        cpu_matmul_forward(qkv, ln1, c->p[P_QKVW] + (size_t)l * 3 * C * C, c->p[P_QKVB] + l * 3 * C, B, C, 3 * C);
        cpu_kv_append(c->kcache + l * layer, c->vcache + l * layer, qkv, pos, B, 1, C, NH, maxT);
        cpu_attention_cached(atty, qkv, c->kcache + l * layer, c->vcache + l * layer, pos, B, 1, C, NH, maxT);
        cpu_matmul_forward(attproj, atty, c->p[P_ATTPROJW] + (size_t)l * C * C, c->p[P_ATTPROJB] + l * C, B, C, C);
        cpu_residual_forward(res2, x, attproj, nc);
        cpu_layernorm_forward(ln2, a->ln2_mean + (size_t)l * B, a->ln2_rstd + (size_t)l * B, res2, c->p[P_LN2W] + l * C,
                              c->p[P_LN2B] + l * C, B, C);
        cpu_matmul_forward(fch, ln2, c->p[P_FCW] + (size_t)l * 4 * C * C, c->p[P_FCB] + l * 4 * C, B, C, 4 * C);
        cpu_gelu_forward(fchg, fch, 4 * nc);
        cpu_matmul_forward(fcproj, fchg, c->p[P_FCPROJW] + (size_t)l * 4 * C * C, c->p[P_FCPROJB] + l * C, B, 4 * C, C);
        cpu_residual_forward(res3, res2, fcproj, nc);
        x = res3;
    }
    cpu_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x, c->p[P_LNFW], c->p[P_LNFB], B, C);
    cpu_matmul_forward(a->logits, a->lnf, c->p[P_WTE], NULL, B, C, s->padded_vocab_size);
    c->have_forward = 1;
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
