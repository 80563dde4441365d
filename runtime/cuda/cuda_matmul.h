/* cuda_matmul: column-major D(m,n) = alpha op(A) op(B) + beta D (+ bias[m] broadcast over columns), strided
   batched, through cuBLASLt, in fp32 or bf16 with fp32 accumulation. The algorithm is chosen by cuBLASLt's
   heuristic once per shape and cached. Leading dimensions follow from the shape (packed matrices). */
#ifndef GPT2GEN_CUDA_MATMUL_H
#define GPT2GEN_CUDA_MATMUL_H
#include "runtime/cuda/cuda_api.h"
#include "gen/config.h"

/* epilogues beyond the bias */
enum { EPI_NONE = 0, EPI_GELU_AUX = 1, EPI_DGELU = 2 };

typedef struct {
    int m, n, k, transA, transB, batch, has_bias, gelu, accumulate;
    float alpha;
    long long strideA, strideB, strideD;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
} MatmulCacheEntry;

typedef struct {
    cublasLtHandle_t handle;
    Precision precision;
    CUdeviceptr workspace;
    size_t workspace_size;
    int n_cache;
    MatmulCacheEntry cache[128];
} Matmul;

int  matmul_init(Matmul *mm, Precision p, Err *err);
void matmul_destroy(Matmul *mm);
/* D = alpha op(A) op(B) (+ D when accumulate) (+ bias), then the epilogue:
   EPI_GELU_AUX: aux = the pre-activation (m x n, like D), D = GELU(pre-activation);
   EPI_DGELU:    D = (alpha op(A) op(B)) * GELU'(aux), aux the saved pre-activation (no bias). */
int  matmul_run_ex(Matmul *mm, CUdeviceptr D, CUdeviceptr A, CUdeviceptr Bm, CUdeviceptr bias, CUdeviceptr aux, int m, int n,
                   int k, int transA, int transB, int batch, long long strideA, long long strideB, long long strideD,
                   int accumulate, int epilogue, float alpha, Err *err);
/* D = op(A) op(B) (+ D when accumulate) (+ bias): matmul_run_ex without an epilogue, alpha 1. */
int  matmul_run(Matmul *mm, CUdeviceptr D, CUdeviceptr A, CUdeviceptr Bm, CUdeviceptr bias, int m, int n, int k,
                int transA, int transB, int batch, long long strideA, long long strideB, long long strideD,
                int accumulate, Err *err);
#endif
