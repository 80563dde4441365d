/* kernel_rules: the rules gen/kernels.c's declarations name, family by family: each kernel's launch geometry, the
   derived constants, the checks of a family's tunables against the shape, and the defaults a shape changes. They
   read the shape and the module's tunables from a KernelEnv; a geometry rule's size argument is the value of the
   kernel's size parameter. */
#include "gen/kernel_rules.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define WARP 32

int kernel_vec(int x128, long long n) { return n % x128 == 0 ? x128 : 1; }

static long long rows(const KernelEnv *e) { return e->B * e->T; }
static long long min_ll(long long a, long long b) { return a < b ? a : b; }
/* __launch_bounds__' second argument for `threads` a multiprocessor in blocks of `block`: at least one block */
static long long blocks_for(long long threads, int block) { return threads > block ? threads / block : 1; }
/* grid sizes beyond what CUDA allows (2^31-1 in x, 65535 in y) saturate, so that kernel_dims_valid sees them */
static unsigned grid_size(long long g) { return g < 0 || g > UINT32_MAX ? UINT32_MAX : (unsigned)g; }
static LaunchDims dims(long long gx, long long gy, int block) {
    LaunchDims d = {{grid_size(gx), grid_size(gy), 1}, (unsigned)block, 0};
    return d;
}

const char *kernel_dims_valid(const LaunchDims *d) {
    if (d->grid[0] < 1 || d->grid[0] > 2147483647u) return "grid.x outside 1..2^31-1";
    if (d->grid[1] < 1 || d->grid[1] > 65535 || d->grid[2] < 1 || d->grid[2] > 65535) return "grid.y or grid.z outside 1..65535";
    if (d->block < 1 || d->block > 1024) return "block outside 1..1024";
    if (d->smem > KERNEL_MAX_SMEM) return "more dynamic shared memory than a block can have";
    return NULL;
}

/* ---- encoder.cu ---- */
static long long enc_packets(const KernelEnv *e) { return e->C / kernel_vec(e->x128, e->C); }
LaunchDims kernel_enc_forward(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e) * enc_packets(e), e->tun[ENC_BLOCK]), 1, e->tun[ENC_BLOCK]);
}
LaunchDims kernel_enc_wpe(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(e->T * enc_packets(e), e->tun[ENC_BLOCK]), 1, e->tun[ENC_BLOCK]);
}
LaunchDims kernel_enc_wte(const KernelEnv *e, long long n_buckets) {
    long long block = min_ll(e->tun[ENC_BLOCK], ceil_div_u(enc_packets(e), WARP) * WARP);
    return dims(n_buckets, ceil_div_u(enc_packets(e), block), (int)block);
}

/* ---- layernorm.cu ---- */
/* a lane's values of a row (the template's VALUES) */
static long long ln_values(const KernelEnv *e) {
    long long vec = kernel_vec(e->x128, e->C);
    return ceil_div_u(e->C / vec, WARP) * vec;
}
/* layernorm_backward's bytes of dynamic shared memory (templates/layernorm.cu). With BWD_SUMS 2, each warp's
   weight-gradient sums: 2 * VALUES * 32 floats a warp. With BWD_SUMS 1, two stages a warp of a row's dout, inp and
   dinp, where a warp has two rows or more (else there is nothing to fetch ahead), the rows are whole 16-byte
   packets of 16-bit values, a lane's share of a row is at most 24 values (the template's HOLD: C <= 768) and the
   stages fit beside the block's 2*C floats of partial sums; else 0: the rows are read straight. Where they were
   measured, on the H200 in bf16: at gpt2-124M the stages took the backward from 4.53 to 4.03 ms a micro-step, at
   gpt2-350M (C = 1024) from 7.95 to 8.95 (202 registers, one block an SM); fp32 (twice the bytes a stage) was not
   measured */
static long long ln_sums_bytes(const KernelEnv *e) { return e->tun[LN_BWD_BLOCK] / WARP * 2 * ln_values(e) * WARP * 4; }
void kernel_ln_derive(KernelEnv *e) {
    long long warps = e->tun[LN_BWD_BLOCK] / WARP;
    e->derived[LN_BWD_BLOCKS] = min_ll(ceil_div_u(rows(e), warps), 512);
    long long stages = warps * 2 * 3 * e->C * (16 / e->x128);
    int staged = rows(e) >= 2 * e->derived[LN_BWD_BLOCKS] * warps && e->x128 == 8 &&
                 kernel_vec(e->x128, e->C) == e->x128 && ln_values(e) <= 24 && stages + e->C * 2 * 4 <= KERNEL_MAX_SMEM;
    e->derived[LN_BWD_SMEM] = e->tun[LN_BWD_SUMS] == 2 ? ln_sums_bytes(e) : staged ? stages : 0;
    /* __launch_bounds__' second argument: the blocks that make BWD_SM_THREADS, at least one */
    e->derived[LN_BWD_MINB] = blocks_for(e->tun[LN_BWD_SM_THREADS], e->tun[LN_BWD_BLOCK]);
}
const char *kernel_ln_check(const KernelEnv *e, char *why, size_t n) {
    if (e->tun[LN_BWD_SUMS] == 2) {
        if (ln_sums_bytes(e) <= KERNEL_MAX_SMEM) return NULL;
        snprintf(why, n, "layernorm_backward with BWD_SUMS=2 keeps each warp's weight-gradient sums in shared memory: %lld "
                 "bytes at C=%lld and BWD_BLOCK_SIZE=%d, more than %d; use BWD_SUMS=1 or a smaller BWD_BLOCK_SIZE",
                 ln_sums_bytes(e), e->C, e->tun[LN_BWD_BLOCK], KERNEL_MAX_SMEM);
        return why;
    }
    if (e->C * 2 * 4 <= 48 * 1024) return NULL;
    snprintf(why, n, "layernorm_backward keeps 2*C floats in shared memory: C=%lld needs %lld bytes, more than 48 KiB",
             e->C, e->C * 8);
    return why;
}
/* BWD_SUMS 2 where a lane's share of a row is more than 24 values (C > 768 in 16 bits): the weight-gradient sums
   leave the registers to the row (gpt2-350M: 128 registers; gpt2-1558M: 165 against 177 with the sums in registers).
   Else, in 16 bits, backward blocks of 128 threads, 512 threads a multiprocessor (four blocks, 128 registers a
   thread: the 512 blocks in one wave): `gpt2gen tune` at gpt2-124M on the H200, 330.8 us a workload at the declared
   defaults (256 threads, two blocks a multiprocessor by ptxas' own 99 registers, two waves) against 276.5 (1.20x),
   and 291.1 at 256 threads held to 512 a multiprocessor; the best of every block size at 512
   (docs/kernels-and-tuning.md). At gpt2-350M's BWD_SUMS 2 the declared defaults are within 1% of the best. */
void kernel_ln_shape_defaults(const KernelEnv *e, int *tun) {
    if (ln_values(e) > 24) {
        tun[LN_BWD_SUMS] = 2;
    } else if (e->x128 == 8) {
        tun[LN_BWD_BLOCK] = 128;
        tun[LN_BWD_SM_THREADS] = 512;
    }
}
LaunchDims kernel_ln_forward(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e), e->tun[LN_BLOCK] / WARP), 1, e->tun[LN_BLOCK]);
}
LaunchDims kernel_ln_backward(const KernelEnv *e, long long n) {
    (void)n;
    LaunchDims d = dims(e->derived[LN_BWD_BLOCKS], 1, e->tun[LN_BWD_BLOCK]);
    d.smem = (unsigned)e->derived[LN_BWD_SMEM];
    return d;
}
LaunchDims kernel_ln_reduce(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(e->C, WARP), 2, e->tun[LN_BLOCK]);
}

/* ---- bias.cu ---- */
/* the partial sums' blocks a multiprocessor holds at once: 1024 threads (at most 64 registers a thread), so that
   enough rows' loads are in flight (ptxas' own choice, 96 registers at 256 threads, held 512 threads: 2.45 TB/s in
   the GELU backward at gpt2-350M, 3.53 at 1024; docs/kernels-and-tuning.md, "LayerNorm and the bias gradients") */
void kernel_bias_derive(KernelEnv *e) { e->derived[BIAS_MIN_BLOCKS] = blocks_for(1024, e->tun[BIAS_BLOCK]); }
LaunchDims kernel_bias_partial(const KernelEnv *e, long long OC) {
    return dims(ceil_div_u(OC, WARP * kernel_vec(e->x128, e->C)), e->tun[BIAS_ROW_SPLITS], e->tun[BIAS_BLOCK]);
}
LaunchDims kernel_bias_reduce(const KernelEnv *e, long long OC) {
    return dims(ceil_div_u(OC, e->tun[BIAS_BLOCK]), 1, e->tun[BIAS_BLOCK]);
}

/* ---- attention.cu ---- */
void kernel_att_derive(KernelEnv *e) {   /* a warp per Q_WARP_ROWS rows of a forward tile, per BWD_WARP_ROWS of a backward one */
    e->derived[ATT_FWD_THREADS] = e->tun[ATT_Q_TILE] / e->tun[ATT_Q_WARP_ROWS] * WARP;
    e->derived[ATT_BWD_THREADS] = e->tun[ATT_BWD_TILE] / e->tun[ATT_BWD_WARP_ROWS] * WARP;
    /* wgmma's dK/dV kernel takes 204 registers (templates/attention.cu): two blocks of a warpgroup a multiprocessor
       (dQ's, in 147, may have three) */
    e->derived[ATT_BWD_BLOCKS] = e->tun[ATT_BWD_SM] == 90 ? 2 : 1;
}
/* dynamic shared memory of the tensor-core kernels (the fp32 ones use none): tiles of rows of HS + 8 elements */
static long long att_row_bytes(const KernelEnv *e) { return e->x128 == 4 ? 0 : (e->HS + 8) * 2; }
static long long att_fwd_smem(const KernelEnv *e) {   /* two stages of K and V tiles; Q is staged in the second */
    if (e->x128 != 4 && e->tun[ATT_FWD_SM] == 90)   /* wgmma: Q, three stages of K and V; swizzled 64-element rows, 1 KiB to align */
        return (e->tun[ATT_Q_TILE] + 6 * e->tun[ATT_KV_TILE]) * 64 * 2 + 1024;
    long long kv = 2 * e->tun[ATT_KV_TILE], q = e->tun[ATT_Q_TILE];
    return (kv + (q > kv ? q : kv)) * att_row_bytes(e);
}
static long long att_bwd_smem(const KernelEnv *e) {
    if (e->x128 == 4) return 0;
    if (e->tun[ATT_BWD_SM] == 90)   /* 64-element rows, no padding (the swizzle spreads them), 1 KiB to align the tiles;
                                       the own tiles, three stages of two streamed ones and of two floats a row */
        return (2 + 6) * 64 * 64 * 2 + 6 * 64 * 4 + 1024;
    /* the block's own rows of two tensors, two stages of the streamed rows of two more and of two floats per row */
    return (2 * e->tun[ATT_BWD_TILE] + 4 * e->tun[ATT_BWD_INNER]) * att_row_bytes(e) + 4 * e->tun[ATT_BWD_INNER] * 4;
}
const char *kernel_att_check(const KernelEnv *e, char *why, size_t n) {
    if (e->tun[ATT_Q_TILE] % e->tun[ATT_Q_WARP_ROWS])
        snprintf(why, n, "Q_TILE (%d) must be a multiple of Q_WARP_ROWS (%d)", e->tun[ATT_Q_TILE], e->tun[ATT_Q_WARP_ROWS]);
    else if (e->tun[ATT_Q_TILE] > 128 && e->tun[ATT_FWD_SM] != 90)
        snprintf(why, n, "Q_TILE %d: more than 128 rows only with FWD_SM 90 (wgmma)", e->tun[ATT_Q_TILE]);
    else if (e->tun[ATT_BWD_TILE] % e->tun[ATT_BWD_WARP_ROWS])
        snprintf(why, n, "BWD_TILE (%d) must be a multiple of BWD_WARP_ROWS (%d)", e->tun[ATT_BWD_TILE],
                 e->tun[ATT_BWD_WARP_ROWS]);
    else if (e->x128 != 4 && e->tun[ATT_BWD_WARP_ROWS] > 16 && (e->HS > 64 || e->tun[ATT_BWD_INNER] > 32))
        /* a warp's dK and dV (or dQ) accumulators, scores and fragments: 32 rows fit the registers only then */
        snprintf(why, n, "BWD_WARP_ROWS %d needs a head size of at most 64 and BWD_INNER at most 32 "
                 "(head size %lld, BWD_INNER %d)", e->tun[ATT_BWD_WARP_ROWS], e->HS, e->tun[ATT_BWD_INNER]);
    else if (e->x128 != 4 && (e->HS % 16 || e->HS > 128))
        snprintf(why, n, "the tensor-core attention needs a head size (n_embd / n_head) that is a multiple of 16, "
                 "at most 128: it is %lld", e->HS);
    else if (e->tun[ATT_FWD_SM] == 90 && (e->x128 == 4 || e->HS != 64 || e->tun[ATT_KV_TILE] % 64 ||
                                          e->tun[ATT_Q_TILE] % 64 || e->tun[ATT_Q_WARP_ROWS] != 16))
        snprintf(why, n, "FWD_SM 90 (Hopper's wgmma) needs bf16 or fp16, head size 64, KV_TILE 64 or 128, Q_TILE a multiple "
                 "of 64 and Q_WARP_ROWS 16 (head size %lld, KV_TILE %d, Q_TILE %d, Q_WARP_ROWS %d)", e->HS,
                 e->tun[ATT_KV_TILE], e->tun[ATT_Q_TILE], e->tun[ATT_Q_WARP_ROWS]);
    else if (e->tun[ATT_BWD_SM] == 90 && (e->x128 == 4 || e->HS != 64 || e->tun[ATT_BWD_INNER] != 64 ||
                                          e->tun[ATT_BWD_TILE] != 64 || e->tun[ATT_BWD_WARP_ROWS] != 16))
        /* a warpgroup's wgmma products are 64 x 64 x 16: 64 own rows (a warpgroup a block), 64 streamed ones, the
           head in four k-steps */
        snprintf(why, n, "BWD_SM 90 (Hopper's wgmma) needs bf16 or fp16, head size 64, BWD_INNER 64, BWD_TILE 64 and "
                 "BWD_WARP_ROWS 16 (head size %lld, BWD_INNER %d, BWD_TILE %d, BWD_WARP_ROWS %d)", e->HS,
                 e->tun[ATT_BWD_INNER], e->tun[ATT_BWD_TILE], e->tun[ATT_BWD_WARP_ROWS]);
    else if (e->HS > 1024)
        snprintf(why, n, "the attention keeps a head in registers: head size %lld is more than 1024", e->HS);
    else if (att_fwd_smem(e) > KERNEL_MAX_SMEM || att_bwd_smem(e) > KERNEL_MAX_SMEM)
        snprintf(why, n, "the attention tiles need %lld and %lld bytes of shared memory, more than %d",
                 att_fwd_smem(e), att_bwd_smem(e), KERNEL_MAX_SMEM);
    else return NULL;
    return why;
}
/* Measured at gpt2-124M's shape (docs/kernels-and-tuning.md): warps of 32 rows and tiles of 128 rows, where
   the registers hold a warp's 32 rows (tensor cores, head size at most 64) and T fills such tiles. On Hopper at head
   size 64 both directions on wgmma (B=64 T=1024 NH=12, bf16): the forward with two warpgroups a block and 64-row key
   tiles, 0.356 ms (one warpgroup 0.377, 128-row key tiles 0.411) against mma.sync's 0.485; the backward (64-row
   tiles, pipelined) 1.011 ms against 1.583. Not where the config's tiles are ones wgmma's kernels do not take: those
   stay, on mma.sync. */
void kernel_att_shape_defaults(const KernelEnv *e, int *tun) {
    if (e->x128 == 4 || e->HS > 64 || e->T < 128) return;
    const int hopper = e->sm == 90 && e->HS == 64;
    if (hopper && tun[ATT_FWD_SM] == 80 && tun[ATT_KV_TILE] == 64 && tun[ATT_Q_TILE] % 64 == 0 && tun[ATT_Q_WARP_ROWS] == 16) {
        tun[ATT_FWD_SM] = 90;
        tun[ATT_Q_TILE] = 128;
    }
    if (hopper && tun[ATT_BWD_SM] == 80 && tun[ATT_BWD_INNER] == 64 && tun[ATT_BWD_TILE] == 64 &&
        tun[ATT_BWD_WARP_ROWS] == 16)
        tun[ATT_BWD_SM] = 90;
    if (tun[ATT_FWD_SM] != 90) {
        tun[ATT_Q_TILE] = 128;
        tun[ATT_Q_WARP_ROWS] = 32;
    }
    if (tun[ATT_BWD_SM] == 90) return;
    tun[ATT_BWD_TILE] = 128;
    tun[ATT_BWD_WARP_ROWS] = 32;
    tun[ATT_BWD_INNER] = 32;
}
/* a block per (tile, head, batch row): heads are the query heads, or for the dK/dV kernel the key/value heads (each
   walks its group's query heads: grouped-query attention read as it is, templates/attention.cu) */
static LaunchDims att_tiles(const KernelEnv *e, int tile, long long heads, long long threads, long long smem) {
    LaunchDims d = dims(ceil_div_u(e->T, tile), heads, (int)threads);
    d.grid[2] = grid_size(e->B);
    d.smem = (unsigned)smem;
    return d;
}
LaunchDims kernel_att_forward(const KernelEnv *e, long long n) {
    (void)n;
    return att_tiles(e, e->tun[ATT_Q_TILE], e->NH, e->derived[ATT_FWD_THREADS], att_fwd_smem(e));
}
LaunchDims kernel_att_backward(const KernelEnv *e, long long n) {
    (void)n;
    return att_tiles(e, e->tun[ATT_BWD_TILE], e->NH, e->derived[ATT_BWD_THREADS], att_bwd_smem(e));
}
LaunchDims kernel_att_dkdv(const KernelEnv *e, long long n) {
    (void)n;
    return att_tiles(e, e->tun[ATT_BWD_TILE], e->NKV, e->derived[ATT_BWD_THREADS], att_bwd_smem(e));
}

/* ---- gelu.cu ---- */
LaunchDims kernel_gelu_dims(const KernelEnv *e, long long n) {
    return dims(ceil_div_u(n / kernel_vec(e->x128, 4 * e->C), e->tun[GELU_BLOCK]), 1, e->tun[GELU_BLOCK]);
}

/* ---- fc_gemm.cu ---- */
void kernel_fcg_derive(KernelEnv *e) {
    e->derived[FCG_THREADS] = 128LL * e->tun[FCG_WARPGROUPS];
    e->derived[FCG_MIN_BLOCKS] = e->tun[FCG_SM_BLOCKS];
    e->derived[FCG_CLUSTER_BLOCKS] = e->tun[FCG_CLUSTER];
    e->derived[FCG_M_TILES] = ceil_div_u(rows(e), FC_GEMM_TILE_ROWS);
}
/* the tiles, with CLUSTER > 1 counted in whole groups of CLUSTER row tiles (a cluster's blocks share B's tiles) */
static long long fcg_tiles(const KernelEnv *e) {
    return ceil_div_u(e->derived[FCG_M_TILES], e->tun[FCG_CLUSTER]) * e->tun[FCG_CLUSTER] * ceil_div_u(4 * e->C, e->tun[FCG_TILE_N]);
}
static long long fcg_stages_smem(const KernelEnv *e) { return (long long)e->tun[FCG_STAGES] * (FC_GEMM_TILE_ROWS + e->tun[FCG_TILE_N]) * 64 * 2; }
/* an epilogue's tiles, 16-bit (EPI_BYTES 16): the forward's two of 128 rows x TILE_N columns (WARPGROUPS 3: x 128, in
   passes; TILE_WARPGROUPS 1: x 64), the backward's one of 128 x TILE_N, for each epilogue that may run at once (two
   with TILE_WARPGROUPS 1); and the backward's column sums (8 warps) (templates/fc_gemm.cu) */
static long long fcg_epi_smem(const KernelEnv *e) {
    int pingpong = e->tun[FCG_TILE_WARPGROUPS] == 1;
    long long cols = pingpong ? 64 : e->tun[FCG_WARPGROUPS] == 3 ? 128 : e->tun[FCG_TILE_N];
    long long tiles = 2 * cols > e->tun[FCG_TILE_N] ? 2 * cols : e->tun[FCG_TILE_N];
    return (e->tun[FCG_EPI_BYTES] == 16 ? (pingpong ? 2 : 1) * FC_GEMM_TILE_ROWS * tiles * 2 : 0) + 8LL * e->tun[FCG_TILE_N] * 4;
}
/* STAGES stages of 64 columns of the block's rows of A and B, 16-bit; the epilogue's after them where the producer
   loads the next tile's stages during it (WARPGROUPS 3), else where the stages were; 1 KiB to align them */
static long long fcg_smem(const KernelEnv *e) {
    long long st = fcg_stages_smem(e), epi = fcg_epi_smem(e);
    return (e->tun[FCG_WARPGROUPS] == 3 ? st + epi : st > epi ? st : epi) + 1024;
}
const char *kernel_fcg_check(const KernelEnv *e, char *why, size_t n) {
    if (e->tun[FCG_EPI_BYTES] != 4 && e->tun[FCG_EPI_BYTES] != 16) {
        snprintf(why, n, "fc_gemm: EPI_BYTES is 4 or 16, not %d", e->tun[FCG_EPI_BYTES]);
        return why;
    }
    if (e->tun[FCG_WARPGROUPS] == 3 && (e->tun[FCG_SM_BLOCKS] != 1 || e->tun[FCG_EPI_BYTES] != 16)) {
        /* 384 threads hold at most 168 registers a thread (two blocks would leave 85); the epilogue's tiles leave by
           TMA stores from shared memory */
        snprintf(why, n, "fc_gemm: WARPGROUPS 3 (a producer warpgroup with TMA) takes SM_BLOCKS 1 and EPI_BYTES 16");
        return why;
    }
    if (e->tun[FCG_CLUSTER] > 1 && (e->tun[FCG_WARPGROUPS] != 3 || e->tun[FCG_TILE_N] != 256)) {
        /* each block of a pair multicasts one 128-row box of B's tile to both */
        snprintf(why, n, "fc_gemm: CLUSTER 2 (B's tiles multicast by TMA to a pair of blocks) takes WARPGROUPS 3 and TILE_N 256");
        return why;
    }
    if (e->tun[FCG_TILE_WARPGROUPS] == 1 &&
        (e->tun[FCG_WARPGROUPS] != 3 || e->tun[FCG_TILE_N] != 128 || e->tun[FCG_CLUSTER] != 1)) {
        /* each consumer warpgroup holds a whole 128-row tile's accumulators: 128 a thread at TILE_N 128 */
        snprintf(why, n, "fc_gemm: TILE_WARPGROUPS 1 (each consumer warpgroup a tile of its own) takes WARPGROUPS 3, "
                 "TILE_N 128 and CLUSTER 1");
        return why;
    }
    /* a multiprocessor has 228 KiB of shared memory, of which each block takes 1 KiB for the system */
    if ((fcg_smem(e) + 1024) * e->tun[FCG_SM_BLOCKS] <= 228 * 1024 && fcg_smem(e) <= KERNEL_MAX_SMEM) return NULL;
    snprintf(why, n, "fc_gemm: %d stages of TILE_N %d take %lld bytes of shared memory a block, and %d blocks of them "
             "do not fit a multiprocessor (228 KiB); use fewer STAGES or SM_BLOCKS", e->tun[FCG_STAGES],
             e->tun[FCG_TILE_N], fcg_smem(e), e->tun[FCG_SM_BLOCKS]);
    return why;
}
LaunchDims kernel_fcg_gemm(const KernelEnv *e, long long n) {
    (void)n;
    long long tiles = fcg_tiles(e), blocks = e->tun[FCG_WARPGROUPS] == 3 ? min_ll(tiles, e->tun[FCG_GRID]) : tiles;
    LaunchDims d = dims(blocks, 1, (int)e->derived[FCG_THREADS]);
    d.smem = (unsigned)fcg_smem(e);
    return d;
}
LaunchDims kernel_fcg_transpose(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(4 * e->C, 32), ceil_div_u(e->C, 32), 256);
}
LaunchDims kernel_fcg_reduce(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(4 * e->C, 256), 1, 256);
}
int fc_gemm_fits(const GPT2Shape *model, const StepShape *step, int sm) {
    (void)model;   /* any n_embd the config accepts (a multiple of 32): k and 4C come in whole 16-byte chunks */
    return sm == 90 && step->precision != PREC_FP32;
}

/* ---- classifier.cu ---- */
/* The rows of logits per chunk (runtime/cuda/classifier.c): the largest divisor of B*T not above CHUNK_ROWS, so that
   every chunk is one shape of the classifier's matmuls. */
/* ROW_BYTES: with SECOND_PASS 2, the row's packets that hold a real column (REAL_PACKETS in the template), where two
   blocks of them fit a multiprocessor's 228 KiB with the kilobyte each block reserves: GPT-2's vocabulary in 16 bits
   (100,528 bytes), not in fp32 (201,040). Two blocks, so that one block's loads overlap another's writes; else 0. */
void kernel_cls_derive(KernelEnv *e) {
    long long r = min_ll(e->tun[CLS_CHUNK_ROWS], rows(e));
    while (rows(e) % r) r--;
    e->derived[CLS_CHUNK] = r;
    const long long vec = kernel_vec(e->x128, e->Vp), packet = 16 / e->x128 * vec;   /* bytes */
    const long long bytes = ceil_div_u(e->V, vec) * packet;
    const long long statics = e->tun[CLS_BLOCK] / WARP * 8;   /* s_m and s_s */
    e->derived[CLS_ROW_BYTES] = e->tun[CLS_SECOND_PASS] == 2 && 2 * (bytes + statics + 1024) <= 228 * 1024 ? bytes : 0;
}
LaunchDims kernel_cls_dims(const KernelEnv *e, long long n) {
    (void)n;
    LaunchDims d = dims(e->derived[CLS_CHUNK], 1, e->tun[CLS_BLOCK]);
    d.smem = (unsigned)e->derived[CLS_ROW_BYTES];
    return d;
}

/* ---- grad_norm.cu ---- */
LaunchDims kernel_norm_dims(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->tun[NORM_GRID], 1, e->tun[NORM_BLOCK]);
}

/* ---- adamw.cu ---- */
LaunchDims kernel_adamw_dims(const KernelEnv *e, long long n) {
    return dims(ceil_div_u(n, e->tun[ADAMW_BLOCK]), 1, e->tun[ADAMW_BLOCK]);
}

/* ---- decode.cu ---- */
void kernel_dec_derive(KernelEnv *e) { e->derived[DEC_KV_SPLITS] = ceil_div_u(e->cacheT, e->tun[DEC_KV_CHUNK]); }
const char *kernel_dec_check(const KernelEnv *e, char *why, size_t n) {
    if (e->HS > e->tun[DEC_ATT_THREADS])
        snprintf(why, n, "decode_attention's combine has a thread per channel of a head: ATT_THREADS (%d) must be at least "
                 "the head size %lld", e->tun[DEC_ATT_THREADS], e->HS);
    else return NULL;
    return why;
}
static long long dec_packets(const KernelEnv *e) { return e->C / kernel_vec(e->x128, e->C); }
LaunchDims kernel_dec_embed(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(e->B * dec_packets(e), e->tun[DEC_BLOCK]), 1, e->tun[DEC_BLOCK]);
}
/* a thread per packet of k's NKV heads (and of v's): C / VEC_C packets where NKV = NH */
LaunchDims kernel_dec_append(const KernelEnv *e, long long n) {
    (void)n;
    long long kv = e->NKV * e->HS;
    return dims(ceil_div_u(rows(e) * (kv / kernel_vec(e->x128, kv)), e->tun[DEC_BLOCK]), 1, e->tun[DEC_BLOCK]);
}
LaunchDims kernel_dec_attention(const KernelEnv *e, long long n) {
    (void)n;
    LaunchDims d = dims(e->derived[DEC_KV_SPLITS], e->NH, e->tun[DEC_ATT_THREADS]);
    d.grid[2] = grid_size(e->B);
    return d;
}
LaunchDims kernel_dec_sample(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->B, 1, e->tun[DEC_SAMPLE_THREADS]);
}
LaunchDims kernel_dec_linear(const KernelEnv *e, long long OC) {
    long long cols = e->tun[DEC_LIN_THREADS] / WARP * e->tun[DEC_LIN_COLS], rows = e->B < 8 ? e->B : 8;
    return dims(ceil_div_u(OC, cols), ceil_div_u(e->B, rows), e->tun[DEC_LIN_THREADS]);
}
LaunchDims kernel_dec_step(const KernelEnv *e, long long n_blocks) {
    return dims((unsigned)n_blocks, 1, e->tun[STEP_THREADS_T]);
}
LaunchDims kernel_dec_advance(const KernelEnv *e, long long n) {
    (void)e; (void)n;
    return dims(1, 1, 32);
}
