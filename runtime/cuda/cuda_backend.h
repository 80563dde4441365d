/* cuda_backend: extras of the CUDA backend beyond runtime/backend.h (cuda_backend_create is declared there). */
#ifndef GPT2GEN_CUDA_BACKEND_H
#define GPT2GEN_CUDA_BACKEND_H
#include "runtime/backend.h"
/* GPU memory the backend holds in its arena, bytes */
size_t cuda_backend_arena_bytes(Backend *be);
#endif
