/* matmuls: every cuBLASLt matmul of a step, as plan entries (they do most of the FLOPs; the
   attention's products are inside its own kernels, templates/attention.cu).
   Column-major, as cuBLASLt sees it: D(m,n) = alpha op(A)(m,k) op(B)(k,n) (+ D when accumulate) (+ bias[m]),
   then the epilogue; strided batched when batch > 1; leading dimensions follow from the shape (packed).
   The CUDA backend builds each entry's descriptors and picks its algorithm once, at start. */
#ifndef GPT2GEN_MATMULS_H
#define GPT2GEN_MATMULS_H
#include "gen/step.h"

typedef enum { EPI_NONE, EPI_GELU_AUX, EPI_DGELU } MatmulEpilogue;

typedef enum {
    /* forward: out (BT,OC) = inp (BT,IC) @ W (OC,IC)^T + bias, as D(OC,BT) = W^T(OC,IC) inp(IC,BT) */
    MM_QKV, MM_ATTPROJ, MM_FC, MM_FCPROJ, MM_CLASSIFIER,   /* MM_FC: with the GELU_AUX epilogue, or a plain bias */
    /* backward of each linear layer: dinp = dout @ W, dW += dout^T @ inp */
    MM_CLASSIFIER_DINP, MM_CLASSIFIER_DW, MM_FCPROJ_DINP /* DGELU epilogue, or none */, MM_FCPROJ_DW, MM_FC_DINP, MM_FC_DW,
    MM_ATTPROJ_DINP, MM_ATTPROJ_DW, MM_QKV_DINP, MM_QKV_DW,
    MM_COUNT
} MatmulId;

/* A cuBLASLt algorithm chosen by `gpt2gen tune` (gen/tune_db.h), in a form that can be found again: its index
   among cuBLASLt's heuristic results and its configuration (cublasLtMatmulAlgoConfigGetAttribute). The runtime
   uses it only for the shape it was tuned for, and only when cuBLASLt still offers an algorithm with exactly
   this configuration; otherwise it takes the first heuristic and says so. */
#define MATMUL_ALGO_MAX 32   /* cuBLASLt's heuristic results asked for at the most: an index is below it */
typedef struct {
    int set;
    int index, id, tile, stages, splitk, reduction, swizzle, custom, cluster;
    int m, n, k, batch;                      /* the shape it was tuned for */
} MatmulAlgoChoice;

typedef struct {
    const char *name;
    int m, n, k, transA, transB, batch;
    long long strideA, strideB, strideD;     /* elements between batch entries */
    int bias;                                /* bias[m] added (BIAS or GELU_AUX_BIAS epilogue) */
    int accumulate;                          /* beta = 1 */
    MatmulEpilogue epilogue;                 /* GELU_AUX: aux = pre-activation, D = GELU(it); DGELU: D *= GELU'(aux) */
    int per_step;                            /* calls per micro-step (for the FLOP count) */
    MatmulAlgoChoice algo;                   /* from the tuning database; algo.set 0: cuBLASLt's first heuristic */
} PlanMatmul;

/* The entries for B*T rows of the model; a forward step uses the forward ones only. The classifier's three run once
   per chunk of classifier_rows rows (a divisor of B*T): the logits of a chunk, their gradient into the chunk's rows of
   dlnf and into dwte (runtime/cuda/classifier.c).
   gelu: the training step's GELU path (train.gelu, not GELU_AUTO): which of the fc and fcproj-dinp matmuls have the
   GELU in their epilogues and which run beside our kernels. */
void   matmuls_plan(PlanMatmul mm[MM_COUNT], const GPT2Shape *model, const StepShape *step, int classifier_rows,
                    GeluPath gelu);
/* The fc and fcproj-dinp entries again for the GELU path gelu; a tuned algorithm of theirs goes with them (the tuning
   database names them by their names, which say which epilogue). */
void   matmuls_set_gelu(PlanMatmul mm[MM_COUNT], const GPT2Shape *model, const StepShape *step, GeluPath gelu);
/* The classifier's entries again for chunks of rows rows, their tuned algorithms kept. */
void   matmuls_set_classifier_rows(PlanMatmul mm[MM_COUNT], const GPT2Shape *model, const StepShape *step, int rows);
double matmul_flops(const PlanMatmul *m);    /* 2*m*n*k*batch per call */
#endif
