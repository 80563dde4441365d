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

/* The architecture's keys (docs/config.md): n_ffn and n_kv_head's defaults (0) resolved, their relations to the shape */
static int model_arch(ModelSpec *m, const char *where, Err *err) {
    if ((unsigned)m->norm > NORM_RMSNORM) return err_set(err, "%s: model.norm: expected \"layernorm\" or \"rmsnorm\"", where);
    if ((unsigned)m->position > POS_ROPE) return err_set(err, "%s: model.position: expected \"learned\" or \"rope\"", where);
    if ((unsigned)m->mlp > MLP_SWIGLU) return err_set(err, "%s: model.mlp: expected \"gelu\", \"relu2\" or \"swiglu\"", where);
    if (!(m->norm_eps > 0) || !(m->norm_eps < 1))
        return err_set(err, "%s: model.norm_eps: expected a number in (0, 1), got %g", where, m->norm_eps);
    if (!(m->rope_theta > 0)) return err_set(err, "%s: model.rope_theta: expected a number > 0, got %g", where, m->rope_theta);
    if (!(m->logit_softcap >= 0))
        return err_set(err, "%s: model.logit_softcap: expected a number >= 0 (0: off), got %g", where, m->logit_softcap);
    if (m->n_ffn < 0 || m->n_kv_head < 0)
        return err_set(err, "%s: model.%s: expected a non-negative integer (0: the default)", where, m->n_ffn < 0 ? "n_ffn" : "n_kv_head");
    if (!m->n_kv_head) m->n_kv_head = m->n_head;
    if (m->n_head % m->n_kv_head)
        return err_set(err, "%s: model.n_kv_head: %d does not divide model.n_head %d; expected a divisor of it (%d: "
                       "multi-head, 1: multi-query)", where, m->n_kv_head, m->n_head, m->n_head);
    if (m->n_ffn % 32)
        return err_set(err, "%s: model.n_ffn: %d is not supported; expected a multiple of 32", where, m->n_ffn);
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
    if (model_arch(m, where, err)) return -1;
    m->padded_vocab_size = (m->vocab_size + 127) / 128 * 128;
    /* the parameter count (common/gpt2.c; GPT-2's: (Vp + maxT + 2) C + L (12 C^2 + 13 C)), a bound on it */
    uint64_t L = (uint64_t)m->n_layer, C = (uint64_t)m->n_embd, F = m->n_ffn ? (uint64_t)m->n_ffn : 4 * C;
    uint64_t QKV = (uint64_t)(m->n_head + 2 * m->n_kv_head) * (uint64_t)(m->n_embd / m->n_head);
    uint64_t Vp = (uint64_t)m->padded_vocab_size, maxT = (uint64_t)m->max_seq_len;
    uint64_t per_layer = add_sat(mul_sat(C, add_sat(QKV, C)), mul_sat(m->mlp == MLP_SWIGLU ? 3 : 2, mul_sat(C, F)));
    per_layer = add_sat(per_layer, add_sat(mul_sat(6, C), add_sat(QKV, mul_sat(m->mlp == MLP_SWIGLU ? 2 : 1, F))));
    uint64_t params = add_sat(mul_sat(Vp + maxT + 2 + (m->tie_embeddings ? 0 : Vp), C), mul_sat(L, per_layer));
    if (params > MAX_PARAMS)
        return err_set(err, "%s: model: n_layer=%d, n_embd=%d, vocab_size=%d, max_seq_len=%d give %.3g parameters: out of range: "
                       "at most %.3g", where, m->n_layer, m->n_embd, m->vocab_size, m->max_seq_len, (double)params,
                       (double)MAX_PARAMS);
    if (!m->n_ffn) m->n_ffn = 4 * m->n_embd;   /* fits: the count above bounds n_embd */
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
    m->norm = (NormKind)s->norm;
    m->norm_eps = s->norm_eps > 0 ? s->norm_eps : 1e-5;
    m->position = (PositionKind)s->position;
    m->rope_theta = gpt2_rope_theta(s);
    m->mlp = (MlpKind)s->mlp;
    m->n_ffn = gpt2_ffn(s);
    m->n_kv_head = gpt2_kv_heads(s);
    m->qk_norm = s->qk_norm;
    m->bias = !s->no_bias;
    m->tie_embeddings = !s->untied;
    m->logit_softcap = s->logit_softcap;
    return model_spec_validate(m, where, err);
}

GPT2Shape model_spec_shape(const ModelSpec *m) {
    GPT2Shape s = {m->max_seq_len, m->vocab_size, m->padded_vocab_size, m->n_layer, m->n_head, m->n_embd,
                   .norm = m->norm, .position = m->position, .mlp = m->mlp, .n_kv_head = m->n_kv_head, .n_ffn = m->n_ffn,
                   .qk_norm = m->qk_norm, .no_bias = !m->bias, .untied = !m->tie_embeddings, .norm_eps = m->norm_eps,
                   .rope_theta = m->rope_theta, .logit_softcap = m->logit_softcap};
    return s;
}

/* The GPU's generated kernels serve every architecture (issue 45; LayerNorm at any norm_eps and a GELU MLP of any
   width among them: a relative's prelude gives layernorm.cu NORM_EPS, and the GELU kernels take n_ffn), but for
   QK-norm's kernels (templates/rmsnorm.cu), which take a warp a head, so a head size that is a multiple of 32. That
   key refuses the model. The CPU backend runs it, so this is the GPU's check alone (cuda_backend_create,
   gen/build.c), not the plan's: a CPU run makes the same plans. */
int model_gpu_check(const GPT2Shape *s, const char *where, Err *err) {
    int HS = s->n_embd / s->n_head;
    if (!s->qk_norm || HS % 32 == 0) return 0;
    return err_set(err, "%s: model.qk_norm = true with a head size of %d (its kernels take a multiple of 32): the GPU's "
                   "generated kernels do not cover this yet; the CPU backend runs this model (--backend cpu)", where, HS);
}
