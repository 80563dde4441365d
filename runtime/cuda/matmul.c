/* matmul: cuBLASLt for the plan's matmuls (see matmul.h). */
#include "runtime/cuda/matmul.h"
#include "common/err.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int lt_check(cublasStatus_t s, const char *what, const PlanMatmul *m, Err *err) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    return err_set(err, "%s for matmul %s (m=%d n=%d k=%d batch=%d): %s", what, m->name, m->m, m->n, m->k, m->batch,
                   lt.cublasLtGetStatusString(s));
}

static int make_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int rows, int cols, const PlanMatmul *m,
                       long long stride, Err *err) {
    if (lt_check(lt.cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, rows), "cublasLtMatrixLayoutCreate", m, err))
        return -1;
    if (m->batch > 1) {
        int batch = m->batch;
        int64_t st = stride;
        lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
        lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st);
    }
    return 0;
}

static cublasLtEpilogue_t epilogue_of(const PlanMatmul *m) {
    switch (m->epilogue) {
    case EPI_GELU_AUX: return m->bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case EPI_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    default: return m->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    }
}

static int prepare(Matmuls *mm, MatmulEntry *e, cudaDataType_t t, Err *err) {
    const PlanMatmul *m = &e->shape;
    if (m->epilogue == EPI_DGELU && m->bias) return err_set(err, "matmul %s: the DGELU epilogue takes no bias", m->name);
    if (lt_check(lt.cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", m, err))
        return -1;
    cublasOperation_t opA = m->transA ? CUBLAS_OP_T : CUBLAS_OP_N, opB = m->transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = epilogue_of(m);
    lt.cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    lt.cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    lt.cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (m->epilogue != EPI_NONE) {
        int64_t ld_aux = m->m;
        lt.cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux);
    }
    if (make_layout(&e->a, t, m->transA ? m->k : m->m, m->transA ? m->m : m->k, m, m->strideA, err) ||
        make_layout(&e->b, t, m->transB ? m->n : m->k, m->transB ? m->k : m->n, m, m->strideB, err) ||
        make_layout(&e->d, t, m->m, m->n, m, m->strideD, err))
        return -1;
    cublasLtMatmulPreference_t pref = NULL;
    if (lt_check(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", m, err)) return -1;
    uint64_t ws = mm->workspace_size;
    lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    cublasStatus_t s = lt.cublasLtMatmulAlgoGetHeuristic(mm->handle, e->desc, e->a, e->b, e->d, e->d, pref, 1, &h, &found);
    lt.cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && found == 0) s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (lt_check(s, "cuBLASLt has no algorithm", m, err)) return -1;
    e->algo = h.algo;
    return 0;
}

int matmuls_init(Matmuls *mm, const PlanMatmul *entries, int n, Precision p, CUdeviceptr workspace,
                 size_t workspace_size, Err *err) {
    memset(mm, 0, sizeof *mm);
    if (cublaslt_open(err)) return -1;
    cublasStatus_t s = lt.cublasLtCreate(&mm->handle);
    if (s != CUBLAS_STATUS_SUCCESS) return err_set(err, "cublasLtCreate: %s", lt.cublasLtGetStatusString(s));
    mm->workspace = workspace;
    mm->workspace_size = workspace_size;
    mm->entries = xcalloc((size_t)n, sizeof *mm->entries);
    mm->n = n;
    for (int i = 0; i < n; i++) {
        mm->entries[i].shape = entries[i];
        cudaDataType_t t = p == PREC_FP32 ? CUDA_R_32F : p == PREC_FP16 ? CUDA_R_16F : CUDA_R_16BF;
        if (prepare(mm, &mm->entries[i], t, err)) { matmuls_destroy(mm); return -1; }
    }
    return 0;
}

void matmuls_destroy(Matmuls *mm) {
    for (int i = 0; i < mm->n; i++) {
        MatmulEntry *e = &mm->entries[i];
        if (e->a) lt.cublasLtMatrixLayoutDestroy(e->a);
        if (e->b) lt.cublasLtMatrixLayoutDestroy(e->b);
        if (e->d) lt.cublasLtMatrixLayoutDestroy(e->d);
        if (e->desc) lt.cublasLtMatmulDescDestroy(e->desc);
    }
    free(mm->entries);
    if (mm->handle) lt.cublasLtDestroy(mm->handle);
    memset(mm, 0, sizeof *mm);
}

int matmul_run(const Matmuls *mm, int id, CUstream stream, CUdeviceptr D, CUdeviceptr A, CUdeviceptr B,
               CUdeviceptr bias, CUdeviceptr aux, float alpha, Err *err) {
    const MatmulEntry *e = &mm->entries[id];
    const PlanMatmul *m = &e->shape;
    if (m->bias != (bias != 0)) return err_set(err, "matmul %s: %s", m->name, m->bias ? "needs a bias" : "takes no bias");
    if ((m->epilogue != EPI_NONE) != (aux != 0)) return err_set(err, "matmul %s: aux given for no epilogue, or missing", m->name);
    if (bias) {
        void *bp = (void *)(uintptr_t)bias;
        lt.cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
    }
    if (aux) {
        void *ap = (void *)(uintptr_t)aux;
        lt.cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap, sizeof ap);
    }
    const float beta = m->accumulate ? 1.0f : 0.0f;
    cublasStatus_t s = lt.cublasLtMatmul(mm->handle, e->desc, &alpha, (const void *)(uintptr_t)A, e->a,
                                         (const void *)(uintptr_t)B, e->b, &beta, (const void *)(uintptr_t)D, e->d,
                                         (void *)(uintptr_t)D, e->d, &e->algo, (void *)(uintptr_t)mm->workspace,
                                         mm->workspace_size, stream);
    return lt_check(s, "cublasLtMatmul", m, err);
}
