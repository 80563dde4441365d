/* hf: Hugging Face folders (docs/model.md, "Hugging Face"): our model checkpoint written as model.safetensors +
 * config.json (+ the tokenizer's vocab.json and merges.txt), and such a folder read back. Three transformers classes:
 *   GPT2LMHeadModel    GPT-2 itself (hf_gpt2.c): the four matmul weights of each layer are Conv1D, (in, out), so
 *                      they are transposed; names under "transformer."; lm_head.weight is wte (tied)
 *   LlamaForCausalLM   RMSNorm, RoPE, SwiGLU, any n_kv_head, biases on or off, tied or not (hf_llama.c): ours are
 *                      (out, in) like their nn.Linear; qkvw's rows split into q_proj, k_proj, v_proj
 *   Qwen3ForCausalLM   the same with qk_norm (q_norm, k_norm) and no biases
 * hf_family says which class a model is, or what none of them represents. */
#ifndef GPT2GEN_HF_H
#define GPT2GEN_HF_H
#include <stdint.h>
#include "common/err.h"
#include "common/gpt2.h"
#include "runtime/hf/safetensors.h"

enum { HF_EOT = 50256, HF_GPT2_VOCAB = 50257 };

typedef enum { HF_GPT2 = 0, HF_LLAMA, HF_QWEN3 } HfFamily;
/* The class that represents model s; -1 when none does, with why (n >= 1 bytes) naming the model keys that keep it
   from every class. */
int         hf_family(const GPT2Shape *s, char *why, size_t n);
const char *hf_class_name(HfFamily f);     /* "GPT2LMHeadModel", ... */
const char *hf_prefix(const GPT2Shape *s); /* what HfTensor names lack in the file: "transformer." for GPT-2, else "" */

/* One Hugging Face tensor and where it lives among ours. */
typedef struct {
    char name[96];       /* without hf_prefix */
    int param;           /* P_* (common/gpt2.h) */
    int layer;           /* its layer, or -1 for a tensor that serves every layer */
    int transpose;       /* Conv1D: Hugging Face's (in, out) is our (out, in) */
    int ndim;
    int64_t shape[2];    /* Hugging Face's shape */
    size_t start;        /* its first element within the layer's slice of param (k_proj, v_proj: rows of qkvw) */
} HfTensor;

/* The tensors of model s (hf_family's class), in the order export writes them. Returns the count (hf_tensor_count);
   out has room for it. */
int    hf_tensors(const GPT2Shape *s, HfTensor *out);
int    hf_tensor_count(const GPT2Shape *s);
size_t hf_tensor_elems(const HfTensor *t);
/* Tensor t in Hugging Face's layout, from our parameters (fp32, checkpoint order), into out (hf_tensor_elems). */
void   hf_gather(const GPT2Shape *s, const HfTensor *t, const float *params, float *out);
/* The other way: tensor t's values (Hugging Face's layout) into our parameters. */
void   hf_scatter(const GPT2Shape *s, const HfTensor *t, const float *in, float *params);

typedef struct {
    const char *checkpoint;   /* the model */
    const char *dir;          /* the folder to write (made if missing) */
    const char *tokenizer;    /* the tokenizer file (NULL: none): without GPT-2's, no tokenizer files, and r->note
                                 says why */
    int tokenizer_given;      /* it was asked for (--tokenizer): a missing or bad one is an error, not a note */
    StDtype dtype;            /* of model.safetensors */
    int force;                /* replace an existing export: without it, any of the export's files in dir is an error */
} HfExport;

/* What an export or import did, for the command's messages. */
typedef struct {
    GPT2Shape shape;
    size_t params;            /* parameters written (Hugging Face's count: without the vocabulary padding) */
    int wrote_tokenizer;
    size_t dropped_padding;   /* export: non-zero values in the padding rows V..Vp-1 of wte (and of an
                                 untied lmhead), which are not written */
    int ignored;              /* import: buffers (attn.bias, attn.masked_bias) and a tied lm_head.weight skipped */
    char note[512];           /* why no tokenizer files were written, or which tensors were ignored on import */
} HfReport;

int hf_export(const HfExport *x, HfReport *r, Err *err);

/* Reads the folder dir (config.json and model.safetensors, or model.safetensors.index.json and its shards) and
   writes our checkpoint to out, fp32 or bf16 (as_bf16), atomically; force: replace an existing out. */
int hf_import(const char *dir, const char *out, int as_bf16, int force, HfReport *r, Err *err);

/* config.json for model s (hf_family's class); torch_dtype names dtype. */
int hf_write_config(const char *path, const GPT2Shape *s, StDtype dtype, Err *err);
/* The shape config.json gives (Vp: V rounded up to a multiple of 128, as llm.c pads), by its model_type ("gpt2",
   "llama", "qwen3"); a config our model cannot run the same (another model type, activation, epsilon, n_inner,
   head_dim, RoPE scaling, sliding windows) is an error naming the key. */
int hf_read_config(const char *path, GPT2Shape *s, Err *err);
#endif
