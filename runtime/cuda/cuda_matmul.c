#include "runtime/cuda/cuda_matmul.h"
#include <string.h>

#define WORKSPACE_BYTES (32u << 20)

int matmul_init(Matmul *mm, Precision p, Err *err) {
    memset(mm, 0, sizeof *mm);
    if (cublaslt_open(err)) return -1;
    if (p == PREC_FP16) return err_set(err, "the CUDA backend supports fp32 and bf16; fp16 is not implemented yet");
    mm->precision = p;
    cublasStatus_t s = lt.cublasLtCreate(&mm->handle);
    if (s != CUBLAS_STATUS_SUCCESS) return err_set(err, "cublasLtCreate: %s", lt.cublasLtGetStatusString(s));
    mm->workspace_size = WORKSPACE_BYTES;
    char eb[256];
    CUresult r = cu.cuMemAlloc(&mm->workspace, mm->workspace_size);
    if (r != CUDA_SUCCESS) return err_set(err, "cuBLASLt workspace (%u MiB): %s", WORKSPACE_BYTES >> 20, cuda_err_string(r, eb, sizeof eb));
    return 0;
}

void matmul_destroy(Matmul *mm) {
    if (mm->workspace) cu.cuMemFree(mm->workspace);
    if (mm->handle) lt.cublasLtDestroy(mm->handle);
    memset(mm, 0, sizeof *mm);
}

static int layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int rows, int cols, int batch, long long stride, Err *err) {
    cublasStatus_t s = lt.cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, rows);
    if (s != CUBLAS_STATUS_SUCCESS) return err_set(err, "cublasLtMatrixLayoutCreate: %s", lt.cublasLtGetStatusString(s));
    if (batch > 1) {
        lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
        int64_t st = stride;
        lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st);
    }
    return 0;
}

int matmul_run(Matmul *mm, CUdeviceptr D, CUdeviceptr A, CUdeviceptr Bm, CUdeviceptr bias, int m, int n, int k,
               int transA, int transB, int batch, long long strideA, long long strideB, long long strideD,
               int accumulate, Err *err) {
    return matmul_run_ex(mm, D, A, Bm, bias, 0, m, n, k, transA, transB, batch, strideA, strideB, strideD, accumulate,
                         EPI_NONE, 1.0f, err);
}

int matmul_run_ex(Matmul *mm, CUdeviceptr D, CUdeviceptr A, CUdeviceptr Bm, CUdeviceptr bias, CUdeviceptr aux, int m, int n,
                  int k, int transA, int transB, int batch, long long strideA, long long strideB, long long strideD,
                  int accumulate, int gelu, float alpha, Err *err) {
    cudaDataType_t t = mm->precision == PREC_FP32 ? CUDA_R_32F : CUDA_R_16BF;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    int rc = -1;
    cublasStatus_t s = lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s != CUBLAS_STATUS_SUCCESS) { err_set(err, "cublasLtMatmulDescCreate: %s", lt.cublasLtGetStatusString(s)); goto done; }
    cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N, opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    cublasLtEpilogue_t epi = gelu == EPI_GELU_AUX ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                           : gelu == EPI_DGELU  ? CUBLASLT_EPILOGUE_DGELU
                           : bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (gelu == EPI_DGELU && bias) { err_set(err, "matmul: DGELU takes no bias"); goto done; }
    lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (gelu) {
        void *ap = (void *)(uintptr_t)aux;
        int64_t ld_aux = m;
        lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap, sizeof ap);
        lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux);
    }
    if (bias) {
        void *bp = (void *)(uintptr_t)bias;
        lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
    }
    if (layout(&la, t, transA ? k : m, transA ? m : k, batch, strideA, err) ||
        layout(&lb, t, transB ? n : k, transB ? k : n, batch, strideB, err) ||
        layout(&ld, t, m, n, batch, strideD, err)) goto done;

    MatmulCacheEntry key = {m, n, k, transA, transB, batch, bias != 0, gelu, accumulate, alpha, strideA, strideB, strideD, {{0}}, 0};
    MatmulCacheEntry *e = NULL;
    for (int i = 0; i < mm->n_cache && !e; i++) {
        MatmulCacheEntry *c = &mm->cache[i];
        if (c->m == m && c->n == n && c->k == k && c->transA == transA && c->transB == transB && c->batch == batch &&
            c->has_bias == key.has_bias && c->gelu == gelu && c->accumulate == accumulate && c->strideA == strideA &&
            c->strideB == strideB && c->strideD == strideD) e = c;
    }
    if (!e) {
        lt.cublasLtMatmulPreferenceCreate(&pref);
        uint64_t ws = mm->workspace_size;
        lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        cublasLtMatmulHeuristicResult_t h;
        int found = 0;
        s = lt.cublasLtMatmulAlgoGetHeuristic(mm->handle, desc, la, lb, ld, ld, pref, 1, &h, &found);
        if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
            err_set(err, "cuBLASLt has no algorithm for %s matmul m=%d n=%d k=%d trans=%d%d batch=%d bias=%d gelu=%d: %s",
                    t == CUDA_R_32F ? "fp32" : "bf16", m, n, k, transA, transB, batch, bias != 0, gelu,
                    lt.cublasLtGetStatusString(s));
            goto done;
        }
        key.algo = h.algo;
        key.workspace = h.workspaceSize;
        if (mm->n_cache < (int)(sizeof mm->cache / sizeof mm->cache[0])) { mm->cache[mm->n_cache] = key; e = &mm->cache[mm->n_cache++]; }
        else e = &key;
    }
    const float beta = accumulate ? 1.0f : 0.0f;
    s = lt.cublasLtMatmul(mm->handle, desc, &alpha, (const void *)(uintptr_t)A, la, (const void *)(uintptr_t)Bm, lb, &beta,
                          (const void *)(uintptr_t)D, ld, (void *)(uintptr_t)D, ld, &e->algo,
                          (void *)(uintptr_t)mm->workspace, mm->workspace_size, 0);
    if (s != CUBLAS_STATUS_SUCCESS) {
        err_set(err, "cublasLtMatmul m=%d n=%d k=%d batch=%d: %s", m, n, k, batch, lt.cublasLtGetStatusString(s));
        goto done;
    }
    rc = 0;
done:
    if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
    if (la) lt.cublasLtMatrixLayoutDestroy(la);
    if (lb) lt.cublasLtMatrixLayoutDestroy(lb);
    if (ld) lt.cublasLtMatrixLayoutDestroy(ld);
    if (desc) lt.cublasLtMatmulDescDestroy(desc);
    return rc;
}
