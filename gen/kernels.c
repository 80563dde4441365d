/* kernels: the table of kernel families (gen/kernels.h). Per family: its template and the launch geometry of
   each of its kernels for a config. Geometry that depends on the tensor at hand (AdamW over one parameter
   tensor, a bias of 3C or 4C columns, the number of distinct tokens) is given here for the largest case; the
   runtime sizes those grids itself, with the block size given here. */
#include "gen/kernels.h"

#define WARP 32u

static size_t rows(const Config *cfg) { return (size_t)cfg->train.batch_size * cfg->train.seq_len; }
/* elements per 128-bit access for rows of n elements (the templates' vec_for) */
static unsigned vec_for(const Config *cfg, size_t n) {
    unsigned x128 = cfg->precision == PREC_FP32 ? 4 : 8;
    return n % x128 == 0 ? x128 : 1;
}
static unsigned min_u(unsigned a, unsigned b) { return a < b ? a : b; }
static int always(const Config *cfg) { (void)cfg; return 1; }

/* layernorm.cu: one warp per row forward; backward on a fixed grid of blocks writing partials, then a reduce */
static void layernorm_kernels(const Config *cfg, PlanModule *m) {
    unsigned bs = (unsigned)plan_tunable(m, "BLOCK_SIZE"), bwd = (unsigned)plan_tunable(m, "BWD_BLOCK_SIZE");
    unsigned fwd_grid = plan_ceil_div(rows(cfg), bs / WARP);
    plan_add_kernel(m, "layernorm_forward", fwd_grid, 1, 1, bs, 0);
    plan_add_kernel(m, "fused_residual_layernorm_forward", fwd_grid, 1, 1, bs, 0);
    plan_add_kernel(m, "layernorm_backward", min_u(plan_ceil_div(rows(cfg), bwd / WARP), 512), 1, 1, bwd, 0);
    plan_add_kernel(m, "layernorm_backward_reduce", plan_ceil_div((size_t)cfg->model.n_embd, bs), 1, 1, bs, 0);
}

/* encoder.cu: one thread per 128-bit packet; the wte backward is one block row per distinct token */
static void encoder_kernels(const Config *cfg, PlanModule *m) {
    unsigned bs = (unsigned)plan_tunable(m, "BLOCK_SIZE");
    size_t C = (size_t)cfg->model.n_embd, packets = C / vec_for(cfg, C);
    unsigned wte_block = min_u(bs, plan_ceil_div(packets, WARP) * WARP);
    plan_add_kernel(m, "encoder_forward", plan_ceil_div(rows(cfg) * packets, bs), 1, 1, bs, 0);
    plan_add_kernel(m, "encoder_backward_wpe", plan_ceil_div((size_t)cfg->train.seq_len * packets, bs), 1, 1, bs, 0);
    plan_add_kernel(m, "encoder_backward_wte", (unsigned)rows(cfg), plan_ceil_div(packets, wte_block), 1, wte_block, 0);
}

static void gelu_kernels(const Config *cfg, PlanModule *m) {
    unsigned bs = (unsigned)plan_tunable(m, "BLOCK_SIZE");
    size_t n = rows(cfg) * 4 * cfg->model.n_embd;
    unsigned grid = plan_ceil_div(n / vec_for(cfg, 4 * (size_t)cfg->model.n_embd), bs);
    plan_add_kernel(m, "gelu_forward", grid, 1, 1, bs, 0);
    plan_add_kernel(m, "gelu_backward", grid, 1, 1, bs, 0);
}

/* attention.cu: permutes one thread per packet of a head; softmax one warp per score row */
static void attention_kernels(const Config *cfg, PlanModule *m) {
    unsigned bs = (unsigned)plan_tunable(m, "BLOCK_SIZE"), sbs = (unsigned)plan_tunable(m, "SOFTMAX_BLOCK_SIZE");
    size_t hs = (size_t)cfg->model.n_embd / cfg->model.n_head;
    size_t packets = rows(cfg) * cfg->model.n_embd / vec_for(cfg, hs);
    unsigned pg = plan_ceil_div(packets, bs), sg = plan_ceil_div(rows(cfg) * cfg->model.n_head, sbs / WARP);
    plan_add_kernel(m, "attention_permute", pg, 1, 1, bs, 0);
    plan_add_kernel(m, "attention_unpermute", pg, 1, 1, bs, 0);
    plan_add_kernel(m, "attention_permute_backward", pg, 1, 1, bs, 0);
    plan_add_kernel(m, "attention_unpermute_backward", pg, 1, 1, bs, 0);
    plan_add_kernel(m, "attention_softmax_forward", sg, 1, 1, sbs, 0);
    plan_add_kernel(m, "attention_softmax_backward", sg, 1, 1, sbs, 0);
}

static void classifier_kernels(const Config *cfg, PlanModule *m) {
    plan_add_kernel(m, "classifier_forward", (unsigned)rows(cfg), 1, 1, (unsigned)plan_tunable(m, "BLOCK_SIZE"), 0);
}

/* adamw.cu: geometry for the largest tensor (wte); the runtime sizes the grid per tensor */
static void adamw_kernels(const Config *cfg, PlanModule *m) {
    unsigned bs = (unsigned)plan_tunable(m, "BLOCK_SIZE");
    size_t wte = (size_t)cfg->model.padded_vocab_size * cfg->model.n_embd;
    size_t fc = (size_t)cfg->model.n_layer * 4 * cfg->model.n_embd * cfg->model.n_embd;
    plan_add_kernel(m, "adamw_update", plan_ceil_div(wte > fc ? wte : fc, bs), 1, 1, bs, 0);
}

static void norm_kernels(const Config *cfg, PlanModule *m) {
    (void)cfg;
    plan_add_kernel(m, "global_norm_squared", (unsigned)plan_tunable(m, "GRID_SIZE"), 1, 1,
                    (unsigned)plan_tunable(m, "BLOCK_SIZE"), 0);
}

/* matmul.cu: bias gradients; geometry for the widest bias (4C), the runtime sizes it per OC */
static void matmul_kernels(const Config *cfg, PlanModule *m) {
    unsigned bs = (unsigned)plan_tunable(m, "BLOCK_SIZE"), splits = (unsigned)plan_tunable(m, "ROW_SPLITS");
    size_t oc = 4 * (size_t)cfg->model.n_embd;
    plan_add_kernel(m, "bias_backward_partial", plan_ceil_div(oc, WARP * vec_for(cfg, cfg->model.n_embd)), splits, 1, bs, 0);
    plan_add_kernel(m, "bias_backward_reduce", plan_ceil_div(oc, bs), 1, 1, bs, 0);
}

const KernelFamily kernel_families[] = {
    {"encoder", "templates/encoder.cu", encoder_kernels, always},
    {"layernorm", "templates/layernorm.cu", layernorm_kernels, always},
    {"matmul", "templates/matmul.cu", matmul_kernels, always},
    {"attention", "templates/attention.cu", attention_kernels, always},
    {"gelu", "templates/gelu.cu", gelu_kernels, always},
    {"classifier", "templates/classifier.cu", classifier_kernels, always},
    {"norm", "templates/norm.cu", norm_kernels, always},
    {"adamw", "templates/adamw.cu", adamw_kernels, always},
    {0, 0, 0, 0},
};
