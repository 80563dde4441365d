/* hf_map: what the three classes share (hf.h): which class a model is, the mapping of a Hugging Face tensor to
   our parameters (hf_gather, hf_scatter), config.json's writing and reading by class, and the reading of its fields
   (hf_class.h). The classes' own names and keys are hf_gpt2.c's and hf_llama.c's. */
#include "runtime/hf/hf_class.h"
#include "common/files.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CLASS_NAMES[] = {"GPT2LMHeadModel", "LlamaForCausalLM", "Qwen3ForCausalLM"};

const char *hf_class_name(HfFamily f) { return CLASS_NAMES[f]; }

/* the model keys (docs/config.md) of s that keep it from Llama's subset, into why; for a model of GPT-2's norm,
   positions and MLP, those that keep it from GPT-2 too */
static void unsupported(const GPT2Shape *s, char *why, size_t n) {
    static const char *const norms[] = {"layernorm", "rmsnorm"}, *const positions[] = {"learned", "rope"},
                      *const mlps[] = {"gelu", "relu2", "swiglu"};
    size_t k = 0;
#define ADD(...) (k += k < n ? (size_t)snprintf(why + k, n - k, __VA_ARGS__) : 0)
    if (s->norm != NORM_RMSNORM) ADD("%snorm = \"%s\"", k ? ", " : "", norms[s->norm & 1]);
    if (s->position != POS_ROPE) ADD("%sposition = \"%s\"", k ? ", " : "", positions[s->position & 1]);
    if (s->mlp != MLP_SWIGLU) ADD("%smlp = \"%s\"", k ? ", " : "", mlps[s->mlp % 3]);
    if (s->logit_softcap > 0) ADD("%slogit_softcap = %g", k ? ", " : "", s->logit_softcap);
    if (s->qk_norm && !s->no_bias) ADD("%sqk_norm = true with bias = true", k ? ", " : "");
    if (!s->norm && !s->position && !s->mlp) {   /* GPT-2's blocks: what GPT2LMHeadModel lacks */
        if (gpt2_kv_heads(s) != s->n_head) ADD(", n_kv_head = %d", gpt2_kv_heads(s));
        if (gpt2_ffn(s) != 4 * s->n_embd) ADD(", n_ffn = %d", gpt2_ffn(s));
        if (s->qk_norm) ADD(", qk_norm = true");
        if (s->no_bias) ADD(", bias = false");
        if (s->untied) ADD(", tie_embeddings = false");
        if (gpt2_norm_eps(s) != 1e-5f) ADD(", norm_eps = %g", s->norm_eps);
    }
#undef ADD
}

int hf_family(const GPT2Shape *s, char *why, size_t n) {
    if (gpt2_is_gpt2(s)) return HF_GPT2;
    why[0] = 0;
    unsupported(s, why, n);
    return why[0] ? -1 : s->qk_norm ? HF_QWEN3 : HF_LLAMA;
}

const char *hf_prefix(const GPT2Shape *s) { return gpt2_is_gpt2(s) ? "transformer." : ""; }

static int family(const GPT2Shape *s) {
    char why[256];
    int f = hf_family(s, why, sizeof why);
    return f < 0 ? HF_GPT2 : f;   /* callers have checked it */
}

int hf_tensor_count(const GPT2Shape *s) { return family(s) == HF_GPT2 ? hf_gpt2_tensors(s, NULL) : hf_llama_tensors(s, NULL); }

int hf_tensors(const GPT2Shape *s, HfTensor *out) {
    return family(s) == HF_GPT2 ? hf_gpt2_tensors(s, out) : hf_llama_tensors(s, out);
}

HfTensor hf_tensor(const char *name, int param, int layer, int transpose, int64_t rows, int64_t cols) {
    HfTensor t = {{0}, param, layer, transpose, cols ? 2 : 1, {rows, cols}, 0};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

size_t hf_tensor_elems(const HfTensor *t) { return (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1); }

/* where tensor t starts among our parameters */
static size_t our_offset(const GPT2Shape *s, const HfTensor *t) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(s, sz, off);
    return off[t->param] + (t->layer < 0 ? 0 : (size_t)t->layer * (sz[t->param] / (size_t)s->n_layer)) + t->start;
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

const char *hf_dtype_name(StDtype d) { return d == ST_F32 ? "float32" : d == ST_F16 ? "float16" : "bfloat16"; }

/* the fewest digits, from 10 (GPT-2's config.json), that write every number of o so that it reads back the same */
static int precision(const json_t *o, int p) {
    const char *key;
    size_t i;
    json_t *v;
    if (json_is_real(o)) {
        char buf[40];
        for (; p < 17; p++) {
            snprintf(buf, sizeof buf, "%.*g", p, json_real_value(o));
            if (strtod(buf, NULL) == json_real_value(o)) break;
        }
    } else if (json_is_object(o)) json_object_foreach((json_t *)o, key, v) p = precision(v, p);
    else if (json_is_array(o)) json_array_foreach(o, i, v) p = precision(v, p);
    return p;
}

int hf_write_config(const char *path, const GPT2Shape *s, StDtype dtype, Err *err) {
    json_t *o = family(s) == HF_GPT2 ? hf_gpt2_config(s, dtype) : hf_llama_config(s, dtype);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(precision(o, 10)));
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

int hf_json_int(const char *path, const json_t *o, const char *key, int need, const char *cls, int *out, Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v && !need) return 1;
    if (!v) return err_set(err, "%s: no \"%s\" (a %s config.json gives it)", path, key, cls);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
        return err_set(err, "%s: \"%s\" is not a positive integer", path, key);
    *out = (int)json_integer_value(v);
    return 0;
}

int hf_json_string(const char *path, const json_t *o, const char *key, const char *const *allowed, const char *why, Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v) return 0;
    for (int i = 0; allowed[i]; i++)
        if (json_is_string(v) && !strcmp(json_string_value(v), allowed[i])) return 0;
    return err_set(err, "%s: \"%s\" is %s, expected \"%s\"%s", path, key,
                   json_is_string(v) ? err_show(json_string_value(v)) : "not a string", allowed[0], why);
}

int hf_json_bool(const char *path, const json_t *o, const char *key, int want, Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || (json_is_boolean(v) && json_is_true(v) == want)) return 0;
    return err_set(err, "%s: \"%s\" is %s, expected %s (gpt2gen's model)", path, key,
                   json_is_boolean(v) ? (json_is_true(v) ? "true" : "false") : "not a boolean", want ? "true" : "false");
}

int hf_json_flag(const char *path, const json_t *o, const char *key, int def, Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return def;
    if (!json_is_boolean(v)) return err_set(err, "%s: \"%s\" is not a boolean", path, key);
    return json_is_true(v);
}

int hf_json_number(const char *path, const json_t *o, const char *key, double def, double lo, double hi, double *out, Err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = def; return 0; }
    if (!json_is_number(v) || !(json_number_value(v) > lo && json_number_value(v) < hi))
        return err_set(err, "%s: \"%s\" is not a number in (%g, %g)", path, key, lo, hi);
    *out = json_number_value(v);
    return 0;
}

static int read_config(const char *path, const json_t *o, GPT2Shape *s, Err *err) {
    if (!json_is_object(o)) return err_set(err, "%s: not a JSON object", err_show(path));
    static const char *const types[] = {"gpt2", "llama", "qwen3", NULL};
    if (hf_json_string(path, o, "model_type", types, ", \"llama\" or \"qwen3\" (GPT2LMHeadModel, LlamaForCausalLM and "
                       "Qwen3ForCausalLM import)", err))
        return -1;
    const json_t *type = json_object_get(o, "model_type");
    const char *t = type ? json_string_value(type) : "gpt2";
    if (!strcmp(t, "gpt2")) return hf_gpt2_read_config(path, o, s, err);
    return hf_llama_read_config(path, o, !strcmp(t, "qwen3"), s, err);
}

int hf_read_config(const char *path, GPT2Shape *s, Err *err) {
    size_t len;
    char *text = read_file_max(path, 1u << 20, &len, err);
    if (!text) return -1;
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!o) return err_set(err, "%s: not valid JSON: %s (line %d, column %d)", err_show(path), je.text, je.line, je.column);
    int rc = read_config(path, o, s, err);
    json_decref(o);
    return rc;
}
