/* hf_map: the mapping between our parameter tensors and Hugging Face's GPT-2 names and layouts (hf.h), and
   config.json both ways. */
#include "runtime/hf/hf.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A layer's tensors: Hugging Face's name after "h.<i>.", ours, Conv1D (transposed), and the shape in units of C
   (0: a vector of that many C). */
static const struct { const char *name; int param, transpose, rows, cols; } LAYER[] = {
    {"ln_1.weight", P_LN1W, 0, 1, 0},        {"ln_1.bias", P_LN1B, 0, 1, 0},
    {"attn.c_attn.weight", P_QKVW, 1, 1, 3}, {"attn.c_attn.bias", P_QKVB, 0, 3, 0},
    {"attn.c_proj.weight", P_ATTPROJW, 1, 1, 1}, {"attn.c_proj.bias", P_ATTPROJB, 0, 1, 0},
    {"ln_2.weight", P_LN2W, 0, 1, 0},        {"ln_2.bias", P_LN2B, 0, 1, 0},
    {"mlp.c_fc.weight", P_FCW, 1, 1, 4},     {"mlp.c_fc.bias", P_FCB, 0, 4, 0},
    {"mlp.c_proj.weight", P_FCPROJW, 1, 4, 1}, {"mlp.c_proj.bias", P_FCPROJB, 0, 1, 0},
};
enum { PER_LAYER = sizeof LAYER / sizeof LAYER[0] };

int hf_tensor_count(const GPT2Shape *s) { return 4 + PER_LAYER * s->n_layer; }

static HfTensor matrix(const char *name, int param, int layer, int transpose, int64_t rows, int64_t cols) {
    HfTensor t = {{0}, param, layer, transpose, 2, {rows, cols}};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

int hf_tensors(const GPT2Shape *s, HfTensor *out) {
    int n = 0, C = s->n_embd;
    out[n++] = matrix("wte.weight", P_WTE, -1, 0, s->vocab_size, C);
    out[n++] = matrix("wpe.weight", P_WPE, -1, 0, s->max_seq_len, C);
    for (int l = 0; l < s->n_layer; l++)
        for (int k = 0; k < PER_LAYER; k++) {
            char name[96];
            snprintf(name, sizeof name, "h.%d.%s", l, LAYER[k].name);
            HfTensor t = matrix(name, LAYER[k].param, l, LAYER[k].transpose, (int64_t)LAYER[k].rows * C,
                                (int64_t)LAYER[k].cols * C);
            if (!LAYER[k].cols) t.ndim = 1, t.shape[1] = 0;
            out[n++] = t;
        }
    HfTensor w = matrix("ln_f.weight", P_LNFW, -1, 0, C, 0), b = matrix("ln_f.bias", P_LNFB, -1, 0, C, 0);
    w.ndim = b.ndim = 1;
    out[n++] = w;
    out[n++] = b;
    return n;
}

size_t hf_tensor_elems(const HfTensor *t) { return (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1); }

/* where tensor t starts among our parameters */
static size_t our_offset(const GPT2Shape *s, const HfTensor *t) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(s, sz, off);
    return off[t->param] + (t->layer < 0 ? 0 : (size_t)t->layer * (sz[t->param] / (size_t)s->n_layer));
}

void hf_gather(const GPT2Shape *s, const HfTensor *t, const float *params, float *out) {
    const float *p = params + our_offset(s, t);
    size_t n = hf_tensor_elems(t);
    if (!t->transpose) { memcpy(out, p, n * sizeof *out); return; }
    size_t in = (size_t)t->shape[0], o = (size_t)t->shape[1];   /* ours (o, in), theirs (in, o) */
    for (size_t r = 0; r < o; r++)
        for (size_t c = 0; c < in; c++) out[c * o + r] = p[r * in + c];
}

void hf_scatter(const GPT2Shape *s, const HfTensor *t, const float *in_vals, float *params) {
    float *p = params + our_offset(s, t);
    size_t n = hf_tensor_elems(t);
    if (!t->transpose) { memcpy(p, in_vals, n * sizeof *p); return; }
    size_t in = (size_t)t->shape[0], o = (size_t)t->shape[1];
    for (size_t r = 0; r < o; r++)
        for (size_t c = 0; c < in; c++) p[r * in + c] = in_vals[c * o + r];
}

/* ---------- config.json ---------- */

int hf_write_config(const char *path, const GPT2Shape *s, StDtype dtype, Err *err) {
    json_t *o = json_object(), *arch = json_array();
    json_array_append_new(arch, json_string("GPT2LMHeadModel"));
    int eot = s->vocab_size > HF_EOT ? HF_EOT : s->vocab_size - 1;
    json_object_set_new(o, "architectures", arch);
    json_object_set_new(o, "model_type", json_string("gpt2"));
    json_object_set_new(o, "vocab_size", json_integer(s->vocab_size));
    json_object_set_new(o, "n_positions", json_integer(s->max_seq_len));
    json_object_set_new(o, "n_ctx", json_integer(s->max_seq_len));
    json_object_set_new(o, "n_embd", json_integer(s->n_embd));
    json_object_set_new(o, "n_layer", json_integer(s->n_layer));
    json_object_set_new(o, "n_head", json_integer(s->n_head));
    json_object_set_new(o, "n_inner", json_null());
    json_object_set_new(o, "activation_function", json_string("gelu_new"));
    json_object_set_new(o, "resid_pdrop", json_real(0.0));
    json_object_set_new(o, "embd_pdrop", json_real(0.0));
    json_object_set_new(o, "attn_pdrop", json_real(0.0));
    json_object_set_new(o, "summary_first_dropout", json_real(0.0));
    json_object_set_new(o, "layer_norm_epsilon", json_real(1e-5));
    json_object_set_new(o, "initializer_range", json_real(0.02));
    json_object_set_new(o, "scale_attn_weights", json_true());
    json_object_set_new(o, "use_cache", json_true());
    json_object_set_new(o, "bos_token_id", json_integer(eot));
    json_object_set_new(o, "eos_token_id", json_integer(eot));
    json_object_set_new(o, "tie_word_embeddings", json_true());
    json_object_set_new(o, "torch_dtype", json_string(dtype == ST_F32 ? "float32" : dtype == ST_F16 ? "float16" : "bfloat16"));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!text) return err_set(err, "%s: cannot make the JSON", err_show(path));
    size_t n = strlen(text);
    char *buf = xmalloc(n + 2);
    memcpy(buf, text, n);
    buf[n] = '\n';
    free(text);
    int rc = write_file_atomic(path, buf, n + 1, err);
    free(buf);
    return rc;
}

/* A positive integer field of config.json (it must be there when need), into *out. */
static int int_field(const char *path, const json_t *o, const char *key, int need, int *out, Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v && !need) return 1;
    if (!v) return err_set(err, "%s: no \"%s\" (a GPT-2 config.json gives it)", path, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
        return err_set(err, "%s: \"%s\" is not a positive integer", path, key);
    *out = (int)json_integer_value(v);
    return 0;
}

/* A string field that must be one of the allowed values when it is there. */
static int string_field(const char *path, const json_t *o, const char *key, const char *const *allowed, const char *why,
                        Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v) return 0;
    for (int i = 0; allowed[i]; i++)
        if (json_is_string(v) && !strcmp(json_string_value(v), allowed[i])) return 0;
    return err_set(err, "%s: \"%s\" is %s, expected \"%s\"%s", path, key,
                   json_is_string(v) ? err_show(json_string_value(v)) : "not a string", allowed[0], why);
}

/* A boolean field that must be want when it is there. */
static int bool_field(const char *path, const json_t *o, const char *key, int want, Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || (json_is_boolean(v) && json_is_true(v) == want)) return 0;
    return err_set(err, "%s: \"%s\" is %s, expected %s (gpt2gen's model)", path, key,
                   json_is_boolean(v) ? (json_is_true(v) ? "true" : "false") : "not a boolean", want ? "true" : "false");
}

static int check_config(const char *path, const json_t *o, GPT2Shape *s, Err *err) {
    if (!json_is_object(o)) return err_set(err, "%s: not a JSON object", err_show(path));
    static const char *const gpt2[] = {"gpt2", NULL}, *const gelu[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    if (string_field(path, o, "model_type", gpt2, " (only GPT-2 models import)", err) ||
        string_field(path, o, "activation_function", gelu, " or \"gelu_pytorch_tanh\": gpt2gen's GELU is the tanh one", err) ||
        bool_field(path, o, "scale_attn_weights", 1, err) || bool_field(path, o, "scale_attn_by_inverse_layer_idx", 0, err))
        return -1;
    const json_t *eps = json_object_get(o, "layer_norm_epsilon");
    if (eps && (!json_is_number(eps) || fabs(json_number_value(eps) - 1e-5) > 1e-12))
        return err_set(err, "%s: \"layer_norm_epsilon\" is %s, expected 1e-05 (gpt2gen's LayerNorm)", path,
                       json_is_number(eps) ? "another number" : "not a number");
    memset(s, 0, sizeof *s);
    if (int_field(path, o, "vocab_size", 1, &s->vocab_size, err) < 0 || int_field(path, o, "n_embd", 1, &s->n_embd, err) < 0 ||
        int_field(path, o, "n_layer", 1, &s->n_layer, err) < 0 || int_field(path, o, "n_head", 1, &s->n_head, err) < 0)
        return -1;
    int rc = int_field(path, o, "n_positions", 0, &s->max_seq_len, err);
    if (rc > 0) rc = int_field(path, o, "n_ctx", 1, &s->max_seq_len, err);
    if (rc < 0) return -1;
    const json_t *inner = json_object_get(o, "n_inner");
    if (inner && !json_is_null(inner) && !(json_is_integer(inner) && json_integer_value(inner) == 4LL * s->n_embd))
        return err_set(err, "%s: \"n_inner\" is not null or 4 * n_embd = %d: gpt2gen's MLP is 4 * n_embd wide", path,
                       4 * s->n_embd);
    s->padded_vocab_size = (s->vocab_size + 127) / 128 * 128;
    return checkpoint_check_shape(path, s, "in the config", err);
}

int hf_read_config(const char *path, GPT2Shape *s, Err *err) {
    size_t len;
    char *text = read_file_max(path, 1u << 20, &len, err);
    if (!text) return -1;
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!o) return err_set(err, "%s: not valid JSON: %s (line %d, column %d)", err_show(path), je.text, je.line, je.column);
    int rc = check_config(path, o, s, err);
    json_decref(o);
    return rc;
}
