/* arena: the step's GPU memory, one allocation laid out by the plan (gen/memory.h): exactly
   plan->memory.arena_bytes, each buffer at its planned offset. */
#ifndef GPT2GEN_ARENA_H
#define GPT2GEN_ARENA_H
#include "runtime/cuda/device.h"
#include "gen/plan.h"

typedef struct {
    CUdeviceptr base;
    size_t bytes;
    CUdeviceptr buf[BUF_COUNT];      /* 0 for buffers this plan does not use */
} Arena;

/* Allocates and zeroes the arena on dev; a plan that does not fit gets one message with what it needs, what
   is free, and what to change. */
int  arena_alloc(Arena *a, const Plan *plan, const CudaDevice *dev, Err *err);
void arena_free(Arena *a);
#endif
