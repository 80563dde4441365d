/* cuda_backend: extras of the CUDA backend beyond runtime/backend.h (cuda_backend_create is declared there). */
#ifndef GPT2GEN_CUDA_BACKEND_H
#define GPT2GEN_CUDA_BACKEND_H
#include "runtime/backend.h"
/* GPU memory the backend holds in its arena, bytes */
size_t cuda_backend_arena_bytes(Backend *be);
/* Groups the n positions of inp by token for the deterministic wte backward: bucket j is token[j], its
   positions are positions[start[j] .. start[j+1]) in increasing order. count needs Vp+1 entries, token and
   positions n, start n+1. Returns the number of buckets. */
int cuda_encoder_buckets(const int32_t *inp, int n, int Vp, int32_t *count, int32_t *token, int32_t *start, int32_t *positions);
#endif
