/* hf_gpt2: GPT2LMHeadModel (hf.h): its tensor names and layouts, and its config.json both ways. */
#include "runtime/hf/hf_class.h"
#include "runtime/checkpoint.h"
#include <math.h>
#include <stdio.h>
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

int hf_gpt2_tensors(const GPT2Shape *s, HfTensor *out) {
    if (!out) return 4 + PER_LAYER * s->n_layer;
    int n = 0, C = s->n_embd;
    out[n++] = hf_tensor("wte.weight", P_WTE, -1, 0, s->vocab_size, C);
    out[n++] = hf_tensor("wpe.weight", P_WPE, -1, 0, s->max_seq_len, C);
    for (int l = 0; l < s->n_layer; l++)
        for (int k = 0; k < PER_LAYER; k++) {
            char name[96];
            snprintf(name, sizeof name, "h.%d.%s", l, LAYER[k].name);
            out[n++] = hf_tensor(name, LAYER[k].param, l, LAYER[k].transpose, (int64_t)LAYER[k].rows * C,
                                 (int64_t)LAYER[k].cols * C);
        }
    out[n++] = hf_tensor("ln_f.weight", P_LNFW, -1, 0, C, 0);
    out[n++] = hf_tensor("ln_f.bias", P_LNFB, -1, 0, C, 0);
    return n;
}

json_t *hf_gpt2_config(const GPT2Shape *s, StDtype dtype) {
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
    json_object_set_new(o, "torch_dtype", json_string(hf_dtype_name(dtype)));
    return o;
}

int hf_gpt2_read_config(const char *path, const json_t *o, GPT2Shape *s, Err *err) {
    static const char *const gelu[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    if (hf_json_string(path, o, "activation_function", gelu, " or \"gelu_pytorch_tanh\": gpt2gen's GELU is the tanh one", err) ||
        hf_json_bool(path, o, "scale_attn_weights", 1, err) || hf_json_bool(path, o, "scale_attn_by_inverse_layer_idx", 0, err))
        return -1;
    const json_t *eps = json_object_get(o, "layer_norm_epsilon");
    if (eps && (!json_is_number(eps) || fabs(json_number_value(eps) - 1e-5) > 1e-12))
        return err_set(err, "%s: \"layer_norm_epsilon\" is %s, expected 1e-05 (gpt2gen's LayerNorm)", path,
                       json_is_number(eps) ? "another number" : "not a number");
    memset(s, 0, sizeof *s);
    const char *cls = "GPT-2";
    if (hf_json_int(path, o, "vocab_size", 1, cls, &s->vocab_size, err) < 0 || hf_json_int(path, o, "n_embd", 1, cls, &s->n_embd, err) < 0 ||
        hf_json_int(path, o, "n_layer", 1, cls, &s->n_layer, err) < 0 || hf_json_int(path, o, "n_head", 1, cls, &s->n_head, err) < 0)
        return -1;
    int rc = hf_json_int(path, o, "n_positions", 0, cls, &s->max_seq_len, err);
    if (rc > 0) rc = hf_json_int(path, o, "n_ctx", 1, cls, &s->max_seq_len, err);
    if (rc < 0) return -1;
    const json_t *inner = json_object_get(o, "n_inner");
    if (inner && !json_is_null(inner) && !(json_is_integer(inner) && json_integer_value(inner) == 4LL * s->n_embd))
        return err_set(err, "%s: \"n_inner\" is not null or 4 * n_embd = %d: gpt2gen's MLP is 4 * n_embd wide", path,
                       4 * s->n_embd);
    s->padded_vocab_size = (s->vocab_size + 127) / 128 * 128;
    return checkpoint_check_shape(path, s, "in the config", err);
}
