// fc_gemm.cu: the fc-shaped matmuls of the training step with the GELU (or a relative's ReLU^2: act below) fused into
// them (train.gelu = "fused"), on Hopper's warpgroup MMA (sm_90a, bf16 or fp16; elsewhere the kernels are empty and
// the plan never takes this path).
// Longer than a C file may be, on purpose: its kernels share one tile layout, fragment maps and pipeline, and read
// better whole than split across files that must agree on every constant (docs/kernels-and-tuning.md).
// Both products are D (GEMM_M x GEMM_N) = A (GEMM_M x GEMM_K) B^T, rows of A and B with k contiguous, GEMM_M = B*T,
// GEMM_N = 4C, GEMM_K = C:
//   fc_gelu_forward        pre = inp @ weight^T + bias and out = GELU(pre) (weight: fc's (4C, C)); what cuBLASLt's
//                          GELU_AUX_BIAS epilogue writes
//   fcproj_dgelu_backward  dpre = (dout @ wt^T) * GELU'(pre) (wt: fcproj's (C, 4C) weight transposed, (4C, C)); what
//                          cuBLASLt's DGELU epilogue writes, and the column sums of each 128-row tile of dpre, the fc
//                          bias gradient's partials, into scratch (M_TILES x 4C floats)
//   transpose_fcproj       wt = weight^T, so that the backward's B has k contiguous too
//   fc_bias_reduce         dbias += the sums of the M_TILES partials of each column, in order
// A block computes a 128 x TILE_N tile of D: two warpgroups, each 64 rows, wgmma m64nTILE_Nk16 with A and B from
// shared memory (both K-major, swizzled, as the attention's S = Q K^T). The k dimension streams through STAGES
// stages of 64 columns, loaded
//   WARPGROUPS 2: by the same two warpgroups, by cp.async (at k-block kb every thread waits for kb's copies, a barrier,
//                 then the copies of kb + STAGES - 2 start, into the stage of kb - 2, whose products every warpgroup has
//                 seen finish); a block per tile, SM_BLOCKS blocks a multiprocessor: with two, one block's epilogue
//                 runs while the other's products do;
//   WARPGROUPS 3: by a third warpgroup, one thread of which issues TMA copies (the tensor maps tm_*: 128 x 64 boxes,
//                 runtime/cuda/linear.c) on mbarriers that say when a stage is full and when both consumers are done
//                 with it; GRID (132) persistent blocks, whose producer loads the next tile's stages during this one's
//                 epilogue, and the backward's tile of pre for the epilogue; the epilogue's tiles leave by TMA stores,
//                 which run while the next tile's products do. CLUSTER 2: the blocks work in pairs (a thread-block
//                 cluster) on row tiles m and m + 1 of the same columns; each loads half of B's tile and multicasts it
//                 to both, so that L2 serves 32 KiB a k-block and block instead of 48 (measured slower: the pair
//                 goes at the pace of its slower block). TILE_WARPGROUPS 1 ("pingpong"; TILE_N 128): each consumer
//                 warpgroup computes whole 128 x 128 tiles (two m64n128k16 a k-step), the two taking the block's tiles
//                 in turn, so that one's epilogue runs while the other's products do; the producer gives 128 of its
//                 registers a thread to them (setmaxnreg).
// kb's products are issued and the warpgroup waits for kb - 1's. The epilogue works from the registers: a thread
// holds two adjacent columns of rows g and g + 8 of each 8-column tile (common.cuh's accumulator layout); its tensors
// go to and from global memory through shared memory (EPI_BYTES 16: tiles of 64-column panels in the 128-byte swizzle,
// whole 16-byte chunks of rows in global memory) or straight (4; WARPGROUPS 2 only). Measured on the H200:
// docs/kernels-and-tuning.md, "The GELU and the fc matmuls". A fixed summation order: the same bits every run.

constexpr int GEMM_M = B * T, GEMM_N = 4 * C, GEMM_K = C;
constexpr int BM = 128, BK = 64;
constexpr int KBLOCKS = (GEMM_K + BK - 1) / BK;
// TILE_WARPGROUPS 1 (WARPGROUPS 3 only, "pingpong"): each consumer warpgroup computes whole 128-row tiles of its own,
// the two taking the block's tiles in turn, so that one's epilogue runs while the other's products do; 2: both compute
// each tile, 64 rows each. MH: the 64-row halves of a consumer warpgroup's rows (one wgmma of each a k-step).
constexpr bool PP = TILE_WARPGROUPS == 1;
constexpr int MH = PP ? 2 : 1;
constexpr int EPI_GROUPS = PP ? 2 : 1;              // the epilogues that may run at once, each with its own shared memory
constexpr int EPI_THREADS = PP ? 128 : 256;        // an epilogue's threads
constexpr int ACC = TILE_N / 2;                      // a thread's accumulators of a 64-row half
constexpr int STAGE = (BM + TILE_N) * BK;            // elements of a stage: A's rows, then B's
constexpr bool TMA = WARPGROUPS == 3;
// 8-column tiles whose epilogue loads are issued together (from global memory, or with WARPGROUPS 3 from shared memory,
// where fewer registers wait)
constexpr int CHUNK = PP ? 4 : TMA ? 2 : 8;
constexpr bool EPI_SMEM = EPI_BYTES == 16;
// The forward's epilogue goes through its columns in passes of EPI_COLS (WARPGROUPS 3: 128, so that a pass's two tiles
// fit beside the stages; 64 with TILE_WARPGROUPS 1, whose two epilogues each have their own), the backward's in one
// (its tile of pre becomes dpre in place)
constexpr int EPI_COLS = PP ? 64 : TMA ? 128 : TILE_N;
constexpr int EPI_REGION = BM * (2 * EPI_COLS > TILE_N ? 2 * EPI_COLS : TILE_N);   // elements, an epilogue's
typedef Packed<floatX, 2> x2;

#if HOPPER_WGMMA
// GELU and GELU' through the special-function unit's tanh (common.cuh's tanh_approx; one special-function operation
// an element where common.cuh's 16-bit GELU, through the logistic function, takes two: the epilogue's 64 or 128 values
// a thread are bound by that unit)
__device__ __forceinline__ float gelu_tanh(float u) { return gelu_with(u, [](float z) { return tanh_approx(z); }); }
__device__ __forceinline__ float gelu_grad_tanh(float u) { return gelu_grad_with(u, [](float z) { return tanh_approx(z); }); }
// The activation: GELU, or a relative's ReLU^2 (FC_RELU2: relu(u)^2, its derivative 2 relu(u)); a relative without
// biases (FC_BIAS false) adds none and its column sums go unused (no fc_bias_reduce). GPT-2's prelude has neither.
#ifdef ARCH_CONSTANTS
constexpr bool ACT_RELU2 = FC_RELU2, HAS_BIAS = FC_BIAS;
#else
constexpr bool ACT_RELU2 = false, HAS_BIAS = true;
#endif
__device__ __forceinline__ float act(float u) {
    if constexpr (ACT_RELU2) {
        const float r = fmaxf(u, 0.0f);
        return r * r;
    } else {
        return gelu_tanh(u);
    }
}
__device__ __forceinline__ float act_grad(float u) {
    if constexpr (ACT_RELU2) return 2.0f * fmaxf(u, 0.0f);
    else return gelu_grad_tanh(u);
}

// ROWS rows (those at or past `rows` are zeros) of 64 columns from src (row pitch GEMM_K; columns at or past GEMM_K
// are zeros: GEMM_K = n_embd is a multiple of 32) into a swizzled tile, by the 256 threads
template <int ROWS>
__device__ __forceinline__ void load_tile(floatX *tile, const floatX *src, int rows, int k0) {
#pragma unroll
    for (int i = 0; i < ROWS * 8 / 256; i++) {
        const int v = threadIdx.x + i * 256, r = v / 8, c = v % 8 * 8;
        const bool ok = r < rows && k0 + c < GEMM_K;
        cp_async16(tile + sw128(r, c), src + (ok ? (long long)r * GEMM_K + k0 + c : 0), ok);
    }
}

// mbarriers in shared memory (PTX ISA, "mbarrier"): init with the arrivals a phase expects (then a fence, so that the
// TMA unit sees them initialized); an arrival; an arrival that also says how many bytes of TMA copies the phase waits
// for; a wait for the phase of the given parity to complete
__device__ __forceinline__ void mbar_init(u64 *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(u64 *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_expect(u64 *b, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64 *b, int parity) {
    asm volatile("{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}\n"
                 ::"r"(smem_addr(b)), "r"(parity) : "memory");
}
// TMA (PTX ISA, "cp.async.bulk.tensor"): a box of 128 rows x 64 columns of a row-major matrix (the maps' box), at
// column col and row row, into or from a tile of 128 such rows in the 128-byte swizzle (sw128); rows and columns
// outside the matrix load as zeros (and count in the bytes the mbarrier waits for) and are not stored. The stores are
// committed as a group; wait_read: their reads of shared memory are done; wait: they are complete.
constexpr int BOX_ROWS = 128;
__device__ __forceinline__ void tma_load(floatX *dst, const TensorMap &map, int col, int row, u64 *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(smem_addr(dst)), "l"(&map), "r"(col), "r"(row), "r"(smem_addr(bar)) : "memory");
}
// the same box into the tile at the same offset in every block of the cluster named in mask, each block's mbarrier at
// bar's offset told of its bytes
__device__ __forceinline__ void tma_load_multicast(floatX *dst, const TensorMap &map, int col, int row, u64 *bar, int mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 ::"r"(smem_addr(dst)), "l"(&map), "r"(col), "r"(row), "r"(smem_addr(bar)), "h"((unsigned short)mask) : "memory");
}
// thread-block clusters (PTX ISA, "barrier.cluster", %cluster_ctarank): this block's rank in its cluster; a barrier of
// every thread of the cluster's blocks
__device__ __forceinline__ int cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return (int)r;
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap &map, const floatX *src, int col, int row) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n"
                 ::"l"(&map), "r"(col), "r"(row), "r"(smem_addr(src)) : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void tma_store_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// A stage's release by a consumer warpgroup: an arrival on its empty barrier in every block of the cluster (each
// block's copies land in all of them)
__device__ __forceinline__ void release(u64 *b) {
    if (CLUSTER == 1) {
        mbar_arrive(b);
        return;
    }
    for (int r = 0; r < CLUSTER; r++) {
        u32 remote;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(b)), "r"(r));
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
    }
}
// A thread's index among its epilogue's threads, and their barrier: the two consumer warpgroups' (named barrier 1), or
// with TILE_WARPGROUPS 1 the thread's warpgroup's (barrier 1 + its index); a producer warpgroup is in none
__device__ __forceinline__ int etid() { return PP ? threadIdx.x % WG_THREADS : threadIdx.x; }
__device__ __forceinline__ void epi_sync() {
    asm volatile("bar.sync %0, %1;\n" ::"r"(PP ? 1 + (int)threadIdx.x / WG_THREADS : 1), "n"(EPI_THREADS) : "memory");
}

constexpr int N_TILES = (GEMM_N + TILE_N - 1) / TILE_N;
constexpr int GROUPS = ((int)M_TILES + CLUSTER - 1) / CLUSTER * N_TILES;   // CLUSTER row tiles and a column tile

// An epilogue's shared memory: the forward's two tiles of 128 x EPI_COLS (pre and out) or the backward's one of 128 x
// TILE_N (pre, which the producer loads with WARPGROUPS 3, overwritten by dpre), each in panels of 128 rows of 64
// columns in the 128-byte swizzle (TMA's box; a warp's 4-byte accesses of 8 rows and 4 pairs of columns fall in 32
// banks); after the EPI_GROUPS epilogues' tiles, the backward's column sums (8 warps in all). With WARPGROUPS 2 it is
// where the stages were; with 3 after them (the next tile's stages load during the epilogue).
struct Epi {
    floatX *tile[2];
    float *sums;                                     // [warp of the epilogue][TILE_N]
    u64 *full, *empty;                               // WARPGROUPS 3, the backward: tile 0 (pre) loaded; read
    int i;                                           // the epilogue's tiles so far (the parity of full and empty)
};
__device__ __forceinline__ int slot(int r, int c) { return c / 64 * (BM * 64) + sw128(r, c % 64); }

// Every tile's product (tile t: rows m0 = 128 (t / N_TILES).. of a, rows n0 = TILE_N (t % N_TILES).. of b, the whole
// k), each handed to epilogue(d, m0, n0, epi) in its consumer warpgroups (TILE_WARPGROUPS 2: both, warpgroup wg rows
// m0 + 64 wg..; 1: the block's tiles in turn, each all 128 rows, half mh rows m0 + 64 mh..); before(n0) runs before
// the tile's products, whose time hides its loads. epi_in: the backward's map of pre (WARPGROUPS 3 loads its tile for
// the epilogue), else null.
template <class Before, class Epilogue>
__device__ __forceinline__ void gemm(const floatX *a, const floatX *b, const TensorMap &ma, const TensorMap &mb,
                                     const TensorMap *epi_in, unsigned char *smem_bytes, Before before, Epilogue epilogue) {
    floatX *smem = smem_1024(smem_bytes);
    const int wg = threadIdx.x / WG_THREADS, eg = PP && wg < 2 ? wg : 0;   // eg: the thread's epilogue
    auto stage = [&](int kb) { return smem + kb % STAGES * STAGE; };
    floatX *const epi_base = smem + (TMA ? STAGES * STAGE : 0);
    Epi epi;
    epi.tile[0] = epi_base + eg * EPI_REGION;
    epi.tile[1] = epi.tile[0] + BM * EPI_COLS;
    epi.sums = reinterpret_cast<float *>(epi_base + (EPI_SMEM ? EPI_GROUPS * EPI_REGION : 0)) + eg * (EPI_THREADS / WARP_SIZE) * TILE_N;
    float d[MH][ACC];
    auto zero = [&]() {
        for (int h = 0; h < MH; h++)
            for (int x = 0; x < ACC; x++) d[h][x] = 0.0f;
    };
    auto products = [&](int kb) {                    // kb's products issued, then kb - 1's awaited
        const floatX *sb = stage(kb) + BM * BK;
        wgmma_fence();
        for (int kk = 0; kk < BK / 16; kk++)
            for (int h = 0; h < MH; h++) wgmma_ss<0>(d[h], desc_k(stage(kb) + (PP ? h : wg) * 64 * BK, kk), desc_k(sb, kk), 1);
        wgmma_commit();
        wgmma_wait<1>();
    };
    auto done = [&]() {                              // every product is done
        wgmma_wait<0>();
        for (int h = 0; h < MH; h++) pin(d[h]);
    };
    if constexpr (!TMA) {
        const int t = blockIdx.x, m0 = t / N_TILES * BM, n0 = t % N_TILES * TILE_N;
        auto load = [&](int kb) {                    // k-block kb into its stage, by every thread
            load_tile<BM>(stage(kb), a + (long long)m0 * GEMM_K, GEMM_M - m0, kb * BK);
            load_tile<TILE_N>(stage(kb) + BM * BK, b + (long long)n0 * GEMM_K, GEMM_N - n0, kb * BK);
        };
        for (int s = 0; s < STAGES - 2; s++) {       // a group even when there is nothing left to load
            if (s < KBLOCKS) load(s);
            cp_async_commit();
        }
        before(n0);
        zero();
        for (int kb = 0; kb < KBLOCKS; kb++) {
            cp_async_wait<STAGES - 3>();             // kb's copies are in (STAGES - 3 newer groups may still run)
            fence_proxy_async();
            __syncthreads();                         // for every thread; kb - 2's products are done everywhere
            if (kb + STAGES - 2 < KBLOCKS) load(kb + STAGES - 2);
            cp_async_commit();
            products(kb);
        }
        done();
        epi_sync();                                  // both are done with the stages: the epilogue's now
        epi.i = 0;
        epilogue(d, m0, n0, epi);
    } else {
        // turn (TILE_WARPGROUPS 1): consumer warpgroup e has waited for every stage of its tile. The other waits for
        // that before it waits for its next tile's first stage: a wait by parity is only right while the phase waited
        // for is the barrier's next to complete, and the other's tile's k-blocks come before it in the ring (so too
        // the mainloops take turns, one warpgroup's products running while the other's epilogue does)
        __shared__ u64 full[STAGES], empty[STAGES], epi_full[EPI_GROUPS], epi_empty[EPI_GROUPS], turn[EPI_GROUPS];
        const int rank = CLUSTER > 1 ? cluster_rank() : 0;
        if (threadIdx.x == 0) {
            for (int s = 0; s < STAGES; s++) {
                mbar_init(&full[s], 1);
                mbar_init(&empty[s], (PP ? 1 : 2) * CLUSTER);   // the stage's consumers in every block whose copies land here
            }
            for (int e = 0; e < EPI_GROUPS; e++) {
                mbar_init(&epi_full[e], 1);
                mbar_init(&epi_empty[e], 1);
                mbar_init(&turn[e], WG_THREADS);
            }
            mbar_init_fence();
        }
        if (CLUSTER > 1) cluster_sync();             // the pair's barriers are initialized before either signals them
        else __syncthreads();
        epi.full = &epi_full[eg];
        epi.empty = &epi_empty[eg];
        // the block's tiles: group q of CLUSTER row tiles and one column tile, q = the cluster's index, + the clusters,
        // ...; the block takes row tile q / N_TILES * CLUSTER + rank (past the matrix where M_TILES is not a multiple
        // of CLUSTER: zeros loaded, nothing stored). Its i-th tile's k-blocks are the i KBLOCKS.. of the stages' ring;
        // with TILE_WARPGROUPS 1 it goes to epilogue i % 2, as that epilogue's (i / 2)-th.
        const int first = blockIdx.x / CLUSTER, step = gridDim.x / CLUSTER;
        auto m0_of = [&](int q) { return (q / N_TILES * CLUSTER + rank) * BM; };
        // the producer's registers to the consumers (PTX ISA, "setmaxnreg"): 40 + 2 x 232 = 3 x 168, the 384 threads' share
        // of the 64K the launch bounds give them
        if (wg == 2) {
            asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
            if (threadIdx.x == 2 * WG_THREADS)       // one thread issues every copy
                for (int q = first, i = 0, g = 0; q < GROUPS; q += step, i++) {
                    const int m0 = m0_of(q), n0 = q % N_TILES * TILE_N;
                    for (int kb = 0; kb < KBLOCKS; kb++, g++) {
                        u64 *bar = &full[g % STAGES];
                        if (g >= STAGES) mbar_wait(&empty[g % STAGES], (g / STAGES - 1) & 1);
                        mbar_expect(bar, STAGE * 2);
                        tma_load(stage(g), ma, kb * BK, m0, bar);
                        if (CLUSTER > 1) {           // this block's box of B's tile, into every block of the cluster
                            const int r0 = rank * BOX_ROWS;
                            tma_load_multicast(stage(g) + (BM + r0) * BK, mb, kb * BK, n0 + r0, bar, (1 << CLUSTER) - 1);
                        } else {
                            for (int h = 0; h < TILE_N / BOX_ROWS; h++)
                                tma_load(stage(g) + (BM + h * BOX_ROWS) * BK, mb, kb * BK, n0 + h * BOX_ROWS, bar);
                        }
                    }
                    // the backward's tile of pre for the epilogue, after the tile's stages: the epilogue's last tile
                    // is long done (with TILE_WARPGROUPS 1 before them measured slower: the producer then waits for
                    // tile i - 2's epilogue before it loads any of tile i's stages)
                    if (epi_in) {
                        const int e = i % EPI_GROUPS, j = i / EPI_GROUPS;
                        if (j > 0) mbar_wait(&epi_empty[e], (j - 1) & 1);
                        mbar_expect(&epi_full[e], BM * TILE_N * 2);
                        for (int p = 0; p < TILE_N / 64; p++)
                            tma_load(epi_base + e * EPI_REGION + p * BM * 64, *epi_in, n0 + 64 * p, m0, &epi_full[e]);
                    }
                }
        } else {
            asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
            const int i0 = PP ? wg : 0, di = PP ? 2 : 1;   // the block's tiles this warpgroup computes: i0, i0 + di, ..
            if (first + i0 * step < GROUPS) before((first + i0 * step) % N_TILES * TILE_N);
            zero();
            for (int i = i0; first + i * step < GROUPS; i += di) {
                const int q = first + i * step, m0 = m0_of(q), n0 = q % N_TILES * TILE_N, next = q + di * step;
                int g = i * KBLOCKS, freed = g;      // freed: the first k-block whose stage is not released
                auto release_to = [&](int last) {    // the stages of k-blocks freed..last
                    for (; freed <= last; freed++)
                        if (threadIdx.x % WG_THREADS == 0) release(&empty[freed % STAGES]);
                };
                if (PP && i > 0) mbar_wait(&turn[1 - wg], (i - 1) / 2 & 1);   // the other's tile i - 1
                for (int kb = 0; kb < KBLOCKS; kb++, g++) {
                    mbar_wait(&full[g % STAGES], (g / STAGES) & 1);
                    products(g);
                    release_to(g - 1);
                    // the backward: once the last epilogue's TMA store has read its tile, the producer may load the
                    // next tile of pre there (waited for here, after this tile's first products are issued, and not
                    // at the epilogue's end, where the warpgroup would wait with nothing to do)
                    if (epi_in && kb == 0 && i > i0 && etid() == 0) {
                        tma_store_wait_read();
                        mbar_arrive(epi.empty);
                    }
                }
                if (PP) mbar_arrive(&turn[wg]);
                done();
                release_to(g - 1);
                epi.i = i / di;
                epilogue(d, m0, n0, epi);
                zero();
                if (next < GROUPS) before(next % N_TILES * TILE_N);   // after the epilogue (it reads what before stored)
            }
            if (etid() == 0) tma_store_wait();       // the epilogue's last stores are complete before the block ends
        }
        if (CLUSTER > 1) cluster_sync();             // no block ends while the other may still signal its barriers
    }
}

// The epilogue's first step (its threads): its output tiles are free (WARPGROUPS 3: the last TMA stores have read
// them), and with WARPGROUPS 3 the backward's tile of pre has landed (load_in)
__device__ __forceinline__ void epi_begin(const Epi &e, bool load_in) {
    if (TMA) {
        if (etid() == 0) tma_store_wait_read();
        if (load_in) mbar_wait(e.full, e.i & 1);
        epi_sync();
    }
}
// the tile t (W columns) of the epilogue's layout -> rows m0.., columns n0.. of dst: by TMA from the epilogue's thread 0
// (WARPGROUPS 3; map is dst's, the caller commits), else by every thread in 16-byte chunks
template <int W>
__device__ __forceinline__ void tile_store(floatX *dst, const TensorMap &map, const floatX *t, int m0, int n0) {
    if (TMA) {
        if (etid() == 0)
            for (int p = 0; p < W / 64; p++) tma_store(map, t + p * BM * 64, n0 + 64 * p, m0);
        return;
    }
    constexpr int CPR = W / 8;                       // 16-byte chunks of a tile's row
#pragma unroll
    for (int i = 0; i < BM * CPR / 256; i++) {
        const int v = threadIdx.x + i * 256, r = v / CPR, c = v % CPR * 8;
        if (m0 + r < GEMM_M && n0 + c < GEMM_N)
            *reinterpret_cast<uint4 *>(dst + (long long)(m0 + r) * GEMM_N + n0 + c) = *reinterpret_cast<const uint4 *>(t + slot(r, c));
    }
}
// rows m0.., columns n0.. of src -> the tile t (TILE_N columns) of the epilogue's layout (zeros outside the matrix), by
// cp.async and a wait (WARPGROUPS 2; with 3 the producer loads it)
__device__ __forceinline__ void tile_load(floatX *t, const floatX *src, int m0, int n0) {
    constexpr int CPR = TILE_N / 8;
#pragma unroll
    for (int i = 0; i < BM * CPR / 256; i++) {
        const int v = threadIdx.x + i * 256, r = v / CPR, c = v % CPR * 8;
        const bool ok = m0 + r < GEMM_M && n0 + c < GEMM_N;
        cp_async16(t + slot(r, c), src + (ok ? (long long)(m0 + r) * GEMM_N + n0 + c : 0), ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
}

// Where the thread's accumulators go: rows r + 64 mh and r + 64 mh + 8 (half 0, 1) of the block's tile, columns c + 8j
// and c + 8j + 1 of 8-column tile j (common.cuh's layout; warp is the thread's among its epilogue's: with TILE_WARPGROUPS
// 2 warpgroup warp / 4 owns rows 64 (warp / 4).., with 1 each warp its 16 rows of both halves), as offsets in the
// tile (local) and in the matrix (global, -1 outside it).
struct Place {
    int r, c, lane, warp, m0, n0;
    __device__ __forceinline__ Place(int m0_, int n0_) : m0(m0_), n0(n0_) {
        lane = threadIdx.x % WARP_SIZE;
        warp = etid() / WARP_SIZE;
        r = 16 * warp + lane / 4;
        c = lane % 4 * 2;
    }
    __device__ __forceinline__ int local(int mh, int j, int half) const { return slot(r + 64 * mh + 8 * half, c + 8 * j); }
    __device__ __forceinline__ long long global(int mh, int j, int half) const {
        const int row = m0 + r + 64 * mh + 8 * half, col = n0 + c + 8 * j;
        return row < GEMM_M && col < GEMM_N ? (long long)row * GEMM_N + col : -1;
    }
};
#endif

static_assert(STAGES >= 3 || WARPGROUPS == 3,
              "fc_gemm: STAGES of at least 3 (the copies of k-block kb + STAGES - 2 go where kb - 2 was)");
static_assert(!TMA || (EPI_SMEM && TILE_N % 128 == 0), "fc_gemm: WARPGROUPS 3 stores through shared memory (EPI_BYTES 16)");
static_assert(!PP || (TMA && TILE_N == 128 && CLUSTER == 1), "fc_gemm: TILE_WARPGROUPS 1 takes WARPGROUPS 3, TILE_N 128, CLUSTER 1");

KERNEL(fc_gelu_forward) {
#if HOPPER_WGMMA
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    // WARPGROUPS 3: the tile's bias (each epilogue's own), copied by cp.async while the products run (no thread waits
    // for it before its products; the epilogue waits); the last epilogue's reads of it ended at its barrier
    __shared__ __align__(16) floatX bias_s[TMA ? EPI_GROUPS * TILE_N : 8];
    floatX *const bs = bias_s + (PP && threadIdx.x < 2 * WG_THREADS ? threadIdx.x / WG_THREADS * TILE_N : 0);
    auto before = [&](int n0) {
        if (TMA && HAS_BIAS) {
            for (int c = etid() * 8; c < TILE_N; c += EPI_THREADS * 8)
                cp_async16(bs + c, bias + (n0 + c < GEMM_N ? n0 + c : 0), n0 + c < GEMM_N);
            cp_async_commit();
        }
    };
    gemm(inp, weight, tm_inp, tm_weight, nullptr, smem_bytes, before, [&](float (&d)[MH][ACC], int m0, int n0, const Epi &e) {
        floatX *tpre = e.tile[0], *tout = e.tile[1];
        const Place p(m0, n0);
        if (TMA && HAS_BIAS) cp_async_wait<0>();     // the bias (the barrier of epi_begin shows it to every thread)
#pragma unroll
        for (int h = 0; h < TILE_N / EPI_COLS; h++) {   // the passes of EPI_COLS columns
            epi_begin(e, false);
#pragma unroll
            for (int j0 = h * EPI_COLS / 8; j0 < (h + 1) * EPI_COLS / 8; j0 += CHUNK) {
                x2 bc[CHUNK];                        // the chunk's bias (WARPGROUPS 2: all loads in flight before any is used)
                for (int j = 0; j < CHUNK; j++) {
                    const int c = p.c + 8 * (j0 + j);
                    bc[j] = !HAS_BIAS ? x2::zeros() : TMA ? load_vec<floatX, 2>(bs + c)
                            : n0 + c < GEMM_N ? load_vec<floatX, 2>(bias + n0 + c) : x2::zeros();
                }
#pragma unroll
                for (int j = 0; j < CHUNK; j++)
                    for (int mh = 0; mh < MH; mh++)
                        for (int half = 0; half < 2; half++) {
                            x2 pv, ov;
                            for (int v = 0; v < 2; v++) {
                                pv[v] = from_f<floatX>(d[mh][4 * (j0 + j) + 2 * half + v] + to_f(bc[j][v]));
                                ov[v] = from_f<floatX>(act(to_f(pv[v])));   // of the stored pre-activation, as the backward reads it
                            }
                            if (EPI_SMEM) {
                                const int at = p.local(mh, j0 + j - h * EPI_COLS / 8, half);
                                store_vec<floatX, 2>(tpre + at, pv);
                                store_vec<floatX, 2>(tout + at, ov);
                            } else if (const long long i = p.global(mh, j0 + j, half); i >= 0) {
                                store_vec<floatX, 2>(pre + i, pv);
                                store_vec<floatX, 2>(out + i, ov);
                            }
                        }
            }
            if (EPI_SMEM) {
                if (TMA) fence_proxy_async();        // the tiles' writes are visible to the TMA stores
                epi_sync();
                tile_store<EPI_COLS>(pre, tm_pre, tpre, m0, n0 + h * EPI_COLS);
                tile_store<EPI_COLS>(out, tm_out, tout, m0, n0 + h * EPI_COLS);
                if (TMA && etid() == 0) tma_store_commit();
            }
        }
    });
#endif
}

// The column sums s[N] (s[2j + v]: column 8j + v of the 8-column tiles, the thread's pair of each) over the warp's 8
// rows of lanes that hold the same columns (lane % 4 alike), into out[8j + v] (out: the first column of this lane's
// pairs). A reduce-scatter by halves: at each of the lane bits 16, 8, 4 a lane keeps half of its sums (the upper
// where its bit is set) and adds the partner's of that half (one sum left: it adds the partner's), so the N sums
// take N/2 + N/4 + N/8 shuffles (at least one a bit), where summing each over the 8 lanes took 3N. Values are
// selected, not indexed, so the array stays in registers. Fixed order: the same bits on every run.
template <int N> __device__ __forceinline__ void sum_rows(float (&s)[N], float *out, int lane) {
    int base = 0, n = N, same = 0;           // this lane's sums are s[0 .. n-1], those of indices base ..; the lane bits
                                             // of partners that hold the same sums
#pragma unroll
    for (int o = 16; o >= 4; o >>= 1) {
        const bool up = lane & o;
        if (n > 1) {
            n /= 2;
#pragma unroll
            for (int k = 0; k < N / 2; k++)
                if (k < n) {
                    const float send = up ? s[k] : s[k + n], keep = up ? s[k + n] : s[k];
                    s[k] = keep + __shfl_xor_sync(FULL_MASK, send, o);
                }
            if (up) base += n;
        } else {
            s[0] += __shfl_xor_sync(FULL_MASK, s[0], o);
            same |= o;
        }
    }
#pragma unroll
    for (int k = 0; k < N; k++)
        if (k < n && (lane & same) == 0) out[8 * ((base + k) / 2) + (base + k) % 2] = s[k];
}

KERNEL(fcproj_dgelu_backward) {
#if HOPPER_WGMMA
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    gemm(dout, wt, tm_dout, tm_wt, &tm_pre, smem_bytes, [](int) {}, [&](float (&d)[MH][ACC], int m0, int n0, const Epi &e) {
        floatX *tile = e.tile[0];                    // pre, overwritten by dpre in place (each thread its own elements)
        const Place p(m0, n0);
        epi_begin(e, true);
        if (EPI_SMEM && !TMA) {
            tile_load(tile, pre, m0, n0);
            epi_sync();
        }
#pragma unroll
        for (int j0 = 0; j0 < TILE_N / 8; j0 += CHUNK) {
            x2 pre_v[CHUNK][MH][2];                  // the chunk's pre-activations, all loads in flight before any is used
            for (int j = 0; j < CHUNK; j++)
                for (int mh = 0; mh < MH; mh++)
                    for (int half = 0; half < 2; half++) {
                        const long long i = p.global(mh, j0 + j, half);
                        pre_v[j][mh][half] = EPI_SMEM ? load_vec<floatX, 2>(tile + p.local(mh, j0 + j, half))
                                             : i >= 0 ? load_vec<floatX, 2>(pre + i) : x2::zeros();
                    }
            float s[2 * CHUNK];                      // the thread's column sums of the chunk: s[2j + v], column c + 8j + v
#pragma unroll
            for (int j = 0; j < CHUNK; j++) {
                s[2 * j] = s[2 * j + 1] = 0.0f;
                for (int mh = 0; mh < MH; mh++)
                    for (int half = 0; half < 2; half++) {
                        const long long i = p.global(mh, j0 + j, half);
                        x2 g;
                        for (int v = 0; v < 2; v++) {
                            g[v] = from_f<floatX>(d[mh][4 * (j0 + j) + 2 * half + v] * act_grad(to_f(pre_v[j][mh][half][v])));
                            if (i >= 0) s[2 * j + v] += to_f(g[v]);   // the sums are of the stored gradient
                        }
                        if (EPI_SMEM) store_vec<floatX, 2>(tile + p.local(mh, j0 + j, half), g);
                        else if (i >= 0) store_vec<floatX, 2>(dpre + i, g);
                    }
            }
            sum_rows(s, e.sums + p.warp * TILE_N + 8 * j0 + p.c, p.lane);
        }
        if (TMA) fence_proxy_async();                // the tile's writes are visible to the TMA store
        epi_sync();
        if (EPI_SMEM) tile_store<TILE_N>(dpre, tm_dpre, tile, m0, n0);
        if (TMA && etid() == 0) tma_store_commit();
        for (int c = etid(); c < TILE_N; c += EPI_THREADS) {   // the warps' sums, in order
            if (n0 + c >= GEMM_N || m0 >= GEMM_M) continue;   // a cluster's block past the matrix has no partials
            float t = 0.0f;
            for (int w = 0; w < EPI_THREADS / WARP_SIZE; w++) t += e.sums[w * TILE_N + c];
            scratch[(long long)(m0 / BM) * GEMM_N + n0 + c] = t;
        }
        // (WARPGROUPS 3: the sums are read before the next tile's epilogue writes them, as its first barrier says;
        // the producer is told when the tile is read in gemm)
    });
#endif
}

// wt (4C, C) = weight (C, 4C)^T through a 32 x 32 tile in shared memory (a block of 256 threads, 8 rows a pass)
KERNEL(transpose_fcproj) {
    __shared__ floatX tile[32][33];
    const int n0 = blockIdx.x * 32, k0 = blockIdx.y * 32, tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    for (int i = ty; i < 32; i += 8)
        if (k0 + i < GEMM_K && n0 + tx < GEMM_N) tile[i][tx] = weight[(long long)(k0 + i) * GEMM_N + n0 + tx];
    __syncthreads();
    for (int i = ty; i < 32; i += 8)
        if (n0 + i < GEMM_N && k0 + tx < GEMM_K) wt[(long long)(n0 + i) * GEMM_K + k0 + tx] = tile[tx][i];
}

// dbias[n] += the M_TILES partials of column n, in order (a thread a column, eight loads in flight)
KERNEL(fc_bias_reduce) {
    const int n = blockIdx.x * 256 + threadIdx.x;
    if (n >= GEMM_N) return;
    float s = 0.0f;
    int i = 0;
    for (; i + 8 <= M_TILES; i += 8) {
        float v[8];
        for (int u = 0; u < 8; u++) v[u] = scratch[(long long)(i + u) * GEMM_N + n];
        for (int u = 0; u < 8; u++) s += v[u];
    }
    for (; i < M_TILES; i++) s += scratch[(long long)i * GEMM_N + n];
    dbias[n] = from_f<floatX>(to_f(dbias[n]) + s);
}
