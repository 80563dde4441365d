/* hf: Hugging Face's GPT2LMHeadModel folders (docs/model.md, "Hugging Face"): our model checkpoint written as
 * model.safetensors + config.json (+ the tokenizer's vocab.json and merges.txt), and such a folder read back.
 *
 * The mapping, for layer i (ours are (out, in) like torch's nn.Linear; Hugging Face's GPT-2 keeps the four
 * matmul weights as Conv1D, (in, out), so those are transposed):
 *   wte (Vp, C), rows 0..V-1      transformer.wte.weight (V, C)    the padding rows V..Vp-1 are not written
 *   wpe (maxT, C)                 transformer.wpe.weight
 *   ln1w, ln1b [i] (C)            transformer.h.i.ln_1.weight, .bias
 *   qkvw [i] (3C, C)              transformer.h.i.attn.c_attn.weight (C, 3C)
 *   qkvb [i] (3C)                 transformer.h.i.attn.c_attn.bias
 *   attprojw [i] (C, C)           transformer.h.i.attn.c_proj.weight (C, C), transposed
 *   attprojb [i] (C)              transformer.h.i.attn.c_proj.bias
 *   ln2w, ln2b [i] (C)            transformer.h.i.ln_2.weight, .bias
 *   fcw [i] (4C, C)               transformer.h.i.mlp.c_fc.weight (C, 4C)
 *   fcb [i] (4C)                  transformer.h.i.mlp.c_fc.bias
 *   fcprojw [i] (C, 4C)           transformer.h.i.mlp.c_proj.weight (4C, C)
 *   fcprojb [i] (C)               transformer.h.i.mlp.c_proj.bias
 *   lnfw, lnfb (C)                transformer.ln_f.weight, .bias
 * lm_head.weight is wte (tied): never written; on import it must equal wte if present. */
#ifndef GPT2GEN_HF_H
#define GPT2GEN_HF_H
#include <stdint.h>
#include "common/err.h"
#include "common/gpt2.h"
#include "runtime/hf/safetensors.h"

enum { HF_EOT = 50256, HF_GPT2_VOCAB = 50257 };

/* One Hugging Face tensor and where it lives among ours. */
typedef struct {
    char name[96];       /* without the prefix "transformer." */
    int param;           /* P_* (common/gpt2.h) */
    int layer;           /* its layer, or -1 for a tensor that serves every layer */
    int transpose;       /* Conv1D: Hugging Face's (in, out) is our (out, in) */
    int ndim;
    int64_t shape[2];    /* Hugging Face's shape */
} HfTensor;

/* The 4 + 12 L tensors of shape s, in the order export writes them. Returns the count; out has room for it. */
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
    size_t dropped_padding;   /* export: non-zero values in wte's padding rows V..Vp-1, which are not written */
    int ignored;              /* import: buffers (attn.bias, attn.masked_bias) and a tied lm_head.weight skipped */
    char note[512];           /* why no tokenizer files were written, or which tensors were ignored on import */
} HfReport;

int hf_export(const HfExport *x, HfReport *r, Err *err);

/* Reads the folder dir (config.json and model.safetensors, or model.safetensors.index.json and its shards) and
   writes our checkpoint to out, fp32 or bf16 (as_bf16), atomically; force: replace an existing out. */
int hf_import(const char *dir, const char *out, int as_bf16, int force, HfReport *r, Err *err);

/* config.json for GPT2LMHeadModel of shape s; torch_dtype names dtype. */
int hf_write_config(const char *path, const GPT2Shape *s, StDtype dtype, Err *err);
/* The shape config.json gives (Vp: V rounded up to a multiple of 128, as llm.c pads); a config our model cannot
   run the same (another model type, activation, epsilon, n_inner) is an error naming the key. */
int hf_read_config(const char *path, GPT2Shape *s, Err *err);
#endif
