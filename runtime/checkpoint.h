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
