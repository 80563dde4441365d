/* matmul: cuBLASLt for the plan's matmuls (see matmul.h). */
#include "runtime/cuda/matmul.h"
#include "common/err.h"
#include <stdint.h>
#include <stdio.h>
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

/* cuBLASLt's first max heuristic algorithms for entry e (at least one, else an error) */
static int matmul_heuristics(const Matmuls *mm, const MatmulEntry *e, int max, cublasLtMatmulHeuristicResult_t *h,
                             int *found, Err *err) {
    const PlanMatmul *m = &e->shape;
    cublasLtMatmulPreference_t pref = NULL;
    if (lt_check(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", m, err)) return -1;
    uint64_t ws = mm->workspace_size;
    lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    *found = 0;
    cublasStatus_t s = lt.cublasLtMatmulAlgoGetHeuristic(mm->handle, e->desc, e->a, e->b, e->d, e->d, pref, max, h, found);
    lt.cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && *found == 0) s = CUBLAS_STATUS_NOT_SUPPORTED;
    return lt_check(s, "cuBLASLt has no algorithm", m, err);
}

void matmul_algo_describe(const cublasLtMatmulAlgo_t *algo, int index, MatmulAlgoChoice *c) {
    memset(c, 0, sizeof *c);
    c->set = 1;
    c->index = index;
    int32_t i32 = 0;
    uint32_t u32 = 0;
    uint16_t u16 = 0;
    size_t got;
#define GET(attr, var, field) \
    var = 0; \
    if (lt.cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &var, sizeof var, &got) == CUBLAS_STATUS_SUCCESS) c->field = (int)var;
    GET(CUBLASLT_ALGO_CONFIG_ID, i32, id)
    GET(CUBLASLT_ALGO_CONFIG_TILE_ID, u32, tile)
    GET(CUBLASLT_ALGO_CONFIG_STAGES_ID, u32, stages)
    GET(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, i32, splitk)
    GET(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, u32, reduction)
    GET(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, u32, swizzle)
    GET(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, u32, custom)
    GET(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, u16, cluster)
#undef GET
}

static int same_config(const MatmulAlgoChoice *a, const MatmulAlgoChoice *b) {
    return a->id == b->id && a->tile == b->tile && a->stages == b->stages && a->splitk == b->splitk &&
           a->reduction == b->reduction && a->swizzle == b->swizzle && a->custom == b->custom && a->cluster == b->cluster;
}

/* The tuned algorithm of e among the n heuristic results h (its own index first, then any with the same
   configuration); keeps the first heuristic, and says so, when cuBLASLt no longer offers it. A tuned choice
   for another shape (the tests run slices of the plan's matmuls) is quietly not used. */
static void pick_tuned(MatmulEntry *e, const cublasLtMatmulHeuristicResult_t *h, int n) {
    const MatmulAlgoChoice *want = &e->shape.algo;
    const PlanMatmul *m = &e->shape;
    if (want->m != m->m || want->n != m->n || want->k != m->k || want->batch != m->batch) return;
    MatmulAlgoChoice c;
    if (want->index >= 0 && want->index < n) {   /* the database's index is checked (gen/tune_apply.c), and here again */
        matmul_algo_describe(&h[want->index].algo, want->index, &c);
        if (same_config(&c, want)) { e->algo = h[want->index].algo; return; }
    }
    for (int i = 0; i < n; i++) {
        matmul_algo_describe(&h[i].algo, i, &c);
        if (same_config(&c, want)) { e->algo = h[i].algo; return; }
    }
    printf("matmul %s: the tuned cuBLASLt algorithm (id %d, tile %d, stages %d) is not among cuBLASLt's %d choices "
           "here any more; using its first heuristic (run `gpt2gen tune` again)\n", m->name, want->id, want->tile,
           want->stages, n);
}

int matmul_candidates(Matmuls *mm, int id, int max, cublasLtMatmulAlgo_t *algos, int *n, Err *err) {
    cublasLtMatmulHeuristicResult_t h[MATMUL_MAX_CANDIDATES];
    if (max > MATMUL_MAX_CANDIDATES) max = MATMUL_MAX_CANDIDATES;
    if (matmul_heuristics(mm, &mm->entries[id], max, h, n, err)) return -1;
    for (int i = 0; i < *n; i++) algos[i] = h[i].algo;
    return 0;
}

void matmul_use_algo(Matmuls *mm, int id, const cublasLtMatmulAlgo_t *algo) { mm->entries[id].algo = *algo; }

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
    cublasLtMatmulHeuristicResult_t h[MATMUL_MAX_CANDIDATES];
    int found = 0;
    if (matmul_heuristics(mm, e, m->algo.set ? MATMUL_MAX_CANDIDATES : 1, h, &found, err)) return -1;
    e->algo = h[0].algo;
    if (m->algo.set) pick_tuned(e, h, found);
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

static int run(const Matmuls *mm, int id, CUstream stream, CUdeviceptr D, CUdeviceptr A, CUdeviceptr B,
               CUdeviceptr bias, CUdeviceptr aux, float alpha, int accumulate, Err *err) {
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
    const float beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t s = lt.cublasLtMatmul(mm->handle, e->desc, &alpha, (const void *)(uintptr_t)A, e->a,
                                         (const void *)(uintptr_t)B, e->b, &beta, (const void *)(uintptr_t)D, e->d,
                                         (void *)(uintptr_t)D, e->d, &e->algo, (void *)(uintptr_t)mm->workspace,
                                         mm->workspace_size, stream);
    return lt_check(s, "cublasLtMatmul", m, err);
}

int matmul_run(const Matmuls *mm, int id, CUstream stream, CUdeviceptr D, CUdeviceptr A, CUdeviceptr B,
               CUdeviceptr bias, CUdeviceptr aux, float alpha, Err *err) {
    return run(mm, id, stream, D, A, B, bias, aux, alpha, mm->entries[id].shape.accumulate, err);
}

int matmul_run_acc(const Matmuls *mm, int id, CUstream stream, CUdeviceptr D, CUdeviceptr A, CUdeviceptr B, float alpha,
                   Err *err) {
    return run(mm, id, stream, D, A, B, 0, 0, alpha, 1, err);
}
