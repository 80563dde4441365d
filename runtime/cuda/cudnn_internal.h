/* cudnn_internal: private to runtime/cuda/cudnn_*.c (runtime/cuda/cudnn_attention.h is the interface): the
   loaded library's function table, one graph of backend descriptors, and the attention object, shared by
   loading and running (runtime/cuda/cudnn_attention.c), building the two graphs (runtime/cuda/cudnn_graph.c)
   and finalizing them into execution plans (runtime/cuda/cudnn_plan.c). */
#ifndef GPT2GEN_CUDNN_INTERNAL_H
#define GPT2GEN_CUDNN_INTERNAL_H
#include "runtime/cuda/cudnn_attention.h"
#include <cudnn_graph.h>
#include <stddef.h>
#include <stdint.h>

#define CUDNN_FUNCS(X) \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) \
    X(cudnnBackendCreateDescriptor) X(cudnnBackendDestroyDescriptor) X(cudnnBackendSetAttribute) \
    X(cudnnBackendGetAttribute) X(cudnnBackendFinalize) X(cudnnBackendExecute)

typedef struct {
    void *lib;
    CUDNN_FUNCS(CUDA_API_FIELD)   /* runtime/cuda/cuda_api.h: a pointer field per function */
    __typeof__(&cudnnGetLastErrorString) cudnnGetLastErrorString;   /* optional: cuDNN's detail of the last error */
} CudnnLib;

#define CUDNN_STR2(x) #x
#define CUDNN_STR(x) CUDNN_STR2(x)

/* The bound tensors' ids in the variant packs; virtual tensors are numbered from UID_VIRTUAL. */
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF, UID_DO, UID_ONE, UID_SOFTMAX_SUM,
       UID_DQ, UID_DK, UID_DV, UID_DQ_ACCUM, UID_VIRTUAL = 100 };

/* ---- one graph: every descriptor it creates, the first failure ---- */

typedef struct {
    const CudnnLib *L;
    const char *name;                      /* "forward", "backward" */
    cudnnBackendDescriptor_t *descs;       /* all created, destroyed together */
    int n_descs, cap_descs;
    cudnnBackendDescriptor_t ops[48];
    int n_ops;
    int64_t next_uid;
    char failed[640];                      /* the first failure, "" while none */
    cudnnBackendDescriptor_t plan;         /* the finalized execution plan */
    int64_t workspace;
    int nondeterministic;                  /* the plan's engine says it is not deterministic */
} Graph;

struct CudnnAttention {
    CudnnLib L;
    char libname[256];
    char description[320];
    size_t version;
    cudnnHandle_t handle;
    int B, T, NH, HS, debug;          /* debug: GPT2GEN_CUDNN_DEBUG, every engine config tried on stderr */
    int deterministic;                /* the backward writes dQ directly; else through dq_accum_bytes of fp32 */
    size_t dq_accum_bytes, dq_accum_offset;   /* that accumulator, at this offset of the workspace */
    Precision prec;
    Graph fwd, bwd;
    size_t workspace_bytes;
    float scale, neg_inf, one;
};

/* runtime/cuda/cudnn_attention.c: cuDNN's text for st, with its detail of the last error where it has one. */
void cudnn_status_text(const CudnnLib *L, cudnnStatus_t st, char *buf, size_t n);

/* runtime/cuda/cudnn_graph.c: a graph's descriptors. Each call does nothing once the graph has failed; the first
   failure is kept in g->failed. */
void g_keep(Graph *g, cudnnBackendDescriptor_t d);   /* d is destroyed with the graph */
cudnnBackendDescriptor_t g_new(Graph *g, cudnnBackendDescriptorType_t type, const char *what);
void g_set_(Graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr, const char *attr_name,
            cudnnBackendAttributeType_t type, int64_t n, const void *value, const char *what);
#define g_set(g, d, attr, type, n, value, what) g_set_(g, d, attr, #attr, type, n, value, what)
void g_finalize(Graph *g, cudnnBackendDescriptor_t d, const char *what);
void g_free(Graph *g);
/* Builds a's forward and backward graphs for its shape and finalizes each into its execution plan. 0, or -1
   with why. */
int cudnn_attention_build_graphs(CudnnAttention *a, char *why, size_t n);

/* runtime/cuda/cudnn_plan.c: finalizes the graph's operations into an operation graph, asks the heuristics
   (mode A, then the fallback list) for engine configs and keeps the first that finalizes into an execution
   plan, preferring deterministic engines where prefer_deterministic. 0, or -1 with why. */
int cudnn_make_plan(Graph *g, cudnnHandle_t handle, int prefer_deterministic, int debug, char *why, size_t why_n);
#endif
