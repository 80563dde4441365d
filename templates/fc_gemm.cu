// fc_gemm.cu: the fc-shaped matmuls of the training step with the GELU fused into them (train.gelu = "fused"), on
// Hopper's warpgroup MMA (sm_90a, bf16 or fp16; elsewhere the kernels are empty and the plan never takes this path).
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
// stages of 64 columns by cp.async, loaded by the same two warpgroups (WARPGROUPS 2: at k-block kb every thread waits
// for kb's copies, a barrier, then the copies of kb + STAGES - 2 start, into the stage of kb - 2, whose products every
// warpgroup has seen finish) or by a third warpgroup that only loads (WARPGROUPS 3: mbarriers say when a stage is full
// and when both consumers are done with it; 132 persistent blocks, whose producer loads the next tile's stages during
// this one's epilogue); kb's four products are issued and the warpgroup waits for kb - 1's. SM_BLOCKS blocks a
// multiprocessor: with two, one block's epilogue (the GELU and the stores) runs while the other's products do. The
// epilogue works from the registers: a thread holds two adjacent columns of rows g and g + 8 of each 8-column tile
// (common.cuh's accumulator layout); its tensors go to and from global memory through shared memory (EPI_BYTES 16) or
// straight (4). Measured on the H200: bench/RESULTS.md, "Issue 22, eleventh pass".
// Fixed summation order everywhere: the same bits on every run.

constexpr int GEMM_M = B * T, GEMM_N = 4 * C, GEMM_K = C;
constexpr int BM = 128, BK = 64;
constexpr int KBLOCKS = (GEMM_K + BK - 1) / BK;
constexpr int ACC = TILE_N / 2;                      // a thread's accumulators
constexpr int STAGE = (BM + TILE_N) * BK;            // elements of a stage: A's rows, then B's
constexpr int CHUNK = 8;                             // 8-column tiles whose epilogue loads are issued together
typedef Packed<floatX, 2> x2;
template <int V> struct Int { static constexpr int value = V; };

#if HOPPER_WGMMA
// GELU and GELU' through the special-function unit's tanh (tanh.approx.f32: relative error at most 2^-10.99, below the
// 16-bit rounding that follows; one special-function operation an element where common.cuh's 16-bit GELU, through
// the logistic function, takes two: the epilogue's 64 or 128 values a thread are bound by that unit)
__device__ __forceinline__ float tanh_approx(float x) {
    float r;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float gelu_tanh(float u) { return gelu_with(u, [](float z) { return tanh_approx(z); }); }
__device__ __forceinline__ float gelu_grad_tanh(float u) { return gelu_grad_with(u, [](float z) { return tanh_approx(z); }); }

// ROWS rows (those at or past `rows` are zeros) of 64 columns from src (row pitch GEMM_K; columns at or past GEMM_K
// are zeros: GEMM_K = n_embd is a multiple of 32) into a swizzled tile, by the NT threads numbered tid
template <int ROWS, int NT>
__device__ __forceinline__ void load_tile(floatX *tile, const floatX *src, int rows, int k0, int tid) {
#pragma unroll
    for (int i = 0; i < ROWS * 8 / NT; i++) {
        const int v = tid + i * NT, r = v / 8, c = v % 8 * 8;
        const bool ok = r < rows && k0 + c < GEMM_K;
        cp_async16(tile + sw128(r, c), src + (ok ? (long long)r * GEMM_K + k0 + c : 0), ok);
    }
}

// mbarriers in shared memory (PTX ISA, "mbarrier"): init with the arrivals a phase expects; an arrival; the arrival of
// this thread's cp.async copies once they have landed (noinc: it counts as one of the expected arrivals); a wait for
// the phase of the given parity to complete
__device__ __forceinline__ void mbar_init(u64 *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64 *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_arrive_copies(u64 *b) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64 *b, int parity) {
    asm volatile("{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}\n"
                 ::"r"(smem_addr(b)), "r"(parity) : "memory");
}
// the two consumer warpgroups' own barrier (named barrier 1; a producer warpgroup, where there is one, is not in it)
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

constexpr int N_TILES = (GEMM_N + TILE_N - 1) / TILE_N, TILES = (int)M_TILES * N_TILES;   // tile t: rows (t / N_TILES)..

// The product of tile t (rows m0 = 128 (t / N_TILES).. of a, rows n0 = TILE_N (t % N_TILES).. of b, the whole k) of
// every tile the block has, each handed to epilogue(d, m0, n0, epi) in the two consumer warpgroups (warpgroup wg: rows
// m0 + 64 wg..). WARPGROUPS 2: a block per tile, both warpgroups load and compute: at k-block kb, kb's copies are
// awaited, a barrier, kb + STAGES - 2's copies start (where kb - 2 was, whose products every warpgroup has seen
// finish), kb's products are issued; the epilogue's shared memory is the stages'. WARPGROUPS 3: the grid's blocks (132: gen/kernels.c) go
// through the tiles t = blockIdx.x, + gridDim.x, ...; warpgroup 2 only loads, the two others only compute, in step
// through two mbarriers a stage: full (the producer's 128 threads' copies have landed) and empty (both consumers'
// products of it are done). The producer refills a stage once it is empty, STAGES k-blocks ahead of the products and
// across tiles, so that the next tile's first stages load during this one's epilogue (which has shared memory of its
// own after the stages).
template <class Epilogue>
__device__ __forceinline__ void gemm(const floatX *a, const floatX *b, floatX *smem, Epilogue epilogue) {
    const int wg = threadIdx.x / WG_THREADS;
    auto stage = [&](int kb) { return smem + kb % STAGES * STAGE; };
    float d[ACC];
    auto products = [&](int kb) {                    // kb's products issued, then kb - 1's awaited
        const floatX *sa = stage(kb) + wg * 64 * BK, *sb = stage(kb) + BM * BK;
        wgmma_fence();
        for (int kk = 0; kk < BK / 16; kk++) wgmma_ss<0>(d, desc_k(sa, kk), desc_k(sb, kk), 1);
        wgmma_commit();
        wgmma_wait<1>();
    };
    auto load = [&](int kb, int t, int tid, auto nt) {   // k-block kb of tile t into stage kb, by nt threads
        constexpr int NT = decltype(nt)::value;
        const int m0 = t / N_TILES * BM, n0 = t % N_TILES * TILE_N, k0 = kb % KBLOCKS * BK;
        load_tile<BM, NT>(stage(kb), a + (long long)m0 * GEMM_K, GEMM_M - m0, k0, tid);
        load_tile<TILE_N, NT>(stage(kb) + BM * BK, b + (long long)n0 * GEMM_K, GEMM_N - n0, k0, tid);
    };
    if constexpr (WARPGROUPS == 2) {
        const int t = blockIdx.x;
        for (int s = 0; s < STAGES - 2; s++) {       // a group even when there is nothing left to load
            if (s < KBLOCKS) load(s, t, threadIdx.x, Int<256>());
            cp_async_commit();
        }
        for (int x = 0; x < ACC; x++) d[x] = 0.0f;
        for (int kb = 0; kb < KBLOCKS; kb++) {
            cp_async_wait<STAGES - 3>();             // kb's copies are in (STAGES - 3 newer groups may still run)
            fence_proxy_async();
            __syncthreads();                         // for every thread; kb - 2's products are done everywhere
            if (kb + STAGES - 2 < KBLOCKS) load(kb + STAGES - 2, t, threadIdx.x, Int<256>());
            cp_async_commit();
            products(kb);
        }
        wgmma_wait<0>();
        pin(d);
        consumers_sync();                            // both are done with the stages: the epilogue's now
        epilogue(d, t / N_TILES * BM, t % N_TILES * TILE_N, smem);
    } else {
        __shared__ u64 full[STAGES], empty[STAGES];
        if (threadIdx.x == 0)
            for (int s = 0; s < STAGES; s++) {
                mbar_init(&full[s], WG_THREADS);
                mbar_init(&empty[s], 2);
            }
        __syncthreads();
        int g = 0;                                   // the block's k-blocks so far, over its tiles
        if (wg == 2) {
            for (int t = blockIdx.x; t < TILES; t += gridDim.x)
                for (int kb = 0; kb < KBLOCKS; kb++, g++) {
                    if (g >= STAGES) mbar_wait(&empty[g % STAGES], (g / STAGES - 1) & 1);
                    load(g, t, threadIdx.x - 2 * WG_THREADS, Int<WG_THREADS>());
                    mbar_arrive_copies(&full[g % STAGES]);
                }
            cp_async_wait<0>();
            return;
        }
        for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
            for (int x = 0; x < ACC; x++) d[x] = 0.0f;
            for (int kb = 0; kb < KBLOCKS; kb++, g++) {
                mbar_wait(&full[g % STAGES], (g / STAGES) & 1);
                fence_proxy_async();                 // the copies are visible to wgmma
                products(g);
                if (kb > 0 && threadIdx.x % WG_THREADS == 0) mbar_arrive(&empty[(g - 1) % STAGES]);
            }
            wgmma_wait<0>();
            pin(d);
            if (threadIdx.x % WG_THREADS == 0) mbar_arrive(&empty[(g - 1) % STAGES]);
            consumers_sync();                        // both are done with the last tile's epilogue
            epilogue(d, t / N_TILES * BM, t % N_TILES * TILE_N, smem + STAGES * STAGE);
        }
    }
}

// The epilogue's tiles: with EPI_BYTES 16 a tensor's 128 x TILE_N tile goes through shared memory (the stages are free by
// then; rows of TP elements, 16 bytes of padding: a warp's 4-byte accesses of 8 rows and 4 pairs of columns fall in
// 32 banks), so that global memory sees whole 16-byte chunks of rows; with 4 each thread reads and writes its own pairs
// of columns there (4-byte accesses, 8 rows a warp instruction).
constexpr bool EPI_SMEM = EPI_BYTES == 16;
constexpr int TP = TILE_N + 8;
constexpr int CPR = TILE_N / 8;                      // 16-byte chunks of a tile's row
// the tile t (pitch TP) -> rows m0.., columns n0.. of dst
__device__ __forceinline__ void tile_store(floatX *dst, const floatX *t, int m0, int n0) {
#pragma unroll
    for (int i = 0; i < BM * CPR / 256; i++) {
        const int v = threadIdx.x + i * 256, r = v / CPR, c = v % CPR * 8;
        if (m0 + r < GEMM_M && n0 + c < GEMM_N)
            *reinterpret_cast<uint4 *>(dst + (long long)(m0 + r) * GEMM_N + n0 + c) = *reinterpret_cast<const uint4 *>(t + r * TP + c);
    }
}
// rows m0.., columns n0.. of src -> the tile t (zeros outside the matrix), by cp.async: the caller waits
__device__ __forceinline__ void tile_load(floatX *t, const floatX *src, int m0, int n0) {
#pragma unroll
    for (int i = 0; i < BM * CPR / 256; i++) {
        const int v = threadIdx.x + i * 256, r = v / CPR, c = v % CPR * 8;
        const bool ok = m0 + r < GEMM_M && n0 + c < GEMM_N;
        cp_async16(t + r * TP + c, src + (ok ? (long long)(m0 + r) * GEMM_N + n0 + c : 0), ok);
    }
    cp_async_commit();
}

// Where the thread's accumulators go: rows r and r + 8 (half 0, 1) of the block's tile, columns c + 8j and c + 8j + 1
// of 8-column tile j (common.cuh's layout; warpgroup warp / 4 owns rows 64 (warp / 4)..), as offsets in the tile
// (local) and in the matrix (global, -1 outside it).
struct Place {
    int r, c, lane, warp, m0, n0;
    __device__ __forceinline__ Place(int m0_, int n0_) : m0(m0_), n0(n0_) {
        lane = threadIdx.x % WARP_SIZE;
        warp = threadIdx.x / WARP_SIZE;
        r = 16 * warp + lane / 4;
        c = lane % 4 * 2;
    }
    __device__ __forceinline__ int local(int j, int half) const { return (r + 8 * half) * TP + c + 8 * j; }
    __device__ __forceinline__ long long global(int j, int half) const {
        const int row = m0 + r + 8 * half, col = n0 + c + 8 * j;
        return row < GEMM_M && col < GEMM_N ? (long long)row * GEMM_N + col : -1;
    }
};
#endif

static_assert(STAGES >= 3 || WARPGROUPS == 3,
              "fc_gemm: STAGES of at least 3 (the copies of k-block kb + STAGES - 2 go where kb - 2 was)");

KERNEL(fc_gelu_forward) {
#if HOPPER_WGMMA
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    gemm(inp, weight, smem_1024(smem_bytes), [&](float (&d)[ACC], int m0, int n0, floatX *epi) {
        floatX *tpre = epi, *tout = epi + BM * TP;
        const Place p(m0, n0);
#pragma unroll
        for (int j0 = 0; j0 < TILE_N / 8; j0 += CHUNK) {
            x2 bb[CHUNK];                            // the chunk's loads, all in flight before any is used
            for (int j = 0; j < CHUNK; j++) {
                const int col = n0 + p.c + 8 * (j0 + j);
                bb[j] = col < GEMM_N ? load_vec<floatX, 2>(bias + col) : x2::zeros();
            }
#pragma unroll
            for (int j = 0; j < CHUNK; j++)
                for (int half = 0; half < 2; half++) {
                    x2 pv, ov;
                    for (int e = 0; e < 2; e++) {
                        pv[e] = from_f<floatX>(d[4 * (j0 + j) + 2 * half + e] + to_f(bb[j][e]));
                        ov[e] = from_f<floatX>(gelu_tanh(to_f(pv[e])));   // of the stored pre-activation, as the backward reads it
                    }
                    if (EPI_SMEM) {
                        store_vec<floatX, 2>(tpre + p.local(j0 + j, half), pv);
                        store_vec<floatX, 2>(tout + p.local(j0 + j, half), ov);
                    } else if (const long long i = p.global(j0 + j, half); i >= 0) {
                        store_vec<floatX, 2>(pre + i, pv);
                        store_vec<floatX, 2>(out + i, ov);
                    }
                }
        }
        if (EPI_SMEM) {
            consumers_sync();
            tile_store(pre, tpre, m0, n0);
            tile_store(out, tout, m0, n0);
        }
    });
#endif
}

KERNEL(fcproj_dgelu_backward) {
#if HOPPER_WGMMA
    extern __shared__ __align__(16) unsigned char smem_bytes[];
    gemm(dout, wt, smem_1024(smem_bytes), [&](float (&d)[ACC], int m0, int n0, floatX *epi) {
        floatX *tpre = epi, *tg = epi + BM * TP;
        float *sums = reinterpret_cast<float *>(epi + (EPI_SMEM ? 2 * BM * TP : 0));   // [warp][TILE_N]
        const Place p(m0, n0);
        if (EPI_SMEM) {
            tile_load(tpre, pre, m0, n0);
            cp_async_wait<0>();
            consumers_sync();
        }
#pragma unroll
        for (int j0 = 0; j0 < TILE_N / 8; j0 += CHUNK) {
            x2 pre_v[CHUNK][2];                      // the chunk's pre-activations, all loads in flight before any is used
            for (int j = 0; j < CHUNK; j++)
                for (int half = 0; half < 2; half++) {
                    const long long i = p.global(j0 + j, half);
                    pre_v[j][half] = EPI_SMEM ? load_vec<floatX, 2>(tpre + p.local(j0 + j, half))
                                     : i >= 0 ? load_vec<floatX, 2>(pre + i) : x2::zeros();
                }
#pragma unroll
            for (int j = 0; j < CHUNK; j++) {
                float s[2] = {0.0f, 0.0f};
                for (int half = 0; half < 2; half++) {
                    const long long i = p.global(j0 + j, half);
                    x2 g;
                    for (int e = 0; e < 2; e++) {
                        g[e] = from_f<floatX>(d[4 * (j0 + j) + 2 * half + e] * gelu_grad_tanh(to_f(pre_v[j][half][e])));
                        if (i >= 0) s[e] += to_f(g[e]);   // the sums are of the stored gradient
                    }
                    if (EPI_SMEM) store_vec<floatX, 2>(tg + p.local(j0 + j, half), g);
                    else if (i >= 0) store_vec<floatX, 2>(dpre + i, g);
                }
                for (int e = 0; e < 2; e++) {        // over the warp's 16 rows: the lanes of one column
                    for (int o = 4; o < WARP_SIZE; o <<= 1) s[e] += __shfl_xor_sync(FULL_MASK, s[e], o);
                    if (p.lane < 4) sums[p.warp * TILE_N + 8 * (j0 + j) + 2 * p.lane + e] = s[e];
                }
            }
        }
        consumers_sync();
        if (EPI_SMEM) tile_store(dpre, tg, m0, n0);
        for (int c = threadIdx.x; c < TILE_N; c += 256) {   // the warps' sums, in order
            if (n0 + c >= GEMM_N) continue;
            float t = 0.0f;
            for (int w = 0; w < 8; w++) t += sums[w * TILE_N + c];
            scratch[(long long)(m0 / BM) * GEMM_N + n0 + c] = t;
        }
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
