/* checkpoint: llm.c model checkpoints (docs/model.md, "File formats", "Model checkpoint").
 *
 * Layout, little-endian: a header of 256 int32, [0]=20240326, [1]=3 (fp32) or 5 (bf16), [2]=maxT, [3]=V,
 * [4]=L, [5]=NH, [6]=C, [7]=Vp, the rest zero; then every parameter tensor in checkpoint order
 * (common/gpt2.h), fp32 or bf16. The file size must be exactly header + parameters.
 * Errors name the file and what was expected; a bad file never crashes the reader, and a save never
 * leaves a half-written file under the target name. */
#ifndef GPT2GEN_CHECKPOINT_H
#define GPT2GEN_CHECKPOINT_H
#include <stdint.h>
#include <string.h>
#include "common/err.h"
#include "common/gpt2.h"

enum { CHECKPOINT_MAGIC = 20240326, CHECKPOINT_FP32 = 3, CHECKPOINT_BF16 = 5, CHECKPOINT_HEADER_INTS = 256 };
/* A model other than GPT-2 (common/gpt2.h: any architecture field not GPT-2's) gets versions of its own, so that
   llm.c and older readers refuse it rather than misread it, and its header records the architecture in [8..]:
   [8]=1 (the architecture's layout version), [9]=norm (0 LayerNorm, 1 RMSNorm), [10]=position (0 learned, 1 RoPE),
   [11]=mlp (0 GELU, 1 ReLU^2, 2 SwiGLU), [12]=n_kv_head, [13]=n_ffn, [14]=qk_norm, [15]=bias, [16]=tie_embeddings,
   [20..25]=norm_eps, rope_theta, logit_softcap as three little-endian float64 (docs/model.md). */
enum { CHECKPOINT_ARCH_FP32 = 1003, CHECKPOINT_ARCH_BF16 = 1005, CHECKPOINT_ARCH_LAYOUT = 1 };
/* those fields at base (a checkpoint's h + 8; a resume state's h + 40): written, and read into s (whose shape fields
   are set) with their ranges checked, the message naming path */
void checkpoint_arch_put(int32_t *base, const GPT2Shape *s);
int  checkpoint_arch_get(const int32_t *base, GPT2Shape *s, const char *path, Err *err);

/* Reads and validates the header (magic, version, sane shape, exact file size). */
int checkpoint_read_header(const char *path, GPT2Shape *shape, int *is_bf16, Err *err);
/* Loads all parameters as fp32 into params (num_params of the file's shape). With expect, every shape
   field must agree, and the message names the one that does not. */
int checkpoint_load(const char *path, const GPT2Shape *expect, float *params, Err *err);
/* Every weight a finite number: a NaN or an infinity is an error naming path, the tensor, its layer and the
   element (checkpoint_load checks each checkpoint it reads; import checks what it would write). */
int checkpoint_check_finite(const char *path, const GPT2Shape *shape, const float *params, Err *err);
/* The shape checks the reader makes, for other files that record a shape (the resume state): every field
   positive, Vp >= V, C a multiple of NH, and not absurdly large (where says where the shape came from); and
   every field of got equal to expect's (what names the file's kind in the message). */
int checkpoint_check_shape(const char *path, const GPT2Shape *shape, const char *where, Err *err);
int checkpoint_match_shape(const char *path, const GPT2Shape *got, const GPT2Shape *expect, const char *what, Err *err);
/* Writes atomically (temporary name, then rename); bf16 rounds to nearest even. */
int checkpoint_save(const char *path, const GPT2Shape *shape, const float *params, int as_bf16, Err *err);

#endif
