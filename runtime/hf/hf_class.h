/* hf_class: what each transformers class's file gives the common code of runtime/hf (hf_map.c): its tensors and
   its config.json, both ways. GPT2LMHeadModel is hf_gpt2.c, LlamaForCausalLM and Qwen3ForCausalLM hf_llama.c; the
   fields of config.json are read with the helpers of hf_map.c, so that each key's message has one wording. */
#ifndef GPT2GEN_HF_CLASS_H
#define GPT2GEN_HF_CLASS_H
#include "runtime/hf/hf.h"
#include <jansson.h>

int     hf_gpt2_tensors(const GPT2Shape *s, HfTensor *out);   /* NULL out: only the count */
json_t *hf_gpt2_config(const GPT2Shape *s, StDtype dtype);
int     hf_gpt2_read_config(const char *path, const json_t *o, GPT2Shape *s, Err *err);

int     hf_llama_tensors(const GPT2Shape *s, HfTensor *out);  /* NULL out: only the count */
json_t *hf_llama_config(const GPT2Shape *s, StDtype dtype);
/* qwen3: the config is Qwen3ForCausalLM's (its defaults differ: head_dim 128, num_key_value_heads 32) */
int     hf_llama_read_config(const char *path, const json_t *o, int qwen3, GPT2Shape *s, Err *err);

/* A tensor of Hugging Face's shape (rows, cols), or a vector of rows (cols 0) */
HfTensor hf_tensor(const char *name, int param, int layer, int transpose, int64_t rows, int64_t cols);
const char *hf_dtype_name(StDtype d);   /* torch_dtype: "float32", "bfloat16", "float16" */

/* config.json's fields. A positive integer (it must be there when need; cls names the class for the message): 1 when
   absent and not needed, 0 when read into *out, -1 with err. */
int hf_json_int(const char *path, const json_t *o, const char *key, int need, const char *cls, int *out, Err *err);
/* A string that must be one of allowed (NULL-terminated) when it is there; why ends the message */
int hf_json_string(const char *path, const json_t *o, const char *key, const char *const *allowed, const char *why, Err *err);
/* A boolean that must be want when it is there */
int hf_json_bool(const char *path, const json_t *o, const char *key, int want, Err *err);
/* A boolean, def when absent: 0 or 1, or -1 with err */
int hf_json_flag(const char *path, const json_t *o, const char *key, int def, Err *err);
/* A number in (lo, hi), def when absent: 0, or -1 with err */
int hf_json_number(const char *path, const json_t *o, const char *key, double def, double lo, double hi, double *out, Err *err);
#endif
