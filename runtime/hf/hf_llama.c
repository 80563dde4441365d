/* hf_llama: LlamaForCausalLM and Qwen3ForCausalLM (hf.h): their tensor names and layouts, and their config.json
   both ways. Both keep nn.Linear's (out, in), as we do, so nothing is transposed; our fused qkvw (and qkvb) holds
   q_proj's NH*HS rows, then k_proj's NKV*HS, then v_proj's NKV*HS. Our RoPE is theirs (rotate_half, the halves of
   each head paired), so q and k need no permutation. SwiGLU: gate_proj is fcgw (inside the SiLU), up_proj fcw. */
#include "runtime/hf/hf_class.h"
#include "gen/spec.h"
#include "runtime/checkpoint.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A layer's tensors after "model.layers.<i>.": ours, the part of our per-layer slice (0 whole, 1 q, 2 k, 3 v), and
   Hugging Face's shape in named sizes (rows, cols: 'C' n_embd, 'Q' NH*HS, 'K' NKV*HS, 'F' n_ffn, 'H' HS; 0 none) */
static const struct { const char *name; int param, part; char rows, cols; } LAYER[] = {
    {"input_layernorm.weight", P_LN1W, 0, 'C', 0},
    {"self_attn.q_proj.weight", P_QKVW, 1, 'Q', 'C'}, {"self_attn.q_proj.bias", P_QKVB, 1, 'Q', 0},
    {"self_attn.k_proj.weight", P_QKVW, 2, 'K', 'C'}, {"self_attn.k_proj.bias", P_QKVB, 2, 'K', 0},
    {"self_attn.v_proj.weight", P_QKVW, 3, 'K', 'C'}, {"self_attn.v_proj.bias", P_QKVB, 3, 'K', 0},
    {"self_attn.o_proj.weight", P_ATTPROJW, 0, 'C', 'C'}, {"self_attn.o_proj.bias", P_ATTPROJB, 0, 'C', 0},
    {"self_attn.q_norm.weight", P_QNORMW, 0, 'H', 0},   {"self_attn.k_norm.weight", P_KNORMW, 0, 'H', 0},
    {"post_attention_layernorm.weight", P_LN2W, 0, 'C', 0},
    {"mlp.gate_proj.weight", P_FCGW, 0, 'F', 'C'},      {"mlp.gate_proj.bias", P_FCGB, 0, 'F', 0},
    {"mlp.up_proj.weight", P_FCW, 0, 'F', 'C'},         {"mlp.up_proj.bias", P_FCB, 0, 'F', 0},
    {"mlp.down_proj.weight", P_FCPROJW, 0, 'C', 'F'},   {"mlp.down_proj.bias", P_FCPROJB, 0, 'C', 0},
};
enum { PER_LAYER = sizeof LAYER / sizeof LAYER[0] };

static int64_t size_of(const GPT2Shape *s, char c) {
    int64_t hs = gpt2_head_size(s);
    switch (c) {
    case 'C': return s->n_embd;
    case 'Q': return s->n_head * hs;
    case 'K': return gpt2_kv_heads(s) * hs;
    case 'F': return gpt2_ffn(s);
    case 'H': return hs;
    default: return 0;
    }
}

int hf_llama_tensors(const GPT2Shape *s, HfTensor *out) {
    size_t sz[NUM_PARAM_TENSORS];
    gpt2_param_sizes(s, sz, NULL);
    int n = 0, C = s->n_embd;
    int64_t q = size_of(s, 'Q'), k = size_of(s, 'K');
    if (out) out[n] = hf_tensor("model.embed_tokens.weight", P_WTE, -1, 0, s->vocab_size, C);
    n++;
    for (int l = 0; l < s->n_layer; l++)
        for (int j = 0; j < PER_LAYER; j++) {
            if (!sz[LAYER[j].param]) continue;   /* a tensor this architecture lacks */
            if (out) {
                char name[96];
                snprintf(name, sizeof name, "model.layers.%d.%s", l, LAYER[j].name);
                out[n] = hf_tensor(name, LAYER[j].param, l, 0, size_of(s, LAYER[j].rows), size_of(s, LAYER[j].cols));
                int64_t row0 = LAYER[j].part == 2 ? q : LAYER[j].part == 3 ? q + k : 0;
                out[n].start = (size_t)(row0 * (LAYER[j].cols ? C : 1));
            }
            n++;
        }
    if (out) out[n] = hf_tensor("model.norm.weight", P_LNFW, -1, 0, C, 0);
    n++;
    if (s->untied) {
        if (out) out[n] = hf_tensor("lm_head.weight", P_LMHEAD, -1, 0, s->vocab_size, C);
        n++;
    }
    return n;
}

/* x as the shortest decimal that gives back the same value (as a float when as_float): 1e-06, not 9.99999997e-07 */
static double shortest(double x, int as_float) {
    char buf[40];
    for (int p = 1; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, x);
        double y = strtod(buf, NULL);
        if (as_float ? (float)y == (float)x : y == x) return y;
    }
    return x;
}

static void set_int(json_t *o, const char *key, int v) { json_object_set_new(o, key, json_integer(v)); }

json_t *hf_llama_config(const GPT2Shape *s, StDtype dtype) {
    int qwen3 = s->qk_norm, eot = s->vocab_size > HF_EOT ? HF_EOT : s->vocab_size - 1;
    double theta = shortest(gpt2_rope_theta(s), 0);
    json_t *o = json_object(), *arch = json_array(), *rope = json_object();
    json_array_append_new(arch, json_string(qwen3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM"));
    json_object_set_new(o, "architectures", arch);
    json_object_set_new(o, "model_type", json_string(qwen3 ? "qwen3" : "llama"));
    set_int(o, "vocab_size", s->vocab_size);
    set_int(o, "hidden_size", s->n_embd);
    set_int(o, "intermediate_size", gpt2_ffn(s));
    set_int(o, "num_hidden_layers", s->n_layer);
    set_int(o, "num_attention_heads", s->n_head);
    set_int(o, "num_key_value_heads", gpt2_kv_heads(s));
    set_int(o, "head_dim", gpt2_head_size(s));
    set_int(o, "max_position_embeddings", s->max_seq_len);
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "rms_norm_eps", json_real(shortest(gpt2_norm_eps(s), 1)));
    json_object_set_new(o, "rope_theta", json_real(theta));   /* transformers 4's key; 5 reads it too */
    json_object_set_new(rope, "rope_theta", json_real(theta));   /* transformers 5's */
    json_object_set_new(rope, "rope_type", json_string("default"));
    json_object_set_new(o, "rope_parameters", rope);
    json_object_set_new(o, "attention_bias", json_boolean(!s->no_bias));
    json_object_set_new(o, "attention_dropout", json_real(0.0));
    if (!qwen3) {
        json_object_set_new(o, "mlp_bias", json_boolean(!s->no_bias));
        set_int(o, "pretraining_tp", 1);
    } else {   /* every layer full attention */
        json_t *types = json_array();
        for (int l = 0; l < s->n_layer; l++) json_array_append_new(types, json_string("full_attention"));
        json_object_set_new(o, "use_sliding_window", json_false());
        json_object_set_new(o, "sliding_window", json_null());
        set_int(o, "max_window_layers", s->n_layer);
        json_object_set_new(o, "layer_types", types);
    }
    json_object_set_new(o, "initializer_range", json_real(0.02));
    json_object_set_new(o, "use_cache", json_true());
    json_object_set_new(o, "tie_word_embeddings", json_boolean(!s->untied));
    set_int(o, "bos_token_id", eot);
    set_int(o, "eos_token_id", eot);
    json_object_set_new(o, "torch_dtype", json_string(hf_dtype_name(dtype)));
    return o;
}

/* The RoPE of config.json: the default kind only (no scaling), its theta from rope_parameters (transformers 5) or
   rope_theta (4), else 10000 */
static int read_rope(const char *path, const json_t *o, double *theta, Err *err) {
    const char *keys[] = {"rope_scaling", "rope_parameters"};
    *theta = 10000.0;
    if (hf_json_number(path, o, "rope_theta", 10000.0, 0, 1e300, theta, err)) return -1;
    for (int i = 0; i < 2; i++) {
        const json_t *r = json_object_get(o, keys[i]);
        if (!r || json_is_null(r)) continue;
        if (!json_is_object(r)) return err_set(err, "%s: \"%s\" is not an object or null", path, keys[i]);
        const json_t *type = json_object_get(r, "rope_type");
        if (!type) type = json_object_get(r, "type");
        if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "default")))
            return err_set(err, "%s: \"%s\" asks for RoPE of type %s: gpt2gen's RoPE is the default one (no scaling)",
                           path, keys[i], json_is_string(type) ? err_show(json_string_value(type)) : "(not a string)");
        double partial = 1.0;
        if (hf_json_number(path, r, "partial_rotary_factor", 1.0, 0, 2, &partial, err)) return -1;
        if (partial != 1.0)
            return err_set(err, "%s: \"%s\": partial_rotary_factor %g: gpt2gen rotates whole heads", path, keys[i], partial);
        if (hf_json_number(path, r, "rope_theta", *theta, 0, 1e300, theta, err)) return -1;
    }
    return 0;
}

/* Qwen3's sliding windows: none, in every layer */
static int no_sliding_window(const char *path, const json_t *o, Err *err) {
    if (hf_json_bool(path, o, "use_sliding_window", 0, err)) return -1;
    const json_t *types = json_object_get(o, "layer_types"), *v;
    size_t i;
    if (!types || json_is_null(types)) return 0;
    if (!json_is_array(types)) return err_set(err, "%s: \"layer_types\" is not a list", path);
    json_array_foreach(types, i, v)
        if (!json_is_string(v) || strcmp(json_string_value(v), "full_attention"))
            return err_set(err, "%s: \"layer_types\"[%zu] is not \"full_attention\": gpt2gen's attention is full in "
                           "every layer", path, i);
    return 0;
}

/* The biases: Llama's attention_bias and mlp_bias must agree (gpt2gen has them everywhere or nowhere); Qwen3's MLP
   has none, so its attention has none either. Returns no_bias (0 or 1), or -1. */
static int read_bias(const char *path, const json_t *o, int qwen3, Err *err) {
    int attn = hf_json_flag(path, o, "attention_bias", 0, err), mlp = qwen3 ? 0 : hf_json_flag(path, o, "mlp_bias", 0, err);
    if (attn < 0 || mlp < 0) return -1;
    if (qwen3 && attn)
        return err_set(err, "%s: \"attention_bias\" is true: Qwen3ForCausalLM's MLP has no biases, and gpt2gen's model "
                       "has biases in every linear layer or in none (model.bias)", path);
    if (attn != mlp)
        return err_set(err, "%s: \"attention_bias\" is %s but \"mlp_bias\" %s: gpt2gen's model has biases in every "
                       "linear layer or in none (model.bias)", path, attn ? "true" : "false", mlp ? "true" : "false");
    return !attn;
}

/* The heads: num_key_value_heads and head_dim with the class's defaults; head_dim must be hidden_size / heads */
static int read_heads(const char *path, const json_t *o, int qwen3, const char *cls, GPT2Shape *s, Err *err) {
    int kv = qwen3 ? 32 : s->n_head, hd = qwen3 ? 128 : (s->n_head ? s->n_embd / s->n_head : 0);
    if (hf_json_int(path, o, "num_key_value_heads", 0, cls, &kv, err) < 0 || hf_json_int(path, o, "head_dim", 0, cls, &hd, err) < 0)
        return -1;
    if (s->n_embd % s->n_head || hd != s->n_embd / s->n_head)
        return err_set(err, "%s: \"head_dim\" is %d, but hidden_size / num_attention_heads is %d / %d: gpt2gen's heads "
                       "are n_embd / n_head wide", path, hd, s->n_embd, s->n_head);
    s->n_kv_head = kv;
    return 0;
}

int hf_llama_read_config(const char *path, const json_t *o, int qwen3, GPT2Shape *s, Err *err) {
    static const char *const silu[] = {"silu", "swish", NULL};
    const char *cls = qwen3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
    memset(s, 0, sizeof *s);
    s->max_seq_len = qwen3 ? 32768 : 2048;   /* transformers' defaults */
    if (hf_json_string(path, o, "hidden_act", silu, ": the SwiGLU of gpt2gen's model is SiLU's", err) ||
        hf_json_int(path, o, "vocab_size", 1, cls, &s->vocab_size, err) < 0 || hf_json_int(path, o, "hidden_size", 1, cls, &s->n_embd, err) < 0 ||
        hf_json_int(path, o, "intermediate_size", 1, cls, &s->n_ffn, err) < 0 ||
        hf_json_int(path, o, "num_hidden_layers", 1, cls, &s->n_layer, err) < 0 ||
        hf_json_int(path, o, "num_attention_heads", 1, cls, &s->n_head, err) < 0 ||
        hf_json_int(path, o, "max_position_embeddings", 0, cls, &s->max_seq_len, err) < 0 || read_heads(path, o, qwen3, cls, s, err) ||
        read_rope(path, o, &s->rope_theta, err) || hf_json_number(path, o, "rms_norm_eps", 1e-6, 0, 1, &s->norm_eps, err) ||
        (qwen3 && no_sliding_window(path, o, err)))
        return -1;
    int no_bias = read_bias(path, o, qwen3, err), tied = hf_json_flag(path, o, "tie_word_embeddings", 0, err);
    if (no_bias < 0 || tied < 0) return -1;
    s->no_bias = no_bias;
    s->untied = !tied;
    s->norm = NORM_RMSNORM;
    s->position = POS_ROPE;
    s->mlp = MLP_SWIGLU;
    s->qk_norm = qwen3;
    s->padded_vocab_size = (s->vocab_size + 127) / 128 * 128;
    if (checkpoint_check_shape(path, s, "in the config", err)) return -1;
    ModelSpec m;   /* what gpt2gen runs: the checks of a config's model keys (n_kv_head divides n_head, ...) */
    return model_spec_from_header(&m, s, PREC_FP32, path, err);
}
