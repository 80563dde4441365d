/* test_hopper_probe: the first step toward an attention template on Hopper's warpgroup MMA (docs/hopper-attention.md,
   section 7, steps 1, 1b and 1c). One wgmma.mma_async m64n64k16 (four k-steps: K = 64) in each of the forms an
   attention kernel needs, against an fp64 product on the host:
     ss     A and B from shared memory, both K-major                  (S = Q K^T)
     rs     A from registers, B K-major                               (the A-from-registers fragment map)
     ss_mn  A K-major, B N-major (imm-trans-b 1)                      (O = P V with V as stored)
     rs_mn  A from registers, B N-major                               (P V with P kept in registers)
   The tiles are 64 rows of 64 bf16 (128 bytes) in the 128-byte swizzle (16-byte chunk c of row r at c ^ (r % 8)),
   1024-byte aligned; each thread writes its accumulators where the fragment map says they belong. A failure says
   where the first wrong value is and whether the result is the expected one transposed, which tells a swizzle or
   descriptor error from a fragment-map error.
   Everywhere: the probes compile with NVRTC for sm_90a (skipped without NVRTC). On a Hopper GPU they run; elsewhere
   that part is skipped. Nothing of gpt2gen's training uses these instructions yet. */
#include "tests/check.h"
#include "common/bf16.h"
#include "common/rng.h"
#include "gen/nvrtc.h"
#include "runtime/cuda/device.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char probe_src[] =
    "typedef unsigned int u32;\n"
    "typedef unsigned long long u64;\n"
    "typedef unsigned short u16;   // bf16 bits: the probes only move them\n"
    "__device__ __forceinline__ u32 smem_u32(const void *p) { return (u32)__cvta_generic_to_shared(p); }\n"
    "// element (r, c) of a tile of 64-element (128-byte) rows in the 128-byte swizzle\n"
    "__device__ __forceinline__ int sw128(int r, int c) { return r * 64 + ((((c >> 3) ^ (r & 7)) << 3) | (c & 7)); }\n"
    "// shared-memory matrix descriptor, 128-byte swizzle: start, LBO, SBO in 16-byte units; mode 1 in bits 62-63\n"
    "__device__ __forceinline__ u64 desc128(u32 addr, u32 lbo, u32 sbo) {\n"
    "    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo & 0x3FFFF) >> 4) << 16) | ((u64)((sbo & 0x3FFFF) >> 4) << 32) |\n"
    "           (1ull << 62);\n"
    "}\n"
    "#define ACC32 \"{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}\"\n"
    "#define ACC_OUT(d) \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7]), \\\n"
    "    \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), \"+f\"(d[15]), \\\n"
    "    \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), \"+f\"(d[23]), \\\n"
    "    \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), \"+f\"(d[31])\n"
    "template <int TRANS_B>\n"
    "__device__ __forceinline__ void mma_ss(float (&d)[32], u64 da, u64 db, int accumulate) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %34, 0;\\n\"\n"
    "                 \"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 \" ACC32 \", %32, %33, p, 1, 1, 0, %35;\\n}\\n\"\n"
    "                 : ACC_OUT(d) : \"l\"(da), \"l\"(db), \"r\"(accumulate), \"n\"(TRANS_B) : \"memory\");\n"
    "}\n"
    "template <int TRANS_B>\n"
    "__device__ __forceinline__ void mma_rs(float (&d)[32], const u32 (&a)[4], u64 db, int accumulate) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %37, 0;\\n\"\n"
    "                 \"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 \" ACC32 \", {%32,%33,%34,%35}, %36, p, 1, 1, %38;\\n}\\n\"\n"
    "                 : ACC_OUT(d) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(accumulate), \"n\"(TRANS_B)\n"
    "                 : \"memory\");\n"
    "}\n"
    "// out = A (64 x 64, row-major: m, k) times B, where B is given as Bt (n, k) rows when K-major and as (k, n) rows when\n"
    "// N-major; A from shared memory or (REG_A) from registers. flags[0] = 1 where a tile is not 1024-byte aligned.\n"
    "template <int REG_A, int N_MAJOR>\n"
    "__device__ void probe(float *out, int *flags, const u16 *A, const u16 *B) {\n"
    "    __shared__ __align__(1024) u16 sA[64 * 64];\n"
    "    __shared__ __align__(1024) u16 sB[64 * 64];\n"
    "    const int tid = threadIdx.x, w = tid / 32, g = (tid % 32) / 4, t = tid % 4;\n"
    "    for (int i = tid; i < 64 * 64; i += 128) { sA[sw128(i / 64, i % 64)] = A[i]; sB[sw128(i / 64, i % 64)] = B[i]; }\n"
    "    if (tid == 0 && ((smem_u32(sA) | smem_u32(sB)) & 1023)) flags[0] = 1;\n"
    "    asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n"
    "    __syncthreads();\n"
    "    float d[32];\n"
    "    for (int i = 0; i < 32; i++) d[i] = 0.0f;\n"
    "    u32 a[4][4];   // k-step kb: a[kb][r] = {a_2r, a_2r+1}, the lower element in the low half\n"
    "    for (int kb = 0; kb < 4; kb++)\n"
    "        for (int r = 0; r < 4; r++) {\n"
    "            const int row = 16 * w + g + 8 * (r & 1), col = 16 * kb + 2 * t + 8 * (r >> 1);\n"
    "            a[kb][r] = (u32)A[row * 64 + col] | ((u32)A[row * 64 + col + 1] << 16);\n"
    "        }\n"
    "    asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n"
    "#pragma unroll\n"
    "    for (int kb = 0; kb < 4; kb++) {\n"
    "        // K-major B: the next 16 k are 32 bytes along the row; N-major B: 16 rows further, 2048 bytes\n"
    "        const u64 db = N_MAJOR ? desc128(smem_u32(sB) + kb * 2048, 64 * 64 * 2, 1024) : desc128(smem_u32(sB) + kb * 32, 16, 1024);\n"
    "        if (REG_A) mma_rs<N_MAJOR>(d, a[kb], db, kb > 0);\n"
    "        else mma_ss<N_MAJOR>(d, desc128(smem_u32(sA) + kb * 32, 16, 1024), db, kb > 0);\n"
    "    }\n"
    "    asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n"
    "    asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n"
    "    for (int i = 0; i < 32; i++) {\n"
    "        const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);\n"
    "        out[row * 64 + col] = d[i];\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(128) probe_ss(float *o, int *f, const u16 *A, const u16 *B) { probe<0, 0>(o, f, A, B); }\n"
    "extern \"C\" __global__ void __launch_bounds__(128) probe_rs(float *o, int *f, const u16 *A, const u16 *B) { probe<1, 0>(o, f, A, B); }\n"
    "extern \"C\" __global__ void __launch_bounds__(128) probe_ss_mn(float *o, int *f, const u16 *A, const u16 *B) { probe<0, 1>(o, f, A, B); }\n"
    "extern \"C\" __global__ void __launch_bounds__(128) probe_rs_mn(float *o, int *f, const u16 *A, const u16 *B) { probe<1, 1>(o, f, A, B); }\n";

static CompileJob job;
static int compiled;   /* 1 compiled, -1 no NVRTC (skip), -2 failed */
static Err compile_err;   /* why there is no NVRTC */

static void test_probes_compile(void) {
    Err err = {{0}};
    if (nvrtc_ready(NULL, &err)) {
        compiled = -1;
        compile_err = err;
        SKIP("no NVRTC to compile with: %s", err.msg);
    }
    memset(&job, 0, sizeof job);
    job.name = "hopper_probe";
    job.source = probe_src;
    job.source_path = "tests/test_hopper_probe.c (probe_src)";
    job.arch = "sm_90a";
    if (nvrtc_compile_all(&job, 1, NULL, 1, &err)) {
        compiled = -2;
        CHECK(0, "NVRTC for sm_90a: %s", err.msg);
        return;
    }
    compiled = 1;
    CHECK(job.cubin && job.cubin_size > 0, "no CUBIN");
}

/* ref[m][n] = sum_k A[m][k] B(k, n), in fp64; B(k, n) = B[n][k] when K-major, B[k][n] when N-major */
static void reference(double *ref, const float *A, const float *B, int n_major) {
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < 64; n++) {
            double s = 0;
            for (int k = 0; k < 64; k++) s += (double)A[m * 64 + k] * (n_major ? B[k * 64 + n] : B[n * 64 + k]);
            ref[m * 64 + n] = s;
        }
}

static double max_err(const float *got, const double *ref, int transposed) {
    double e = 0;
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < 64; n++) e = worse(e, fabs(got[m * 64 + n] - ref[transposed ? n * 64 + m : m * 64 + n]));
    return e;
}

static void run_probe(const char *kernel, int n_major) {
    if (compiled == -1) SKIP("no NVRTC: %s", compile_err.msg);
    if (compiled != 1) { CHECK(0, "the probes did not compile"); return; }
    Err err = {{0}};
    CudaDevice dev;
    if (cuda_device_open(&dev, 0, &err)) SKIP("%s", err.msg);
    if (dev.cc_major != 9) {
        cuda_device_close(&dev);
        SKIP("%s is sm_%d%d: wgmma needs sm_90 (Hopper)", dev.name, dev.cc_major, dev.cc_minor);
    }
    uint64_t rng = 2026;
    float A[64 * 64], B[64 * 64], got[64 * 64];
    uint16_t a16[64 * 64], b16[64 * 64];
    for (int i = 0; i < 64 * 64; i++) {
        a16[i] = bf16_from_f32(2.0f * rng_uniform(&rng) - 1.0f);
        b16[i] = bf16_from_f32(2.0f * rng_uniform(&rng) - 1.0f);
        A[i] = bf16_to_f32(a16[i]);
        B[i] = bf16_to_f32(b16[i]);
    }
    static double ref[64 * 64];
    reference(ref, A, B, n_major);
    CUmodule mod = NULL;
    CUfunction fn = NULL;
    CUdeviceptr dout = 0, dflags = 0, dA = 0, dB = 0;
    int flags = 0;
    int bad = cu.cuModuleLoadData(&mod, job.cubin) != CUDA_SUCCESS || cu.cuModuleGetFunction(&fn, mod, kernel) != CUDA_SUCCESS ||
              cu.cuMemAlloc(&dout, sizeof got) != CUDA_SUCCESS || cu.cuMemAlloc(&dflags, sizeof flags) != CUDA_SUCCESS ||
              cu.cuMemAlloc(&dA, sizeof a16) != CUDA_SUCCESS || cu.cuMemAlloc(&dB, sizeof b16) != CUDA_SUCCESS ||
              cu.cuMemcpyHtoD(dA, a16, sizeof a16) != CUDA_SUCCESS || cu.cuMemcpyHtoD(dB, b16, sizeof b16) != CUDA_SUCCESS ||
              cu.cuMemcpyHtoD(dflags, &flags, sizeof flags) != CUDA_SUCCESS;
    CHECK(!bad, "loading %s or its buffers failed", kernel);
    if (!bad) {
        void *args[] = {&dout, &dflags, &dA, &dB};
        CUresult r = cu.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, NULL, args, NULL);
        if (r == CUDA_SUCCESS) r = cu.cuCtxSynchronize();
        const char *name = NULL;
        if (r != CUDA_SUCCESS) cu.cuGetErrorName(r, &name);
        CHECK(r == CUDA_SUCCESS, "%s: launch or run failed: %s", kernel, name ? name : "?");
        if (r == CUDA_SUCCESS && cu.cuMemcpyDtoH(got, dout, sizeof got) == CUDA_SUCCESS &&
            cu.cuMemcpyDtoH(&flags, dflags, sizeof flags) == CUDA_SUCCESS) {
            CHECK(!flags, "%s: a tile in shared memory is not 1024-byte aligned", kernel);
            double e = max_err(got, ref, 0);
            int first = -1;
            for (int i = 0; i < 64 * 64 && first < 0; i++) if (!(fabs(got[i] - ref[i]) <= 1e-3)) first = i;
            CHECK(e <= 1e-3, "%s: max error %.3g; first wrong at (row %d, col %d): %g, expected %g; against the "
                  "transposed product: max error %.3g", kernel, e, first / 64, first % 64, first >= 0 ? got[first] : 0.0,
                  first >= 0 ? ref[first] : 0.0, max_err(got, ref, 1));
            printf("     %s: max error %.2e over 64 x 64 (K = 64)\n", kernel, e);
        }
    }
    if (dout) cu.cuMemFree(dout);
    if (dflags) cu.cuMemFree(dflags);
    if (dA) cu.cuMemFree(dA);
    if (dB) cu.cuMemFree(dB);
    if (mod) cu.cuModuleUnload(mod);
    cuda_device_close(&dev);
}

static void test_wgmma_ss(void) { run_probe("probe_ss", 0); }
static void test_wgmma_rs(void) { run_probe("probe_rs", 0); }
static void test_wgmma_ss_n_major(void) { run_probe("probe_ss_mn", 1); }
static void test_wgmma_rs_n_major(void) { run_probe("probe_rs_mn", 1); }

int main(int argc, char **argv) {
    check_filter = argc > 1 ? argv[1] : NULL;
    RUN(test_probes_compile);
    RUN(test_wgmma_ss);
    RUN(test_wgmma_rs);
    RUN(test_wgmma_ss_n_major);
    RUN(test_wgmma_rs_n_major);
    free(job.cubin);
    return check_summary();
}
