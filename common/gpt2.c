#include "common/gpt2.h"
#include "common/rng.h"
#include <math.h>
#include <string.h>

const char *const gpt2_param_names[NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
    "qnormw", "knormw", "fcgw", "fcgb", "lmhead"};

int gpt2_kv_heads(const GPT2Shape *s) { return s->n_kv_head ? s->n_kv_head : s->n_head; }
int gpt2_ffn(const GPT2Shape *s) { return s->n_ffn ? s->n_ffn : 4 * s->n_embd; }
int gpt2_head_size(const GPT2Shape *s) { return s->n_embd / s->n_head; }
int gpt2_qkv_width(const GPT2Shape *s) { return (s->n_head + 2 * gpt2_kv_heads(s)) * gpt2_head_size(s); }
float gpt2_norm_eps(const GPT2Shape *s) { return s->norm_eps > 0 ? (float)s->norm_eps : 1e-5f; }
double gpt2_rope_theta(const GPT2Shape *s) { return s->rope_theta > 0 ? s->rope_theta : 10000.0; }
int gpt2_qk_norm_rotates(const GPT2Shape *s) {
    return s->qk_norm && s->position == POS_ROPE && (s->n_embd / s->n_head) % 64 == 0;
}

int gpt2_is_gpt2(const GPT2Shape *s) {
    return s->norm == NORM_LAYERNORM && s->position == POS_LEARNED && s->mlp == MLP_GELU && gpt2_kv_heads(s) == s->n_head &&
           gpt2_ffn(s) == 4 * s->n_embd && !s->qk_norm && !s->no_bias && !s->untied && gpt2_norm_eps(s) == 1e-5f &&
           !(s->logit_softcap > 0);
}

/* The one place that says which tensors a shape has and their sizes (GPT-2's: llm.c's layout) */
size_t gpt2_param_sizes(const GPT2Shape *s, size_t sz[NUM_PARAM_TENSORS], size_t off[NUM_PARAM_TENSORS]) {
    size_t C = s->n_embd, L = s->n_layer, F = gpt2_ffn(s), QKV = gpt2_qkv_width(s), HS = gpt2_head_size(s);
    size_t lnb = s->norm == NORM_LAYERNORM, lb = !s->no_bias, swiglu = s->mlp == MLP_SWIGLU;
    sz[P_WTE] = (size_t)s->padded_vocab_size * C;
    sz[P_WPE] = s->position == POS_LEARNED ? (size_t)s->max_seq_len * C : 0;
    sz[P_LN1W] = L * C;            sz[P_LN1B] = lnb * L * C;
    sz[P_QKVW] = L * QKV * C;      sz[P_QKVB] = lb * L * QKV;
    sz[P_ATTPROJW] = L * C * C;    sz[P_ATTPROJB] = lb * L * C;
    sz[P_LN2W] = L * C;            sz[P_LN2B] = lnb * L * C;
    sz[P_FCW] = L * F * C;         sz[P_FCB] = lb * L * F;
    sz[P_FCPROJW] = L * C * F;     sz[P_FCPROJB] = lb * L * C;
    sz[P_LNFW] = C;                sz[P_LNFB] = lnb * C;
    sz[P_QNORMW] = s->qk_norm ? L * HS : 0;
    sz[P_KNORMW] = s->qk_norm ? L * HS : 0;
    sz[P_FCGW] = swiglu * L * F * C;
    sz[P_FCGB] = swiglu * lb * L * F;
    sz[P_LMHEAD] = s->untied ? (size_t)s->padded_vocab_size * C : 0;
    size_t total = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) { if (off) off[i] = total; total += sz[i]; }
    return total;
}

int gpt2_param_decays(int i) {
    return i == P_WTE || i == P_WPE || i == P_QKVW || i == P_ATTPROJW || i == P_FCW || i == P_FCPROJW || i == P_FCGW ||
           i == P_LMHEAD;
}

void gpt2_init_params(const GPT2Shape *s, float *params, unsigned long seed) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(s, sz, off);
    uint64_t rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    float resid_std = 0.02f / sqrtf(2.0f * s->n_layer);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        float *p = params + off[i];
        if (i == P_LN1W || i == P_LN2W || i == P_LNFW || i == P_QNORMW || i == P_KNORMW) {
            for (size_t j = 0; j < sz[i]; j++) p[j] = 1.0f;
        } else if (i == P_QKVB || i == P_ATTPROJB || i == P_FCB || i == P_FCPROJB || i == P_LN1B || i == P_LN2B || i == P_LNFB ||
                   i == P_FCGB) {
            memset(p, 0, sz[i] * sizeof(float));
        } else {
            float std = (i == P_ATTPROJW || i == P_FCPROJW) ? resid_std : 0.02f;
            for (size_t j = 0; j < sz[i]; j++) p[j] = std * rng_normal(&rng);
        }
    }
    /* rows V..Vp-1 of wte (and of an untied head) are padding: zero, and they stay zero */
    size_t pad = (size_t)(s->padded_vocab_size - s->vocab_size) * s->n_embd, real = (size_t)s->vocab_size * s->n_embd;
    memset(params + off[P_WTE] + real, 0, pad * sizeof(float));
    if (sz[P_LMHEAD]) memset(params + off[P_LMHEAD] + real, 0, pad * sizeof(float));
}

double gpt2_flops_per_token(const GPT2Shape *s, int T) {
    size_t sz[NUM_PARAM_TENSORS];
    double n = (double)gpt2_param_sizes(s, sz, NULL);
    return 6.0 * n + 6.0 * s->n_layer * s->n_embd * (double)T;
}

static size_t shard_size(size_t n, int world) {
    size_t S = (n + (size_t)world - 1) / (size_t)world;
    return (S + RANKS_SHARD_ALIGN - 1) / RANKS_SHARD_ALIGN * RANKS_SHARD_ALIGN;
}

size_t ranks_padded(size_t n, int world) { return shard_size(n, world) * (size_t)world; }

void ranks_shard(size_t n, int world, int rank, size_t *offset, size_t *count) {
    size_t S = shard_size(n, world), lo = S * (size_t)rank, hi = lo + S;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    *offset = lo;
    *count = hi - lo;
}

int gpt2_grad_part(const GPT2Shape *s, int part, size_t ranges[][2]) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS], L = (size_t)s->n_layer;
    gpt2_param_sizes(s, sz, off);
    int n = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (!sz[i]) continue;   /* a tensor the architecture lacks */
        int shared = !gpt2_param_per_layer(i);
        if (part == GRAD_PART_REST && shared) { ranges[n][0] = off[i]; ranges[n][1] = off[i] + sz[i]; n++; }
        if (part >= 0 && !shared) {
            size_t per = sz[i] / L;
            ranges[n][0] = off[i] + (size_t)part * per;
            ranges[n][1] = ranges[n][0] + per;
            n++;
        }
    }
    return n;
}

int gpt2_param_per_layer(int i) { return !(i == P_WTE || i == P_WPE || i == P_LNFW || i == P_LNFB || i == P_LMHEAD); }

void ranks_shard_within(size_t n, int world, int rank, size_t lo, size_t hi, size_t *offset, size_t *count) {
    size_t so, sc;
    ranks_shard(n, world, rank, &so, &sc);
    size_t a = so > lo ? so : lo, e = so + sc < hi ? so + sc : hi;
    *offset = a < e ? a : lo;
    *count = a < e ? e - a : 0;
}
