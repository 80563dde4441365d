/* memory: the step's buffers in one arena (see memory.h). The model follows docs/model.md, "The model",
   layer by layer; what the backward needs is kept per layer unless train.recompute says
   otherwise (1: the GELU output is recomputed, 2: the LayerNorm outputs too). */
#include "gen/memory.h"
#include "gen/plan.h"
#include "kernel_ids.h"
#include <string.h>

static const char *const category_names[MEM_CATEGORIES] = {"parameters", "gradients", "optimizer", "activations",
                                                           "kv cache", "scratch", "workspaces"};
const char *memory_category_name(MemCategory c) { return category_names[c]; }

static size_t align_up(size_t x) { return (x + MEM_ALIGN - 1) & ~(size_t)(MEM_ALIGN - 1); }

/* The arena as it is laid out, and the sizes of the step it is for */
typedef struct {
    PlanMemory *mem;
    size_t end;
    const Plan *plan;
    size_t x, B, T, C, NH, BT;          /* bytes of a floatX; the step's shape */
    size_t QKV, F;                      /* qkv's features, the MLP's hidden size (GPT-2: 3C, 4C) */
    int train, decode, logits;          /* a training step; a decode step; a step that computes logits */
    /* the layers whose activations a training step keeps for its backward, and the multiplier of the bytes between
       them; a forward keeps nothing for a backward: one layer's activations serve every layer (layer l reads layer
       l-1's output before it writes its own, runtime/cuda/step.c), L 1 and the stride 0 */
    size_t L, lstride;
} Layout;

/* a buffer of its own at the end of the arena */
static void place(Layout *lo, BufferId id, const char *name, MemCategory cat, size_t bytes, size_t layer_bytes) {
    PlanBuffer *b = &lo->mem->buffers[id];
    b->name = name;
    b->category = cat;
    b->bytes = bytes;
    b->shares = -1;
    b->layer_bytes = layer_bytes;
    b->offset = bytes ? align_up(lo->end) : 0;
    if (bytes) {
        lo->end = b->offset + bytes;
        lo->mem->category_bytes[cat] += bytes;
    }
}

/* The parameters, their gradients and the optimizer's state. Several ranks: the parameters and gradients padded
   to equal shards for the collectives; under ZeRO-1 a rank keeps the AdamW state and master weights of its shard
   only (common/gpt2.h, ranks_shard) */
static void place_weights(Layout *lo) {
    const StepShape *st = &lo->plan->step;
    size_t sizes[NUM_PARAM_TENSORS];
    size_t np = gpt2_param_sizes(&lo->plan->model, sizes, NULL), x = lo->x;
    int train = lo->train;
    int world = train ? st->ranks : 1;
    size_t npad = world > 1 ? ranks_padded(np, world) : np;
    size_t nopt = !train ? 0 : world > 1 && st->zero_stage == 1 ? npad / (size_t)world : np;
    place(lo, BUF_PARAMS, "params", MEM_PARAMS, st->shared_weights ? 0 : npad * x, 0);
    place(lo, BUF_GRADS, "grads", MEM_GRADS, train ? npad * x : 0, 0);
    place(lo, BUF_ADAM_M, "adam_m", MEM_OPTIMIZER, nopt * 4, 0);
    place(lo, BUF_ADAM_V, "adam_v", MEM_OPTIMIZER, nopt * 4, 0);
    place(lo, BUF_MASTER, "master_weights", MEM_OPTIMIZER, st->master_weights ? nopt * 4 : 0, 0);
}

/* The activations, layer by layer where the backward needs them */
static void place_activations(Layout *lo) {
    const Plan *plan = lo->plan;
    const GPT2Shape *s = &plan->model;
    const StepShape *st = &plan->step;
    size_t x = lo->x, B = lo->B, T = lo->T, C = lo->C, NH = lo->NH, Vp = s->padded_vocab_size, BT = lo->BT;
    int train = lo->train, decode = lo->decode, logits = lo->logits;
    size_t L = lo->L, lstride = lo->lstride;
    int rec = train ? st->recompute : 2;
    size_t QKV = lo->QKV, F = lo->F;
    /* only LayerNorm's and GELU's outputs are made again in the backward (gen/schedule.c) */
    int ln_rec = s->norm == NORM_LAYERNORM && rec >= 2, gelu_rec = s->mlp == MLP_GELU && rec >= 1;
    size_t ln_layers = ln_rec ? 1 : L, gelu_layers = gelu_rec ? 1 : L;
    /* a forward's one layer serves every layer whatever is recomputed (RMSNorm's and the other MLPs' outputs are
       kept per layer in training only) */
    size_t ln_stride = ln_rec ? 0 : lstride * BT * C * x, gelu_stride = gelu_rec ? 0 : lstride * BT * F * x;
    place(lo, BUF_ENCODED, "encoded", MEM_ACTIVATIONS, BT * C * x, 0);
    place(lo, BUF_LN1, "ln1", MEM_ACTIVATIONS, ln_layers * BT * C * x, ln_stride);
    place(lo, BUF_LN1_MEAN, "ln1_mean", MEM_ACTIVATIONS, L * BT * 4, lstride * BT * 4);
    place(lo, BUF_LN1_RSTD, "ln1_rstd", MEM_ACTIVATIONS, L * BT * 4, lstride * BT * 4);
    place(lo, BUF_QKV, "qkv", MEM_ACTIVATIONS, L * BT * QKV * x, lstride * BT * QKV * x);
    place(lo, BUF_ATTY, "atty", MEM_ACTIVATIONS, L * BT * C * x, lstride * BT * C * x);
    /* attention keeps no (B,NH,T,T) scores: only each row's log-sum-exp, for the backward */
    place(lo, BUF_ATT_STATS, "att_stats", MEM_ACTIVATIONS, L * B * NH * T * 4, lstride * B * NH * T * 4);
    place(lo, BUF_RESIDUAL2, "residual2", MEM_ACTIVATIONS, L * BT * C * x, lstride * BT * C * x);
    place(lo, BUF_LN2, "ln2", MEM_ACTIVATIONS, ln_layers * BT * C * x, ln_stride);
    place(lo, BUF_LN2_MEAN, "ln2_mean", MEM_ACTIVATIONS, L * BT * 4, lstride * BT * 4);
    place(lo, BUF_LN2_RSTD, "ln2_rstd", MEM_ACTIVATIONS, L * BT * 4, lstride * BT * 4);
    place(lo, BUF_FCH, "fch", MEM_ACTIVATIONS, L * BT * F * x, lstride * BT * F * x);
    place(lo, BUF_FCH_GELU, "fch_gelu", MEM_ACTIVATIONS, gelu_layers * BT * F * x, gelu_stride);
    place(lo, BUF_RESIDUAL3, "residual3", MEM_ACTIVATIONS, L * BT * C * x, lstride * BT * C * x);
    place(lo, BUF_LNF, "lnf", MEM_ACTIVATIONS, BT * C * x, 0);
    place(lo, BUF_LNF_MEAN, "lnf_mean", MEM_ACTIVATIONS, BT * 4, 0);
    place(lo, BUF_LNF_RSTD, "lnf_rstd", MEM_ACTIVATIONS, BT * 4, 0);
    /* the logits of one chunk of rows (runtime/cuda/classifier.c); a prefill keeps none: the decode step computes the
       prompt's last position */
    place(lo, BUF_LOGITS, "logits", MEM_ACTIVATIONS, logits ? (size_t)plan->classifier_rows * Vp * x : 0, 0);
    place(lo, BUF_LOSSES, "losses", MEM_ACTIVATIONS, logits && !decode ? BT * 4 : 0, 0);
}

/* Buffers of the layers' backward only: nothing reads them before the classifier's backward has consumed the
   dlogits, so they lie inside the logits buffer when they fit there. */
static void place_backward(Layout *lo) {
    PlanMemory *mem = lo->mem;
    size_t x = lo->x, B = lo->B, T = lo->T, C = lo->C, NH = lo->NH, BT = lo->BT, QKV = lo->QKV, F = lo->F;
    static const struct { BufferId id; const char *name; } bwd[] = {{BUF_ATT_DDOT, "att_ddot"}, {BUF_DFCH, "dfch"},
        {BUF_DATTY, "datty"}, {BUF_DQKV, "dqkv"}};
    enum { N_BWD = sizeof bwd / sizeof bwd[0] };
    size_t bwd_bytes[N_BWD] = {B * NH * T * 4, BT * F * x, BT * C * x, BT * QKV * x};
    if (!lo->train) memset(bwd_bytes, 0, sizeof bwd_bytes);
    size_t need = 0;
    for (int i = 0; i < N_BWD; i++) need = align_up(need) + bwd_bytes[i];
    if (need <= mem->buffers[BUF_LOGITS].bytes) {
        size_t off = mem->buffers[BUF_LOGITS].offset;
        for (int i = 0; i < N_BWD; i++) {
            PlanBuffer *b = &mem->buffers[bwd[i].id];
            *b = (PlanBuffer){bwd[i].name, MEM_SCRATCH, bwd_bytes[i], align_up(off), BUF_LOGITS, 0};
            off = b->offset + bwd_bytes[i];
        }
    } else {
        for (int i = 0; i < N_BWD; i++) place(lo, bwd[i].id, bwd[i].name, MEM_SCRATCH, bwd_bytes[i], 0);
    }
}

/* the norms' backward partials (BUF_LN_SCRATCH): LayerNorm's (ln bytes), or where the plan has templates/rmsnorm.cu
   the most that RMSNorm's and QK-norm's take */
static size_t norm_scratch(const Plan *plan, size_t ln) {
    const PlanKernel *rms = &plan->kernels[K_RMSNORM_BACKWARD], *qk = &plan->kernels[K_QK_NORM_BACKWARD];
    if (rms->family < 0) return ln;
    size_t r = (size_t)rms->dims.grid[0] * plan->model.n_embd * 4, q = (size_t)qk->dims.grid[0] * 2 * gpt2_head_size(&plan->model) * 4;
    r = r > q ? r : q;
    return r > ln ? r : ln;
}

/* The kernels' scratch buffers of a training step, and the batch */
static void place_scratch(Layout *lo) {
    const Plan *plan = lo->plan;
    PlanMemory *mem = lo->mem;
    size_t x = lo->x, C = lo->C, BT = lo->BT;
    int train = lo->train, decode = lo->decode, logits = lo->logits;
    const LaunchDims *ln_bwd = &plan->kernels[K_LAYERNORM_BACKWARD].dims;
    const LaunchDims *bias = &plan->kernels[K_BIAS_BACKWARD_PARTIAL].dims;   /* grid[1]: the row splits */
    const LaunchDims *norm = &plan->kernels[K_GLOBAL_NORM_SQUARED].dims;
    place(lo, BUF_LN_SCRATCH, "ln_scratch", MEM_SCRATCH, train ? norm_scratch(plan, (size_t)ln_bwd->grid[0] * 2 * C * 4) : 0, 0);
    size_t widest = 4 * C > lo->F ? 4 * C : lo->F;   /* the widest bias gradient: 4C, or a wider MLP's */
    place(lo, BUF_BIAS_SCRATCH, "bias_scratch", MEM_SCRATCH, train ? (size_t)bias->grid[1] * widest * 4 : 0, 0);
    /* the side stream's own bias scratch and cuBLASLt workspace (Plan.streams 2: runtime/cuda/step.c) */
    int side = train && plan->streams == 2;
    place(lo, BUF_BIAS_SCRATCH_SIDE, "bias_scratch_side", MEM_SCRATCH, side ? mem->buffers[BUF_BIAS_SCRATCH].bytes : 0, 0);
    place(lo, BUF_NORM_PARTIALS, "norm_partials", MEM_SCRATCH, train ? (size_t)norm->grid[0] * 4 : 0, 0);
    int fused = train && gelu_fused(plan->gelu);
    place(lo, BUF_FCPROJ_WT, "fcproj_wt", MEM_SCRATCH, fused ? 4 * C * C * x : 0, 0);
    place(lo, BUF_FC_PARTIALS, "fc_partials", MEM_SCRATCH, fused ? (BT + FC_GEMM_TILE_ROWS - 1) / FC_GEMM_TILE_ROWS * 4 * C * 4 : 0, 0);

    place(lo, BUF_INPUTS, "inputs", MEM_SCRATCH, BT * 4, 0);
    place(lo, BUF_TARGETS, "targets", MEM_SCRATCH, logits && !decode ? BT * 4 : 0, 0);
    /* the encoder backward's buckets of positions by token */
    place(lo, BUF_BUCKET_TOKEN, "bucket_token", MEM_SCRATCH, train ? BT * 4 : 0, 0);
    place(lo, BUF_BUCKET_START, "bucket_start", MEM_SCRATCH, train ? (BT + 1) * 4 : 0, 0);
    place(lo, BUF_POSITIONS, "positions", MEM_SCRATCH, train ? BT * 4 : 0, 0);
}

/* The decode step's key/value cache and its scratch, and the cuBLASLt workspaces */
static void place_decode(Layout *lo) {
    const Plan *plan = lo->plan;
    const GPT2Shape *s = &plan->model;
    const StepShape *st = &plan->step;
    size_t x = lo->x, B = lo->B, C = lo->C, NH = lo->NH;
    int decode = lo->decode, side = lo->train && plan->streams == 2;
    /* the cache's NKV heads (fewer than NH with grouped-query attention): (L, B, NKV, cacheT, HS) */
    size_t cache = decode ? (size_t)s->n_layer * B * st->cache_T * gpt2_kv_heads(s) * gpt2_head_size(s) * x : 0;
    const LaunchDims *att = &plan->kernels[K_DECODE_ATTENTION].dims;   /* (KV_SPLITS, NH, B) */
    place(lo, BUF_KCACHE, "kcache", MEM_CACHE, cache, cache / (size_t)s->n_layer);
    place(lo, BUF_VCACHE, "vcache", MEM_CACHE, cache, cache / (size_t)s->n_layer);
    /* each split's (m, l, acc[HS]), then a count of arrived splits per row and head (templates/decode.cu) */
    place(lo, BUF_ATT_PARTIAL, "att_partial", MEM_SCRATCH, decode ? ((size_t)att->grid[0] * (C / NH + 2) + 1) * NH * B * 4 : 0, 0);
    place(lo, BUF_DECODE_POS, "decode_pos", MEM_SCRATCH, decode || st->fills_cache ? 4 : 0, 0);
    place(lo, BUF_RNG, "rng", MEM_SCRATCH, decode ? B * 8 : 0, 0);
    place(lo, BUF_GRID_SYNC, "grid_sync", MEM_SCRATCH, plan->decode_persistent ? 8 : 0, 0);
    place(lo, BUF_DECODE_BEST, "decode_best", MEM_SCRATCH, plan->decode_greedy_fused ? B * 8 : 0, 0);
    place(lo, BUF_CUBLASLT_WORKSPACE, "cublaslt_workspace", MEM_WORKSPACE, CUBLASLT_WORKSPACE_BYTES, 0);
    place(lo, BUF_CUBLASLT_WORKSPACE_SIDE, "cublaslt_workspace_side", MEM_WORKSPACE, side ? CUBLASLT_WORKSPACE_BYTES : 0, 0);
}

/* GPT-2's relatives' buffers (none for GPT-2): qkv before QK-norm and the heads' rstd, per layer where the backward
   reads them; SwiGLU's gate (fcg) and its gradient; with grouped-query attention on cuDNN (Plan.kv_expand), qkv with
   every query head's k and v (a layer at a time: the backward makes it again) and its gradient; with RoPE, zeros in
   place of wpe */
static void place_arch(Layout *lo) {
    const Plan *plan = lo->plan;
    const GPT2Shape *s = &plan->model;
    size_t x = lo->x, BT = lo->BT, C = lo->C, QKV = lo->QKV, F = lo->F;
    size_t L = lo->L, lstride = lo->lstride, heads = (size_t)s->n_head + gpt2_kv_heads(s);
    int qk = s->qk_norm, swiglu = s->mlp == MLP_SWIGLU, x_heads = plan->kv_expand;
    place(lo, BUF_QKV_PRE, "qkv_pre", MEM_ACTIVATIONS, qk ? L * BT * QKV * x : 0, lstride * BT * QKV * x);
    place(lo, BUF_QK_RSTD, "qk_rstd", MEM_ACTIVATIONS, qk ? L * BT * heads * 4 : 0, lstride * BT * heads * 4);
    place(lo, BUF_FCG, "fcg", MEM_ACTIVATIONS, swiglu ? L * BT * F * x : 0, lstride * BT * F * x);
    place(lo, BUF_DFCG, "dfcg", MEM_SCRATCH, swiglu && lo->train ? BT * F * x : 0, 0);
    place(lo, BUF_QKV_X, "qkv_x", MEM_SCRATCH, x_heads ? BT * 3 * C * x : 0, 0);
    place(lo, BUF_DQKV_X, "dqkv_x", MEM_SCRATCH, x_heads && lo->train ? BT * 3 * C * x : 0, 0);
    /* never written: the arena starts zeroed (runtime/cuda/arena.c) */
    place(lo, BUF_WPE_ZERO, "wpe_zero", MEM_SCRATCH, s->position == POS_ROPE ? (size_t)s->max_seq_len * C * x : 0, 0);
}

void memory_plan(PlanMemory *mem, const Plan *plan) {
    memset(mem, 0, sizeof *mem);
    const StepShape *st = &plan->step;
    size_t B = st->B, T = st->T;
    Layout lo = {mem, 0, plan, st->precision == PREC_FP32 ? 4 : 2, B, T, plan->model.n_embd, plan->model.n_head, B * T,
                 (size_t)gpt2_qkv_width(&plan->model), (size_t)gpt2_ffn(&plan->model), st->kind == STEP_TRAIN,
                 st->kind == STEP_DECODE, !st->fills_cache, 1, 0};
    if (lo.train) {
        lo.L = (size_t)plan->model.n_layer;
        lo.lstride = 1;
    }
    place_weights(&lo);
    place_activations(&lo);
    size_t x = lo.x, C = lo.C, BT = lo.BT;
    int train = lo.train;
    place(&lo, BUF_TMP, "tmp", MEM_SCRATCH, BT * C * x, 0);
    place(&lo, BUF_DRESIDUAL, "dresidual", MEM_SCRATCH, train ? BT * C * x : 0, 0);
    place(&lo, BUF_DLN, "dln", MEM_SCRATCH, train ? BT * C * x : 0, 0);
    place_backward(&lo);
    place_scratch(&lo);
    place_decode(&lo);
    place_arch(&lo);
    mem->arena_bytes = align_up(lo.end);
}
