/* memory: the GPU memory of one plan's step, computed once: every buffer's size, category and offset in one
   arena, and which buffers share space. The CUDA backend allocates exactly arena_bytes and points each buffer at
   arena + offset; plan.txt prints the same table. A buffer a plan does not use has 0 bytes (a forward has no
   gradients or optimizer state; a plan that runs with another plan's weights has no parameters). */
#ifndef GPT2GEN_MEMORY_H
#define GPT2GEN_MEMORY_H
#include "gen/step.h"

typedef enum { MEM_PARAMS, MEM_GRADS, MEM_OPTIMIZER, MEM_ACTIVATIONS, MEM_CACHE, MEM_SCRATCH, MEM_WORKSPACE, MEM_CATEGORIES } MemCategory;

/* Every buffer of a step. Per-layer activations of a training step hold L layers (one where recompute makes them
   scratch); a forward's hold one. */
typedef enum {
    /* parameters, gradients, optimizer state (AdamW m and v, fp32 master weights) */
    BUF_PARAMS, BUF_GRADS, BUF_ADAM_M, BUF_ADAM_V, BUF_MASTER,
    /* activations kept for the backward */
    BUF_ENCODED, BUF_LN1, BUF_LN1_MEAN, BUF_LN1_RSTD, BUF_QKV, BUF_ATTY, BUF_ATT_STATS, BUF_RESIDUAL2, BUF_LN2,
    BUF_LN2_MEAN, BUF_LN2_RSTD, BUF_FCH, BUF_FCH_GELU, BUF_RESIDUAL3, BUF_LNF, BUF_LNF_MEAN, BUF_LNF_RSTD,
    BUF_LOGITS, BUF_LOSSES,
    /* scratch of the forward and backward */
    BUF_TMP, BUF_DRESIDUAL, BUF_DLN,
    /* scratch of the layers' backward only: shares the logits buffer when it fits there */
    BUF_ATT_DDOT, BUF_DFCH, BUF_DATTY, BUF_DQKV,
    BUF_LN_SCRATCH, BUF_BIAS_SCRATCH, BUF_BIAS_SCRATCH_SIDE, BUF_NORM_PARTIALS,
    /* train.gelu = "fused" (templates/fc_gemm.cu): fcproj's weight transposed, the fc bias gradient's partials */
    BUF_FCPROJ_WT, BUF_FC_PARTIALS,
    /* the step's tokens and the encoder backward's buckets */
    BUF_INPUTS, BUF_TARGETS, BUF_BUCKET_TOKEN, BUF_BUCKET_START, BUF_POSITIONS,
    /* a decode plan's key/value cache, (L, B, NKV, cacheT, HS) each, its split attention's partial results, the
       position (one int, also in a prefill plan: 0), the rows' generator states, and the persistent decode step's
       grid barrier (two counters, Plan.decode_persistent), the rows' greedy keys (Plan.decode_greedy_fused) */
    BUF_KCACHE, BUF_VCACHE, BUF_ATT_PARTIAL, BUF_DECODE_POS, BUF_RNG, BUF_GRID_SYNC, BUF_DECODE_BEST,
    /* library workspaces */
    BUF_CUBLASLT_WORKSPACE, BUF_CUBLASLT_WORKSPACE_SIDE,   /* _SIDE: the side stream's (Plan.streams 2) */
    /* GPT-2's relatives' (docs/model.md, "Architectures"): qkv before QK-norm and its rstd per head, SwiGLU's gate and
       its gradient; with grouped-query attention (Plan.kv_expand; not a decode step) qkv with every query head's k and
       v, and its gradient, for the attention's kernels (runtime/cuda/arch.c); with RoPE, maxT rows of zeros that the
       encoder kernels add in place of wpe */
    BUF_QKV_PRE, BUF_QK_RSTD, BUF_FCG, BUF_DFCG, BUF_QKV_X, BUF_DQKV_X, BUF_WPE_ZERO,
    BUF_COUNT
} BufferId;

#define MEM_ALIGN 256
#define CUBLASLT_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct {
    const char *name;
    MemCategory category;
    size_t bytes;            /* 0: not used by this plan (e.g. no master weights) */
    size_t offset;           /* in the arena */
    int shares;              /* BUF_* whose space it lies in, or -1 */
    size_t layer_bytes;      /* bytes between layers; 0 where one buffer serves every layer */
} PlanBuffer;

typedef struct {
    PlanBuffer buffers[BUF_COUNT];
    size_t category_bytes[MEM_CATEGORIES];   /* shared buffers not counted again */
    size_t arena_bytes;                      /* what the CUDA backend allocates: the sum, aligned */
} PlanMemory;

struct Plan;
/* Lays out the buffers of plan's step; scratch sizes come from the plan's kernel geometry. */
void memory_plan(PlanMemory *mem, const struct Plan *plan);
const char *memory_category_name(MemCategory c);
#endif
