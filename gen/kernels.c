/* kernels: the table of kernel families (gen/kernels.h). Per family: its template and the launch geometry of
   each of its kernels for a config. Geometry that depends on the tensor (e.g. AdamW over one parameter
   tensor) is given here for the largest case; the runtime sizes the grid for the tensor at hand. */
#include "gen/kernels.h"

#define WARP 32u

static size_t rows(const Config *cfg) { return (size_t)cfg->train.batch_size * cfg->train.seq_len; }

/* layernorm.cu: one warp per row forward; backward on a fixed grid of blocks writing partials, then a reduce */
static unsigned layernorm_bwd_blocks(const Config *cfg, unsigned block) {
    unsigned need = plan_ceil_div(rows(cfg), block / WARP);
    return need < 512 ? need : 512;
}
static void layernorm_kernels(const Config *cfg, PlanModule *m) {
    unsigned bs = (unsigned)plan_tunable(m, "BLOCK_SIZE"), bwd = (unsigned)plan_tunable(m, "BWD_BLOCK_SIZE");
    unsigned fwd_grid = plan_ceil_div(rows(cfg), bs / WARP);
    plan_add_kernel(m, "layernorm_forward", fwd_grid, 1, 1, bs, 0);
    plan_add_kernel(m, "fused_residual_layernorm_forward", fwd_grid, 1, 1, bs, 0);
    plan_add_kernel(m, "layernorm_backward", layernorm_bwd_blocks(cfg, bwd), 1, 1, bwd, 0);
    plan_add_kernel(m, "layernorm_backward_reduce", plan_ceil_div((size_t)cfg->model.n_embd, bs), 1, 1, bs, 0);
}

static int always(const Config *cfg) { (void)cfg; return 1; }

const KernelFamily kernel_families[] = {
    {"layernorm", "templates/layernorm.cu", layernorm_kernels, always},
    {0, 0, 0, 0},
};
