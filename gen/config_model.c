/* config_model: the model part of a config, ModelSpec, validated by one function whether it comes from a config
 * file (gen/config_validate.c) or a checkpoint's header (model_spec_from_header): the shapes the templates take,
 * the vocabulary the token shards hold, and a parameter count every later stage computes without overflow. */
#include "gen/config.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const ARCHITECTURE_NAMES[] = {"gpt2", NULL};

const char *model_architecture_name(ModelArchitecture a) { return ARCHITECTURE_NAMES[a]; }

/* a*b and a+b that stop at UINT64_MAX instead of wrapping */
static uint64_t mul_sat(uint64_t a, uint64_t b) { uint64_t r; return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r; }
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

#define MAX_PARAMS (1ull << 40)   /* parameters (1.1e12) */

/* The ranges a config's reader checks per key (gen/config.c's schema), for a model that came another way. */
static int model_ranges(const ModelSpec *m, const char *where, Err *err) {
    const struct { const char *key; int v, min; } f[] = {
        {"n_layer", m->n_layer, 1}, {"n_head", m->n_head, 1}, {"n_embd", m->n_embd, 1},
        {"max_seq_len", m->max_seq_len, 1}, {"vocab_size", m->vocab_size, 2}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].min)
            return err_set(err, "%s: model.%s: %d is out of range: at least %d", where, f[i].key, f[i].v, f[i].min);
    if ((unsigned)m->architecture > MODEL_GPT2) return err_set(err, "%s: model.architecture: expected \"gpt2\"", where);
    if ((unsigned)m->precision > PREC_FP16) return err_set(err, "%s: precision: expected one of fp32, bf16, fp16", where);
    return 0;
}

int model_spec_validate(ModelSpec *m, const char *where, Err *err) {
    if (model_ranges(m, where, err)) return -1;
    if (m->n_embd % m->n_head)
        return err_set(err, "%s: model.n_embd: %d is not divisible by model.n_head %d", where, m->n_embd, m->n_head);
    int hs = m->n_embd / m->n_head;
    if (hs % 8 || hs > 256)
        return err_set(err, "%s: model: head size n_embd/n_head = %d is not supported; the templates need a multiple of 8, at most 256", where, hs);
    if (m->n_embd % 32)
        return err_set(err, "%s: model.n_embd: %d is not supported; the templates need a multiple of 32", where, m->n_embd);
    if (m->vocab_size > 65536)
        return err_set(err, "%s: model.vocab_size: %d does not fit the uint16 token shards (at most 65536)", where, m->vocab_size);
    m->padded_vocab_size = (m->vocab_size + 127) / 128 * 128;
    /* the parameter count (common/gpt2.c) */
    uint64_t L = (uint64_t)m->n_layer, C = (uint64_t)m->n_embd;
    uint64_t Vp = (uint64_t)m->padded_vocab_size, maxT = (uint64_t)m->max_seq_len;
    uint64_t per_layer = add_sat(mul_sat(12, mul_sat(C, C)), mul_sat(13, C));
    uint64_t params = add_sat(mul_sat(Vp + maxT + 2, C), mul_sat(L, per_layer));
    if (params > MAX_PARAMS)
        return err_set(err, "%s: model: n_layer=%d, n_embd=%d, vocab_size=%d, max_seq_len=%d give %.3g parameters: out of range: "
                       "at most %.3g", where, m->n_layer, m->n_embd, m->vocab_size, m->max_seq_len, (double)params,
                       (double)MAX_PARAMS);
    return 0;
}

int model_spec_from_header(ModelSpec *m, const GPT2Shape *s, Precision precision, const char *where, Err *err) {
    memset(m, 0, sizeof *m);
    m->architecture = MODEL_GPT2;   /* the only architecture a header says today */
    m->n_layer = s->n_layer;
    m->n_head = s->n_head;
    m->n_embd = s->n_embd;
    m->max_seq_len = s->max_seq_len;
    m->vocab_size = s->vocab_size;
    m->precision = precision;
    return model_spec_validate(m, where, err);
}

GPT2Shape model_spec_shape(const ModelSpec *m) {
    GPT2Shape s = {m->max_seq_len, m->vocab_size, m->padded_vocab_size, m->n_layer, m->n_head, m->n_embd};
    return s;
}
