/* matmul: the plan's matmuls (gen/matmuls.h) through cuBLASLt, fp32, bf16 or fp16 with fp32 accumulation.
   Each entry's descriptor and layouts are built, and its algorithm picked once at init: the one `gpt2gen tune`
   chose (PlanMatmul.algo, from the tuning database) where cuBLASLt still offers it, else cuBLASLt's first
   heuristic; a call then only sets the pointers. */
#ifndef GPT2GEN_RUNTIME_MATMUL_H
#define GPT2GEN_RUNTIME_MATMUL_H
#include "runtime/cuda/device.h"
#include "gen/matmuls.h"

typedef struct {
    PlanMatmul shape;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
} MatmulEntry;

typedef struct {
    cublasLtHandle_t handle;
    CUdeviceptr workspace;
    size_t workspace_size;
    int n;
    MatmulEntry *entries;
} Matmuls;

/* Prepares the n entries (ids 0..n-1) for precision p, with a workspace of workspace_size bytes. */
int  matmuls_init(Matmuls *mm, const PlanMatmul *entries, int n, Precision p, CUdeviceptr workspace,
                  size_t workspace_size, Err *err);
void matmuls_destroy(Matmuls *mm);
/* Up to max (at most MATMUL_MAX_CANDIDATES) of cuBLASLt's heuristic algorithms for entry id, best first. */
#define MATMUL_MAX_CANDIDATES MATMUL_ALGO_MAX
int  matmul_candidates(Matmuls *mm, int id, int max, cublasLtMatmulAlgo_t *algos, int *n, Err *err);
/* Entry id runs with algo from now on. */
void matmul_use_algo(Matmuls *mm, int id, const cublasLtMatmulAlgo_t *algo);
/* algo's configuration (cublasLtMatmulAlgoConfigGetAttribute), index being its place among the heuristics. */
void matmul_algo_describe(const cublasLtMatmulAlgo_t *algo, int index, MatmulAlgoChoice *c);
/* Entry id on stream: D = alpha op(A) op(B) (+ D when the entry accumulates) (+ bias when it has one),
   then its epilogue with aux (GELU_AUX: aux gets the pre-activation; DGELU: aux is the pre-activation). */
int  matmul_run(const Matmuls *mm, int id, CUstream stream, CUdeviceptr D, CUdeviceptr A, CUdeviceptr B,
                CUdeviceptr bias, CUdeviceptr aux, float alpha, Err *err);
/* the same with beta = 1 whatever the entry says: D += alpha op(A) op(B) (SwiGLU's second fc dinp, OP_MATMUL_DINP_ACC;
   the descriptors and the algorithm are the entry's: beta is an argument of the call alone) */
int  matmul_run_acc(const Matmuls *mm, int id, CUstream stream, CUdeviceptr D, CUdeviceptr A, CUdeviceptr B, float alpha,
                    Err *err);
#endif
