/* kernels: the declarations of every kernel family (see kernels.h). Geometry rules read the shape and the
   module's tunables from a KernelEnv; the size argument is the value of the kernel's size parameter. */
#include "gen/kernels.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define WARP 32
#define BLOCK_SIZE_RULE .min = 32, .max = 1024, .multiple_of = 32

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
enum { ENC_BLOCK };
static long long enc_packets(const KernelEnv *e) { return e->C / kernel_vec(e->x128, e->C); }
static LaunchDims enc_forward(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e) * enc_packets(e), e->tun[ENC_BLOCK]), 1, e->tun[ENC_BLOCK]);
}
static LaunchDims enc_wpe(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(e->T * enc_packets(e), e->tun[ENC_BLOCK]), 1, e->tun[ENC_BLOCK]);
}
static LaunchDims enc_wte(const KernelEnv *e, long long n_buckets) {
    long long block = min_ll(e->tun[ENC_BLOCK], ceil_div_u(enc_packets(e), WARP) * WARP);
    return dims(n_buckets, ceil_div_u(enc_packets(e), block), (int)block);
}

/* ---- layernorm.cu ---- */
enum { LN_BLOCK, LN_BWD_BLOCK, LN_BWD_SUMS, LN_BWD_SM_THREADS };
enum { LN_BWD_BLOCKS, LN_BWD_SMEM, LN_BWD_MINB };
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
static void ln_derive(KernelEnv *e) {
    long long warps = e->tun[LN_BWD_BLOCK] / WARP;
    e->derived[LN_BWD_BLOCKS] = min_ll(ceil_div_u(rows(e), warps), 512);
    long long stages = warps * 2 * 3 * e->C * (16 / e->x128);
    int staged = rows(e) >= 2 * e->derived[LN_BWD_BLOCKS] * warps && e->x128 == 8 &&
                 kernel_vec(e->x128, e->C) == e->x128 && ln_values(e) <= 24 && stages + e->C * 2 * 4 <= KERNEL_MAX_SMEM;
    e->derived[LN_BWD_SMEM] = e->tun[LN_BWD_SUMS] == 2 ? ln_sums_bytes(e) : staged ? stages : 0;
    /* __launch_bounds__' second argument: the blocks that make BWD_SM_THREADS, at least one */
    e->derived[LN_BWD_MINB] = blocks_for(e->tun[LN_BWD_SM_THREADS], e->tun[LN_BWD_BLOCK]);
}
static const char *ln_check(const KernelEnv *e, char *why, size_t n) {
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
static void ln_shape_defaults(const KernelEnv *e, int *tun) {
    if (ln_values(e) > 24) {
        tun[LN_BWD_SUMS] = 2;
    } else if (e->x128 == 8) {
        tun[LN_BWD_BLOCK] = 128;
        tun[LN_BWD_SM_THREADS] = 512;
    }
}
static LaunchDims ln_forward(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e), e->tun[LN_BLOCK] / WARP), 1, e->tun[LN_BLOCK]);
}
static LaunchDims ln_backward(const KernelEnv *e, long long n) {
    (void)n;
    LaunchDims d = dims(e->derived[LN_BWD_BLOCKS], 1, e->tun[LN_BWD_BLOCK]);
    d.smem = (unsigned)e->derived[LN_BWD_SMEM];
    return d;
}
static LaunchDims ln_reduce(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(e->C, WARP), 2, e->tun[LN_BLOCK]);
}

/* ---- bias.cu ---- */
enum { BIAS_BLOCK, BIAS_ROW_SPLITS };
enum { BIAS_MIN_BLOCKS };
/* the partial sums' blocks a multiprocessor holds at once: 1024 threads (at most 64 registers a thread), so that
   enough rows' loads are in flight (ptxas' own choice, 96 registers at 256 threads, held 512 threads: 2.45 TB/s in
   the GELU backward at gpt2-350M, 3.53 at 1024; docs/kernels-and-tuning.md, "LayerNorm and the bias gradients") */
static void bias_derive(KernelEnv *e) { e->derived[BIAS_MIN_BLOCKS] = blocks_for(1024, e->tun[BIAS_BLOCK]); }
static LaunchDims bias_partial(const KernelEnv *e, long long OC) {
    return dims(ceil_div_u(OC, WARP * kernel_vec(e->x128, e->C)), e->tun[BIAS_ROW_SPLITS], e->tun[BIAS_BLOCK]);
}
static LaunchDims bias_reduce(const KernelEnv *e, long long OC) {
    return dims(ceil_div_u(OC, e->tun[BIAS_BLOCK]), 1, e->tun[BIAS_BLOCK]);
}

/* ---- attention.cu ---- */
enum { ATT_Q_TILE, ATT_KV_TILE, ATT_BWD_TILE, ATT_BWD_INNER, ATT_Q_WARP_ROWS, ATT_BWD_WARP_ROWS, ATT_FWD_SM, ATT_BWD_SM };
enum { ATT_FWD_THREADS, ATT_BWD_THREADS, ATT_BWD_BLOCKS };
static void att_derive(KernelEnv *e) {   /* a warp per Q_WARP_ROWS rows of a forward tile, per BWD_WARP_ROWS of a backward one */
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
static const char *att_check(const KernelEnv *e, char *why, size_t n) {
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
static void att_shape_defaults(const KernelEnv *e, int *tun) {
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
static LaunchDims att_tiles(const KernelEnv *e, int tile, long long threads, long long smem) {
    LaunchDims d = dims(ceil_div_u(e->T, tile), e->NH, (int)threads);
    d.grid[2] = grid_size(e->B);
    d.smem = (unsigned)smem;
    return d;
}
static LaunchDims att_forward(const KernelEnv *e, long long n) {
    (void)n;
    return att_tiles(e, e->tun[ATT_Q_TILE], e->derived[ATT_FWD_THREADS], att_fwd_smem(e));
}
static LaunchDims att_backward(const KernelEnv *e, long long n) {
    (void)n;
    return att_tiles(e, e->tun[ATT_BWD_TILE], e->derived[ATT_BWD_THREADS], att_bwd_smem(e));
}

/* ---- gelu.cu ---- */
enum { GELU_BLOCK };
static LaunchDims gelu_dims(const KernelEnv *e, long long n) {
    return dims(ceil_div_u(n / kernel_vec(e->x128, 4 * e->C), e->tun[GELU_BLOCK]), 1, e->tun[GELU_BLOCK]);
}

/* ---- fc_gemm.cu ---- */
enum { FCG_TILE_N, FCG_STAGES, FCG_SM_BLOCKS, FCG_EPI_BYTES, FCG_WARPGROUPS, FCG_CLUSTER, FCG_GRID, FCG_TILE_WARPGROUPS };
enum { FCG_THREADS, FCG_MIN_BLOCKS, FCG_M_TILES, FCG_CLUSTER_BLOCKS };
static void fcg_derive(KernelEnv *e) {
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
static const char *fcg_check(const KernelEnv *e, char *why, size_t n) {
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
static LaunchDims fcg_gemm(const KernelEnv *e, long long n) {
    (void)n;
    long long tiles = fcg_tiles(e), blocks = e->tun[FCG_WARPGROUPS] == 3 ? min_ll(tiles, e->tun[FCG_GRID]) : tiles;
    LaunchDims d = dims(blocks, 1, (int)e->derived[FCG_THREADS]);
    d.smem = (unsigned)fcg_smem(e);
    return d;
}
static LaunchDims fcg_transpose(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(4 * e->C, 32), ceil_div_u(e->C, 32), 256);
}
static LaunchDims fcg_reduce(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(4 * e->C, 256), 1, 256);
}
int fc_gemm_fits(const GPT2Shape *model, const StepShape *step, int sm) {
    (void)model;   /* any n_embd the config accepts (a multiple of 32): k and 4C come in whole 16-byte chunks */
    return sm == 90 && step->precision != PREC_FP32;
}

/* ---- classifier.cu ---- */
enum { CLS_BLOCK, CLS_CHUNK_ROWS, CLS_UNROLL };
enum { CLS_CHUNK };
/* The rows of logits per chunk (runtime/cuda/classifier.c): the largest divisor of B*T not above CHUNK_ROWS, so that
   every chunk is one shape of the classifier's matmuls. */
static void cls_derive(KernelEnv *e) {
    long long r = min_ll(e->tun[CLS_CHUNK_ROWS], rows(e));
    while (rows(e) % r) r--;
    e->derived[CLS_CHUNK] = r;
}
static LaunchDims cls_dims(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->derived[CLS_CHUNK], 1, e->tun[CLS_BLOCK]);
}

/* ---- grad_norm.cu ---- */
enum { NORM_BLOCK, NORM_GRID };
static LaunchDims norm_dims(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->tun[NORM_GRID], 1, e->tun[NORM_BLOCK]);
}

/* ---- adamw.cu ---- */
enum { ADAMW_BLOCK };
static LaunchDims adamw_dims(const KernelEnv *e, long long n) {
    return dims(ceil_div_u(n, e->tun[ADAMW_BLOCK]), 1, e->tun[ADAMW_BLOCK]);
}

/* ---- decode.cu ---- */
enum { DEC_BLOCK, DEC_KV_CHUNK, DEC_ATT_THREADS, DEC_SAMPLE_THREADS, DEC_LIN_THREADS, DEC_LIN_COLS };
enum { DEC_KV_SPLITS };
static void dec_derive(KernelEnv *e) { e->derived[DEC_KV_SPLITS] = ceil_div_u(e->maxT, e->tun[DEC_KV_CHUNK]); }
static const char *dec_check(const KernelEnv *e, char *why, size_t n) {
    if (e->HS > e->tun[DEC_ATT_THREADS])
        snprintf(why, n, "decode_attention_combine has a thread per channel of a head: ATT_THREADS (%d) must be at least "
                 "the head size %lld", e->tun[DEC_ATT_THREADS], e->HS);
    else return NULL;
    return why;
}
static long long dec_packets(const KernelEnv *e) { return e->C / kernel_vec(e->x128, e->C); }
static LaunchDims dec_embed(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(e->B * dec_packets(e), e->tun[DEC_BLOCK]), 1, e->tun[DEC_BLOCK]);
}
static LaunchDims dec_append(const KernelEnv *e, long long n) {
    (void)n;
    return dims(ceil_div_u(rows(e) * dec_packets(e), e->tun[DEC_BLOCK]), 1, e->tun[DEC_BLOCK]);
}
static LaunchDims dec_attention(const KernelEnv *e, long long n) {
    (void)n;
    LaunchDims d = dims(e->derived[DEC_KV_SPLITS], e->NH, e->tun[DEC_ATT_THREADS]);
    d.grid[2] = grid_size(e->B);
    return d;
}
static LaunchDims dec_combine(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->NH, e->B, e->tun[DEC_ATT_THREADS]);
}
static LaunchDims dec_sample(const KernelEnv *e, long long n) {
    (void)n;
    return dims(e->B, 1, e->tun[DEC_SAMPLE_THREADS]);
}
static LaunchDims dec_linear(const KernelEnv *e, long long OC) {
    long long cols = e->tun[DEC_LIN_THREADS] / WARP * e->tun[DEC_LIN_COLS], rows = e->B < 8 ? e->B : 8;
    return dims(ceil_div_u(OC, cols), ceil_div_u(e->B, rows), e->tun[DEC_LIN_THREADS]);
}
static LaunchDims dec_advance(const KernelEnv *e, long long n) {
    (void)e; (void)n;
    return dims(1, 1, 32);
}

#define X(n) {KP_X, #n}
#define CX(n) {KP_CX, #n}
#define F32(n) {KP_F32, #n}
#define CF32(n) {KP_CF32, #n}
#define I32(n) {KP_I32, #n}
#define U64(n) {KP_U64, #n}
#define TMAP(n) {KP_TMAP, #n}
#define CI32(n) {KP_CI32, #n}
#define INT(n) {KP_INT, #n}
#define I64(n) {KP_I64, #n}
#define FLOAT(n) {KP_FLOAT, #n}

const FamilyDecl kernel_families[] = {
    {"encoder", "templates/encoder.cu", "token + position embedding and its backward",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE}}, {0}, NULL, NULL,
     {{"encoder_forward", {X(out), CI32(inp), CX(wte), CX(wpe)}, ENC_BLOCK, -1, enc_forward,
       "ceil(B*T*C/VEC_C / BLOCK_SIZE)", 0},
      {"encoder_backward_wpe", {X(dwpe), CX(dout)}, ENC_BLOCK, -1, enc_wpe, "ceil(T*C/VEC_C / BLOCK_SIZE)", 0},
      {"encoder_backward_wte", {X(dwte), CX(dout), CI32(bucket_token), CI32(bucket_start), CI32(positions), INT(n_buckets)},
       ENC_BLOCK, 5, enc_wte, "(n_buckets, ceil(C/VEC_C / block)), block min(BLOCK_SIZE, C/VEC_C rounded up to 32)", 0}}, NULL,
     STEP_BIT(STEP_TRAIN) | STEP_BIT(STEP_FORWARD)},
    {"layernorm", "templates/layernorm.cu", "LayerNorm forward (plain and fused with the residual add) and backward",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE},
      {"BWD_BLOCK_SIZE", 256, {128, 256, 512}, BLOCK_SIZE_RULE},
      {"BWD_SUMS", 1, {1, 2}, .min = 1, .max = 2, .multiple_of = 1},
      /* the backward's threads a multiprocessor is to hold at once: BWD_SM_THREADS / BWD_BLOCK_SIZE blocks (at least
         one) in __launch_bounds__, to which ptxas keeps the registers (256: no bound at these block sizes) */
      {"BWD_SM_THREADS", 256, {256, 512, 1024}, .min = 32, .max = 2048, .multiple_of = 32}},
     {"BWD_BLOCKS", "BWD_SMEM", "BWD_MINB"}, ln_derive, ln_check,
     {{"layernorm_forward", {X(out), F32(mean), F32(rstd), CX(inp), CX(weight), CX(bias)}, LN_BLOCK, -1, ln_forward,
       "ceil(B*T / (BLOCK_SIZE/32)): a warp per row", 0},
      {"fused_residual_layernorm_forward",
       {X(residual), X(out), F32(mean), F32(rstd), CX(inp1), CX(inp2), CX(weight), CX(bias)}, LN_BLOCK, -1, ln_forward,
       "ceil(B*T / (BLOCK_SIZE/32)): a warp per row", 0},
      {"layernorm_backward", {X(dinp), F32(scratch), X(out), CX(dout), CX(inp), CX(weight), CX(bias), CF32(mean), CF32(rstd)},
       LN_BWD_BLOCK, -1, ln_backward, "BWD_BLOCKS = min(ceil(B*T / (BWD_BLOCK_SIZE/32)), 512); BWD_SMEM bytes of shared memory",
       BOUNDS_DERIVED(LN_BWD_MINB)},
      {"layernorm_backward_reduce", {X(dweight), X(dbias), CF32(scratch)}, LN_BLOCK, -1, ln_reduce,
       "(ceil(C/32), 2): a block per 32 channels of dweight and of dbias", 0}}, ln_shape_defaults, 0},
    {"bias", "templates/bias.cu", "bias gradients beside the cuBLASLt matmuls (one folded into the GELU backward)",
     {{"BLOCK_SIZE", 512, {128, 256, 512}, BLOCK_SIZE_RULE},
      {"ROW_SPLITS", 64, {16, 32, 64, 128}, .min = 1, .max = 65535, .multiple_of = 1}},
     {"MIN_BLOCKS"}, bias_derive, NULL,
     {{"bias_backward_partial", {F32(scratch), CX(dout), INT(OC)}, BIAS_BLOCK, 2, bias_partial,
       "(ceil(OC / (32*VEC_C)), ROW_SPLITS)", BOUNDS_DERIVED(BIAS_MIN_BLOCKS)},
      {"bias_backward_reduce", {X(dbias), CF32(scratch), INT(OC)}, BIAS_BLOCK, 2, bias_reduce, "ceil(OC / BLOCK_SIZE)", 0},
      {"gelu_backward_bias_partial", {F32(scratch), X(dinout), CX(pre), INT(OC)}, BIAS_BLOCK, 3, bias_partial,
       "(ceil(OC / (32*VEC_C)), ROW_SPLITS), as bias_backward_partial", BOUNDS_DERIVED(BIAS_MIN_BLOCKS)}}, NULL,
     STEP_BIT(STEP_TRAIN)},
    {"attention", "templates/attention.cu", "causal flash attention: no (T,T) scores, deterministic backward",
     {{"Q_TILE", 64, {32, 64, 128}, .min = 16, .max = 256, .multiple_of = 16},
      {"KV_TILE", 64, {32, 64, 128}, .min = 16, .max = 128, .multiple_of = 16},
      {"BWD_TILE", 64, {32, 64, 128}, .min = 16, .max = 128, .multiple_of = 16},
      {"BWD_INNER", 64, {32, 64, 128}, .min = 16, .max = 128, .multiple_of = 16},
      {"Q_WARP_ROWS", 16, {16, 32}, .min = 16, .max = 32, .multiple_of = 16},
      {"BWD_WARP_ROWS", 16, {16, 32}, .min = 16, .max = 32, .multiple_of = 16},
      /* the tensor-core instructions of the forward and of the backward: 80 = mma.sync (sm_80 and later), 90 =
         wgmma (Hopper) */
      {"FWD_SM", 80, {80, 90}, .min = 80, .max = 90, .multiple_of = 10},
      {"BWD_SM", 80, {80, 90}, .min = 80, .max = 90, .multiple_of = 10}},
     {"FWD_THREADS", "BWD_THREADS", "BWD_BLOCKS"}, att_derive, att_check,
     {{"flash_forward", {X(out), F32(stats), CX(qkv)}, BOUNDS_DERIVED(ATT_FWD_THREADS), -1, att_forward,
       "(ceil(T/Q_TILE), NH, B), a warp per Q_WARP_ROWS query rows", 0},
      {"flash_backward_dq", {X(dqkv), F32(ddot), CX(qkv), CX(dout), CX(out), CF32(stats)}, BOUNDS_DERIVED(ATT_BWD_THREADS),
       -1, att_backward, "(ceil(T/BWD_TILE), NH, B), a warp per BWD_WARP_ROWS query rows; writes ddot",
       BOUNDS_DERIVED(ATT_BWD_BLOCKS)},
      {"flash_backward_dkdv", {X(dqkv), CX(qkv), CX(dout), CF32(stats), CF32(ddot)}, BOUNDS_DERIVED(ATT_BWD_THREADS), -1,
       att_backward, "(ceil(T/BWD_TILE), NH, B), a warp per BWD_WARP_ROWS key rows", BOUNDS_DERIVED(ATT_BWD_BLOCKS)}},
     att_shape_defaults, STEP_BIT(STEP_TRAIN) | STEP_BIT(STEP_FORWARD)},
    {"gelu", "templates/gelu.cu", "GELU (tanh approximation) and its backward, elementwise",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512, 1024}, BLOCK_SIZE_RULE}}, {0}, NULL, NULL,
     {{"gelu_forward", {X(out), CX(inp), I64(n)}, GELU_BLOCK, 2, gelu_dims, "ceil(n/VEC_4C / BLOCK_SIZE)", 0},
      {"gelu_backward", {X(dinout), CX(inp), I64(n)}, GELU_BLOCK, 2, gelu_dims, "ceil(n/VEC_4C / BLOCK_SIZE)", 0}}, NULL,
     STEP_BIT(STEP_TRAIN)},
    /* TILE_N, STAGES, SM_BLOCKS: the block's columns, its stages of k, its blocks a multiprocessor (two: the registers
       of 128 a thread, which TILE_N 256's accumulators alone would take); EPI_BYTES: the epilogue's global accesses, 16 (its
       tensors through shared memory in 16-byte chunks of rows) or 4 (each thread's pairs of columns straight);
       WARPGROUPS: 2 (both load and compute) or 3 (a third only loads, by TMA, in persistent blocks; the tm_* maps of
       the operands: runtime/cuda/linear.c); CLUSTER: 1, or 2 (blocks in pairs on row tiles m and m + 1 of the same
       columns: each loads half of B's tile and TMA multicasts it to both, so that L2 serves a third less; measured
       slower on the H200); GRID: the persistent blocks of WARPGROUPS 3 (132: a wave of the H200's multiprocessors;
       the tests take fewer, so that each block goes through several tiles); TILE_WARPGROUPS: the consumer warpgroups
       of a tile with WARPGROUPS 3, 2 (64 rows each) or 1 (each a whole tile of its own, the two in turn, so that one's
       epilogue runs while the other's products do; TILE_N 128). Defaults: the fastest variant at gpt2-350M on the H200 and
       at 124M but for TILE_WARPGROUPS 1 (docs/kernels-and-tuning.md, "The GELU and the fc matmuls": 1.32x and 1.24x
       the cp.async variant's time; pingpong 4-5% faster at 124M, level at 350M, no faster in whole steps) */
    {"fc_gemm", "templates/fc_gemm.cu", "the fc matmul with the GELU, and the fcproj dinp with the GELU backward and "
     "the fc bias gradient (Hopper's wgmma; train.gelu = \"fused\")",
     {{"TILE_N", 256, {128, 256}, .min = 128, .max = 256, .multiple_of = 128},
      {"STAGES", 3, {3, 4, 5, 6}, .min = 3, .max = 8, .multiple_of = 1},
      {"SM_BLOCKS", 1, {1, 2}, .min = 1, .max = 2, .multiple_of = 1},
      {"EPI_BYTES", 16, {4, 16}, .min = 4, .max = 16, .multiple_of = 4},
      {"WARPGROUPS", 3, {2, 3}, .min = 2, .max = 3, .multiple_of = 1},
      {"CLUSTER", 1, {1, 2}, .min = 1, .max = 2, .multiple_of = 1},
      {"GRID", 132, {132}, .min = 2, .max = 65536, .multiple_of = 2},
      {"TILE_WARPGROUPS", 2, {1, 2}, .min = 1, .max = 2, .multiple_of = 1}},
     {"THREADS", "MIN_BLOCKS", "M_TILES", "CLUSTER_BLOCKS"}, fcg_derive, fcg_check,
     {{"fc_gelu_forward", {X(pre), X(out), CX(inp), CX(weight), CX(bias), TMAP(tm_inp), TMAP(tm_weight), TMAP(tm_pre),
                           TMAP(tm_out)}, BOUNDS_DERIVED(FCG_THREADS), -1, fcg_gemm,
       "M_TILES * ceil(4C / TILE_N) tiles of 128 x TILE_N (M_TILES = ceil(B*T / 128)): a block each, or with WARPGROUPS 3 "
       "GRID blocks that go through them (in clusters of CLUSTER)", BOUNDS_DERIVED(FCG_MIN_BLOCKS)},
      {"fcproj_dgelu_backward", {X(dpre), F32(scratch), CX(dout), CX(wt), CX(pre), TMAP(tm_dout), TMAP(tm_wt),
                                 TMAP(tm_pre), TMAP(tm_dpre)}, BOUNDS_DERIVED(FCG_THREADS), -1,
       fcg_gemm, "as fc_gelu_forward's", BOUNDS_DERIVED(FCG_MIN_BLOCKS)},
      {"transpose_fcproj", {X(wt), CX(weight)}, BOUNDS_DERIVED(FCG_THREADS), -1, fcg_transpose,
       "(ceil(4C / 32), ceil(C / 32)): a block per 32 x 32 tile", 0},
      {"fc_bias_reduce", {X(dbias), CF32(scratch)}, BOUNDS_DERIVED(FCG_THREADS), -1, fcg_reduce,
       "ceil(4C / 256): a thread per column", 0}}, NULL,
     STEP_BIT(STEP_TRAIN)},
    /* BLOCK_SIZE 256: the fastest of the candidates at gpt2-124M and 350M on the H200 (docs/kernels-and-tuning.md,
       "The classifier": 1.56x the old default of 1024). CHUNK_ROWS: logits are made for that many rows at a time; its
       one candidate keeps kernel sweeps off it, since what it changes is the matmuls' shape and the memory (the
       whole step measures it: bench/roofline.sh). UNROLL: the loads a thread has in flight where the row is read
       twice (longer than 16 packets a thread); 4 measured fastest at gpt2-124M on the H200, 4.62 ms a micro-step
       against 4.84 with 2 (docs/kernels-and-tuning.md, "The classifier") */
    {"classifier", "templates/classifier.cu", "softmax + cross-entropy + dlogits in one pass, a chunk of rows at a time",
     {{"BLOCK_SIZE", 256, {128, 256, 512, 1024}, BLOCK_SIZE_RULE},
      {"CHUNK_ROWS", 8192, {8192}, .min = 1, .max = 1 << 24, .multiple_of = 1},
      {"UNROLL", 4, {1, 2, 4}, .min = 1, .max = 8, .multiple_of = 1}},
     {"CHUNK"}, cls_derive, NULL,
     {{"classifier_forward", {F32(losses), X(logits), CI32(targets), FLOAT(dloss), INT(write_dlogits)}, CLS_BLOCK, -1,
       cls_dims, "CHUNK: a block per row of a chunk", 0}}, NULL,
     STEP_BIT(STEP_TRAIN) | STEP_BIT(STEP_FORWARD)},
    {"grad_norm", "templates/grad_norm.cu", "squared L2 norm, for the global gradient norm",
     {{"BLOCK_SIZE", 512, {128, 256, 512, 1024}, BLOCK_SIZE_RULE},
      {"GRID_SIZE", 1024, {256, 512, 1024, 2048}, .min = 1, .max = 65536, .multiple_of = 1}},
     {0}, NULL, NULL,
     {{"global_norm_squared", {F32(partials), CX(data), I64(n)}, NORM_BLOCK, -1, norm_dims, "GRID_SIZE", 0}}, NULL,
     STEP_BIT(STEP_TRAIN)},
    {"adamw", "templates/adamw.cu", "the AdamW update of one parameter tensor",
     {{"BLOCK_SIZE", 512, {128, 256, 512, 1024}, BLOCK_SIZE_RULE}}, {0}, NULL, NULL,
     {{"adamw_update",
       {X(params), F32(master), CX(grads), F32(m), F32(v), I64(n), I64(idx0), FLOAT(lr), FLOAT(beta1), FLOAT(beta2),
        FLOAT(bc1), FLOAT(bc2), FLOAT(eps), FLOAT(wd), FLOAT(grad_scale)},
       ADAMW_BLOCK, 5, adamw_dims, "ceil(n / BLOCK_SIZE)", 0}}, NULL, STEP_BIT(STEP_TRAIN)},
    {"decode", "templates/decode.cu",
     "one token per row against the key/value cache: embedding at a position, the cache append, split attention, the draw",
     {{"BLOCK_SIZE", 256, {64, 128, 256, 512}, BLOCK_SIZE_RULE},
      {"KV_CHUNK", 64, {32, 64, 128, 256}, .min = 16, .max = 1024, .multiple_of = 16},
      {"ATT_THREADS", 128, {64, 128, 256}, BLOCK_SIZE_RULE},
      {"SAMPLE_THREADS", 1024, {256, 512, 1024}, BLOCK_SIZE_RULE},
      {"LIN_THREADS", 128, {64, 128, 256}, BLOCK_SIZE_RULE},
      {"LIN_COLS", 2, {1, 2, 4}, .min = 1, .max = 8, .multiple_of = 1}},
     {"KV_SPLITS"}, dec_derive, dec_check,
     {{"decode_embed", {X(out), CI32(tokens), CX(wte), CX(wpe), CI32(pos)}, DEC_BLOCK, -1, dec_embed,
       "ceil(B*C/VEC_C / BLOCK_SIZE)", 0},
      {"kv_append", {X(kcache), X(vcache), CX(qkv), CI32(pos)}, DEC_BLOCK, -1, dec_append,
       "ceil(B*T*C/VEC_C / BLOCK_SIZE)", 0},
      {"decode_attention", {F32(partial), CX(qkv), CX(kcache), CX(vcache), CI32(pos)}, DEC_ATT_THREADS, -1,
       dec_attention, "(KV_SPLITS, NH, B): a block per KV_CHUNK cached positions of a head", 0},
      {"decode_attention_combine", {X(out), X(kcache), X(vcache), CF32(partial), CX(qkv), CI32(pos)}, DEC_ATT_THREADS,
       -1, dec_combine, "(NH, B): a thread per channel of the head", 0},
      {"sample_tokens", {I32(tokens), I32(drawn), U64(rng), CI32(pos), CX(logits), FLOAT(temperature), INT(top_k),
                         FLOAT(top_p)}, DEC_SAMPLE_THREADS, -1, dec_sample, "B: a block per row", 0},
      {"decode_advance", {I32(pos)}, DEC_SAMPLE_THREADS, -1, dec_advance, "1 block of 32 threads", 0},
      {"decode_linear", {X(out), CX(inp), CX(weight), CX(bias), INT(OC), INT(IC), INT(gelu)}, DEC_LIN_THREADS, 4,
       dec_linear, "(ceil(OC / (LIN_THREADS/32 * LIN_COLS)), ceil(B / 8)): a warp per LIN_COLS columns of 8 rows", 0}}, NULL,
     STEP_BIT(STEP_DECODE) | STEP_PREFILL},   /* a prefill appends to the cache: kv_append */
    {0},
};

KernelEnv kernel_env(const GPT2Shape *model, const StepShape *step, const FamilyDecl *f, const int *tun) {
    KernelEnv e;
    memset(&e, 0, sizeof e);
    e.B = step->B;
    e.T = step->T;
    e.C = model->n_embd;
    e.NH = model->n_head;
    e.HS = e.C / e.NH;
    e.L = model->n_layer;
    e.V = model->vocab_size;
    e.Vp = model->padded_vocab_size;
    e.maxT = model->max_seq_len;
    e.x128 = step->precision == PREC_FP32 ? 4 : 8;
    for (int i = 0; i < FAMILY_MAX_TUNABLES && f->tunables[i].name; i++) e.tun[i] = tun[i];
    if (f->derive) f->derive(&e);
    return e;
}

int kernel_count(void) {
    int n = 0;
    for (const FamilyDecl *f = kernel_families; f->family; f++)
        for (const KernelDecl *k = f->kernels; k < f->kernels + FAMILY_MAX_KERNELS && k->name; k++) n++;
    return n;
}

const KernelDecl *kernel_decl(int id, const FamilyDecl **family) {
    int n = 0;
    for (const FamilyDecl *f = kernel_families; f->family; f++)
        for (const KernelDecl *k = f->kernels; k < f->kernels + FAMILY_MAX_KERNELS && k->name; k++)
            if (n++ == id) {
                if (family) *family = f;
                return k;
            }
    return NULL;
}

int tunable_allowed(const TunableDecl *t, int v) {
    return v >= t->min && v <= t->max && v % t->multiple_of == 0;
}

void tunable_describe(const TunableDecl *t, char *out, size_t n) {
    if (t->multiple_of > 1) snprintf(out, n, "a multiple of %d from %d to %d", t->multiple_of, t->min, t->max);
    else snprintf(out, n, "an integer from %d to %d", t->min, t->max);
}

const char *kernel_bounds_name(const FamilyDecl *f, const KernelDecl *k) {
    return k->bounds >= FAMILY_MAX_TUNABLES ? f->derived_names[k->bounds - FAMILY_MAX_TUNABLES] : f->tunables[k->bounds].name;
}
const char *kernel_min_blocks_name(const FamilyDecl *f, const KernelDecl *k) {
    return k->min_blocks >= FAMILY_MAX_TUNABLES ? f->derived_names[k->min_blocks - FAMILY_MAX_TUNABLES] : NULL;
}
const char *kernel_cluster_name(const FamilyDecl *f, const KernelDecl *k) {
    if (k->min_blocks < FAMILY_MAX_TUNABLES) return NULL;
    for (int i = 0; i < FAMILY_MAX_DERIVED && f->derived_names[i]; i++)
        if (!strcmp(f->derived_names[i], "CLUSTER_BLOCKS")) return f->derived_names[i];
    return NULL;
}

void kernel_param_cuda(const KernelParam *p, char *out, size_t n) {
    static const char *const types[] = {"floatX *", "const floatX *", "float *", "const float *", "int *",
                                        "const int *", "int ", "long long ", "float ",
                                        "unsigned long long *", "const __grid_constant__ TensorMap "};
    snprintf(out, n, "%s%s", types[p->type], p->name);
}
