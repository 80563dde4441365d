/* cudnn_attention: cuDNN's composite attention graphs through the backend API (see cudnn_attention.h).
   Only the header's types and enum values are used from cuDNN 9.19's headers, and only ones that cuDNN 9.0
   already had, so a newer header than the loaded library does no harm. */
#include "runtime/cuda/cudnn_attention.h"
#include <cudnn_graph.h>
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
       UID_DQ, UID_DK, UID_DV, UID_VIRTUAL = 100 };

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

static void last_error(const CudnnLib *L, char *buf, size_t n) {
    buf[0] = 0;
    if (L->cudnnGetLastErrorString) L->cudnnGetLastErrorString(buf, n);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

static void status_text(const CudnnLib *L, cudnnStatus_t st, char *buf, size_t n) {
    char detail[384];
    last_error(L, detail, sizeof detail);
    snprintf(buf, n, "%s%s%s%s", L->cudnnGetErrorString(st), detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}

static void g_fail(Graph *g, cudnnStatus_t st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void g_fail(Graph *g, cudnnStatus_t st, const char *fmt, ...) {
    if (g->failed[0]) return;
    char what[200], text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    status_text(g->L, st, text, sizeof text);
    snprintf(g->failed, sizeof g->failed, "%s: %s", what, text);
}

/* d is destroyed with the graph */
static void keep(Graph *g, cudnnBackendDescriptor_t d) {
    if (g->n_descs == g->cap_descs) {
        g->cap_descs = g->cap_descs ? 2 * g->cap_descs : 64;
        cudnnBackendDescriptor_t *grown = xcalloc((size_t)g->cap_descs, sizeof *grown);
        if (g->n_descs) memcpy(grown, g->descs, (size_t)g->n_descs * sizeof *grown);
        free(g->descs);
        g->descs = grown;
    }
    g->descs[g->n_descs++] = d;
}

static cudnnBackendDescriptor_t g_new(Graph *g, cudnnBackendDescriptorType_t type, const char *what) {
    if (g->failed[0]) return NULL;
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t st = g->L->cudnnBackendCreateDescriptor(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) { g_fail(g, st, "creating the descriptor of %s", what); return NULL; }
    keep(g, d);
    return d;
}

static void g_set_(Graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr, const char *attr_name,
                   cudnnBackendAttributeType_t type, int64_t n, const void *value, const char *what) {
    if (g->failed[0]) return;
    cudnnStatus_t st = g->L->cudnnBackendSetAttribute(d, attr, type, n, value);
    if (st != CUDNN_STATUS_SUCCESS) g_fail(g, st, "%s: setting %s", what, attr_name);
}
#define g_set(g, d, attr, type, n, value, what) g_set_(g, d, attr, #attr, type, n, value, what)

static void g_finalize(Graph *g, cudnnBackendDescriptor_t d, const char *what) {
    if (g->failed[0]) return;
    cudnnStatus_t st = g->L->cudnnBackendFinalize(d);
    if (st != CUDNN_STATUS_SUCCESS) g_fail(g, st, "%s: finalizing", what);
}

static void g_free(Graph *g) {
    for (int i = g->n_descs - 1; i >= 0; i--)
        if (g->descs[i]) g->L->cudnnBackendDestroyDescriptor(g->descs[i]);
    free(g->descs);
    g->descs = NULL;
    g->n_descs = g->cap_descs = g->n_ops = 0;
    g->plan = NULL;
}

/* ---- tensors and operations ---- */

typedef struct { int64_t d[4], s[4]; } Layout;
enum { REAL, VIRTUAL, BY_VALUE };

static cudnnBackendDescriptor_t tensor(Graph *g, int64_t uid, cudnnDataType_t type, const Layout *l, int kind,
                                       const char *name) {
    char what[96];
    snprintf(what, sizeof what, "tensor %s", name);
    if (kind == VIRTUAL) uid = g->next_uid++;
    cudnnBackendDescriptor_t t = g_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t align = 16;
    bool yes = true;
    g_set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, what);
    g_set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, l->d, what);
    g_set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, l->s, what);
    g_set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
    g_set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, what);
    if (kind == VIRTUAL) g_set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, what);
    if (kind == BY_VALUE) g_set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, what);
    g_finalize(g, t, what);
    return t;
}

static void add_op(Graph *g, cudnnBackendDescriptor_t op, const char *what) {
    g_finalize(g, op, what);
    if (g->failed[0]) return;
    if (g->n_ops == (int)(sizeof g->ops / sizeof g->ops[0])) { g_fail(g, CUDNN_STATUS_BAD_PARAM, "%s: too many operations", what); return; }
    g->ops[g->n_ops++] = op;
}

/* y = mode(x[, b][, t]); axis >= 0 only for GEN_INDEX. Alphas are 1, as cudnn-frontend sets them. */
static void pointwise(Graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t math, cudnnBackendDescriptor_t x,
                      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis,
                      const char *what) {
    cudnnBackendDescriptor_t pw = g_new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    g_set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    g_set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math, what);
    if (axis >= 0) g_set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
    g_finalize(g, pw, what);
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    float one = 1.0f;
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, what);
    if (b) g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    if (t) g_set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, what);
    add_op(g, op, what);
}

/* c = a @ b over the last two dimensions, accumulated in fp32 */
static void matmul(Graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                   const char *what) {
    cudnnBackendDescriptor_t mm = g_new(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    g_set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
    g_finalize(g, mm, what);
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, what);
    add_op(g, op, what);
}

/* y = reduce(x) over the dimensions where y has extent 1, in fp32 */
static void reduction(Graph *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                      const char *what) {
    cudnnBackendDescriptor_t rd = g_new(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    g_set(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, what);
    g_set(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
    g_finalize(g, rd, what);
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, what);
    add_op(g, op, what);
}

/* y is x seen with other dimensions and strides (a transpose here): no data moves */
static void reshape(Graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y, const char *what) {
    cudnnBackendDescriptor_t op = g_new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    g_set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    add_op(g, op, what);
}

/* ---- the two graphs ---- */

typedef struct {
    cudnnDataType_t io;     /* bf16 or fp16 */
    Layout qkv;             /* Q, K, V, dQ, dK, dV: (b,h,t,d) views of the packed (B,T,3C) rows */
    Layout kt;              /* K^T (and V^T): (b,h,d,t), the same memory with the last two dimensions swapped */
    Layout o;               /* O, dO: (b,h,t,d) of (B,T,C) */
    Layout rows;            /* Stats, softmax sum: (b,h,t,1) of (B,NH,T) */
    Layout scores;          /* (b,h,t,t), row-major */
    Layout scores_t;        /* the same (b,h,t,t) read transposed */
    Layout o_elem;          /* dO * O before its row sums */
    Layout scalar;          /* {1,1,1,1} */
} Shapes;

static void shapes_init(Shapes *s, int B, int T, int NH, int HS, Precision prec) {
    const int64_t b = B, t = T, h = NH, d = HS, c = (int64_t)NH * HS;
    memset(s, 0, sizeof *s);
    s->io = prec == PREC_FP16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    s->qkv = (Layout){{b, h, t, d}, {3 * c * t, d, 3 * c, 1}};
    s->kt = (Layout){{b, h, d, t}, {3 * c * t, d, 1, 3 * c}};
    s->o = (Layout){{b, h, t, d}, {c * t, d, c, 1}};
    s->rows = (Layout){{b, h, t, 1}, {h * t, t, 1, 1}};
    s->scores = (Layout){{b, h, t, t}, {h * t * t, t * t, t, 1}};
    s->scores_t = (Layout){{b, h, t, t}, {h * t * t, t * t, 1, t}};
    s->o_elem = (Layout){{b, h, t, d}, {h * t * d, t * d, h * d, 1}};
    s->scalar = (Layout){{1, 1, 1, 1}, {1, 1, 1, 1}};
}

/* masked = select(scores, -inf, row >= col): the causal mask from generated indices (cudnn-frontend's
   diagonal band with right bound 0, aligned top left) */
static cudnnBackendDescriptor_t causal_mask(Graph *g, const Shapes *s, cudnnBackendDescriptor_t scores,
                                            cudnnBackendDescriptor_t neg_inf) {
    cudnnBackendDescriptor_t row = tensor(g, 0, CUDNN_DATA_INT32, &s->scores, VIRTUAL, "row index");
    cudnnBackendDescriptor_t col = tensor(g, 0, CUDNN_DATA_INT32, &s->scores, VIRTUAL, "column index");
    cudnnBackendDescriptor_t keep = tensor(g, 0, CUDNN_DATA_BOOLEAN, &s->scores, VIRTUAL, "causal mask");
    cudnnBackendDescriptor_t out = tensor(g, 0, CUDNN_DATA_FLOAT, &s->scores, VIRTUAL, "masked scores");
    pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, NULL, NULL, row, 2, "GEN_INDEX(axis 2) -> row index");
    pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, NULL, NULL, col, 3, "GEN_INDEX(axis 3) -> column index");
    pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1, "CMP_GE(row, column) -> mask");
    pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scores, neg_inf, keep, out, -1,
              "BINARY_SELECT(scores, -inf, mask)");
    return out;
}

/* S = Q.K^T * scale, causal mask, softmax with Stats = max + log(sum exp), O = P.V */
static void build_forward(Graph *g, const Shapes *s) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t q = tensor(g, UID_Q, s->io, &s->qkv, REAL, "Q");
    cudnnBackendDescriptor_t kt = tensor(g, UID_K, s->io, &s->kt, REAL, "K^T");
    cudnnBackendDescriptor_t v = tensor(g, UID_V, s->io, &s->qkv, REAL, "V");
    cudnnBackendDescriptor_t o = tensor(g, UID_O, s->io, &s->o, REAL, "O");
    cudnnBackendDescriptor_t stats = tensor(g, UID_STATS, f32, &s->rows, REAL, "Stats");
    cudnnBackendDescriptor_t scale = tensor(g, UID_SCALE, f32, &s->scalar, BY_VALUE, "scale");
    cudnnBackendDescriptor_t neg_inf = tensor(g, UID_NEG_INF, f32, &s->scalar, BY_VALUE, "-inf");

    cudnnBackendDescriptor_t s0 = tensor(g, 0, f32, &s->scores, VIRTUAL, "Q.K^T");
    cudnnBackendDescriptor_t s1 = tensor(g, 0, f32, &s->scores, VIRTUAL, "scaled scores");
    matmul(g, q, kt, s0, "MATMUL(Q, K^T)");
    pointwise(g, CUDNN_POINTWISE_MUL, f32, s0, scale, NULL, s1, -1, "MUL(Q.K^T, scale)");
    cudnnBackendDescriptor_t s2 = causal_mask(g, s, s1, neg_inf);

    cudnnBackendDescriptor_t m = tensor(g, 0, f32, &s->rows, VIRTUAL, "row max");
    cudnnBackendDescriptor_t s3 = tensor(g, 0, f32, &s->scores, VIRTUAL, "scores - max");
    cudnnBackendDescriptor_t e = tensor(g, 0, f32, &s->scores, VIRTUAL, "exp");
    cudnnBackendDescriptor_t z = tensor(g, 0, f32, &s->rows, VIRTUAL, "row sum");
    cudnnBackendDescriptor_t logz = tensor(g, 0, f32, &s->rows, VIRTUAL, "log row sum");
    cudnnBackendDescriptor_t p = tensor(g, 0, s->io, &s->scores, VIRTUAL, "P");
    reduction(g, CUDNN_REDUCE_TENSOR_MAX, s2, m, "REDUCTION MAX(scores)");
    pointwise(g, CUDNN_POINTWISE_SUB, f32, s2, m, NULL, s3, -1, "SUB(scores, max)");
    pointwise(g, CUDNN_POINTWISE_EXP, f32, s3, NULL, NULL, e, -1, "EXP");
    reduction(g, CUDNN_REDUCE_TENSOR_ADD, e, z, "REDUCTION ADD(exp)");
    pointwise(g, CUDNN_POINTWISE_LOG, f32, z, NULL, NULL, logz, -1, "LOG(sum)");
    pointwise(g, CUDNN_POINTWISE_ADD, f32, m, logz, NULL, stats, -1, "ADD(max, log sum) -> Stats");
    pointwise(g, CUDNN_POINTWISE_DIV, f32, e, z, NULL, p, -1, "DIV(exp, sum) -> P");
    matmul(g, p, v, o, "MATMUL(P, V) -> O");
}

/* softmax_sum = rowsum(dO * O); P = exp(S*scale - Stats) under the mask; dV = P^T.dO;
   dS = (dO.V^T - softmax_sum) * P * scale; dK = dS^T.Q; dQ = dS.K, written directly (cudnn-frontend's
   deterministic form: the fusion engine then keeps dP in a (B,NH,T,T) 16-bit workspace instead of accumulating
   dQ in fp32 with atomics). The K view that dQ's matmul reads is typed fp32, as cudnn-frontend leaves it. */
static void build_backward(Graph *g, const Shapes *s) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t q = tensor(g, UID_Q, s->io, &s->qkv, REAL, "Q");
    cudnnBackendDescriptor_t kt = tensor(g, UID_K, s->io, &s->kt, REAL, "K^T");
    cudnnBackendDescriptor_t vt = tensor(g, UID_V, s->io, &s->kt, REAL, "V^T");
    cudnnBackendDescriptor_t o = tensor(g, UID_O, s->io, &s->o, REAL, "O");
    cudnnBackendDescriptor_t d_o = tensor(g, UID_DO, s->io, &s->o, REAL, "dO");
    cudnnBackendDescriptor_t stats = tensor(g, UID_STATS, f32, &s->rows, REAL, "Stats");
    cudnnBackendDescriptor_t scale = tensor(g, UID_SCALE, f32, &s->scalar, BY_VALUE, "scale");
    cudnnBackendDescriptor_t neg_inf = tensor(g, UID_NEG_INF, f32, &s->scalar, BY_VALUE, "-inf");
    cudnnBackendDescriptor_t one = tensor(g, UID_ONE, f32, &s->scalar, BY_VALUE, "one");
    cudnnBackendDescriptor_t ssum = tensor(g, UID_SOFTMAX_SUM, f32, &s->rows, REAL, "softmax sum");
    cudnnBackendDescriptor_t dq = tensor(g, UID_DQ, s->io, &s->qkv, REAL, "dQ");
    cudnnBackendDescriptor_t dk = tensor(g, UID_DK, s->io, &s->qkv, REAL, "dK");
    cudnnBackendDescriptor_t dv = tensor(g, UID_DV, s->io, &s->qkv, REAL, "dV");

    cudnnBackendDescriptor_t odo = tensor(g, 0, f32, &s->o_elem, VIRTUAL, "dO*O");
    cudnnBackendDescriptor_t rsum = tensor(g, 0, f32, &s->rows, VIRTUAL, "rowsum(dO*O)");
    pointwise(g, CUDNN_POINTWISE_MUL, f32, d_o, o, NULL, odo, -1, "MUL(dO, O)");
    reduction(g, CUDNN_REDUCE_TENSOR_ADD, odo, rsum, "REDUCTION ADD(dO*O)");
    pointwise(g, CUDNN_POINTWISE_MUL, f32, rsum, one, NULL, ssum, -1, "MUL(rowsum, 1) -> softmax sum");

    cudnnBackendDescriptor_t s0 = tensor(g, 0, f32, &s->scores, VIRTUAL, "Q.K^T");
    cudnnBackendDescriptor_t s1 = tensor(g, 0, f32, &s->scores, VIRTUAL, "scaled scores");
    cudnnBackendDescriptor_t s2 = tensor(g, 0, f32, &s->scores, VIRTUAL, "scores - Stats");
    matmul(g, q, kt, s0, "MATMUL(Q, K^T)");
    pointwise(g, CUDNN_POINTWISE_MUL, f32, s0, scale, NULL, s1, -1, "MUL(Q.K^T, scale)");
    pointwise(g, CUDNN_POINTWISE_SUB, f32, s1, stats, NULL, s2, -1, "SUB(scores, Stats)");
    cudnnBackendDescriptor_t s3 = causal_mask(g, s, s2, neg_inf);
    cudnnBackendDescriptor_t p = tensor(g, 0, f32, &s->scores, VIRTUAL, "P");
    cudnnBackendDescriptor_t pt = tensor(g, 0, s->io, &s->scores_t, VIRTUAL, "P^T");
    pointwise(g, CUDNN_POINTWISE_EXP, f32, s3, NULL, NULL, p, -1, "EXP -> P");
    reshape(g, p, pt, "RESHAPE(P) -> P^T");
    matmul(g, pt, d_o, dv, "MATMUL(P^T, dO) -> dV");

    cudnnBackendDescriptor_t dp = tensor(g, 0, f32, &s->scores, VIRTUAL, "dO.V^T");
    cudnnBackendDescriptor_t t0 = tensor(g, 0, f32, &s->scores, VIRTUAL, "dP - softmax sum");
    cudnnBackendDescriptor_t t1 = tensor(g, 0, f32, &s->scores, VIRTUAL, "(dP - softmax sum) * P");
    cudnnBackendDescriptor_t ds = tensor(g, 0, f32, &s->scores, VIRTUAL, "dS");
    cudnnBackendDescriptor_t dst = tensor(g, 0, s->io, &s->scores_t, VIRTUAL, "dS^T");
    matmul(g, d_o, vt, dp, "MATMUL(dO, V^T)");
    pointwise(g, CUDNN_POINTWISE_SUB, f32, dp, ssum, NULL, t0, -1, "SUB(dP, softmax sum)");
    pointwise(g, CUDNN_POINTWISE_MUL, f32, t0, p, NULL, t1, -1, "MUL(., P)");
    pointwise(g, CUDNN_POINTWISE_MUL, f32, t1, scale, NULL, ds, -1, "MUL(., scale) -> dS");
    reshape(g, ds, dst, "RESHAPE(dS) -> dS^T");
    matmul(g, dst, q, dk, "MATMUL(dS^T, Q) -> dK");

    Layout kl = {{s->kt.d[0], s->kt.d[1], s->kt.d[3], s->kt.d[2]}, {s->kt.s[0], s->kt.s[1], s->kt.s[3], s->kt.s[2]}};
    cudnnBackendDescriptor_t k = tensor(g, 0, f32, &kl, VIRTUAL, "K");
    reshape(g, kt, k, "RESHAPE(K^T) -> K");
    matmul(g, ds, k, dq, "MATMUL(dS, K) -> dQ");
}

/* ---- execution plans ---- */

/* 1 if the engine of cfg carries the NONDETERMINISTIC numerical note; also its global index */
static int engine_nondeterministic(const CudnnLib *L, cudnnBackendDescriptor_t cfg, int64_t *index) {
    cudnnBackendDescriptor_t eng = NULL;
    int nondet = 0;
    *index = -1;
    if (L->cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return 0;
    int64_t n = 0;
    if (L->cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ==
        CUDNN_STATUS_SUCCESS) {
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT + 8];
        L->cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, index);
        if (L->cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                        (int64_t)(sizeof notes / sizeof notes[0]), &n, notes) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n && i < (int64_t)(sizeof notes / sizeof notes[0]); i++)
                if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) nondet = 1;
    }
    L->cudnnBackendDestroyDescriptor(eng);
    return nondet;
}

/* Finalizes the graph's operations into an operation graph, asks the heuristics (mode A, then the fallback
   list) for engine configs and keeps the first that finalizes into an execution plan, preferring deterministic
   engines where prefer_deterministic; debug (GPT2GEN_CUDNN_DEBUG) prints every engine config tried. 0, or -1 with why. */
static int make_plan(Graph *g, cudnnHandle_t handle, int prefer_deterministic, int debug, char *why, size_t why_n) {
    const CudnnLib *L = g->L;
    if (g->failed[0]) { snprintf(why, why_n, "building the %s graph: %s", g->name, g->failed); return -1; }
    cudnnBackendDescriptor_t og = g_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "the operation graph");
    if (og) L->cudnnBackendSetAttribute(og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    g_set(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, "the operation graph");
    g_finalize(g, og, "the operation graph");
    if (g->failed[0]) { snprintf(why, why_n, "building the %s graph: %s", g->name, g->failed); return -1; }

    char last[512] = "the heuristics returned no engine config";
    int tried = 0;
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int mi = 0; mi < 2; mi++) {
        cudnnBackendDescriptor_t heur = g_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "the engine heuristics");
        if (!heur) break;
        cudnnStatus_t st = L->cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og);
        if (st == CUDNN_STATUS_SUCCESS)
            st = L->cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi]);
        if (st == CUDNN_STATUS_SUCCESS) st = L->cudnnBackendFinalize(heur);
        int64_t count = 0;
        if (st == CUDNN_STATUS_SUCCESS)
            st = L->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                             &count, NULL);
        if (st != CUDNN_STATUS_SUCCESS) {
            char text[400];
            status_text(L, st, text, sizeof text);
            snprintf(last, sizeof last, "heuristics mode %s: %s", mi ? "FALLBACK" : "A", text);
            if (debug) fprintf(stderr, "cudnn_attention: %s graph: %s\n", g->name, last);
            continue;
        }
        if (count > 64) count = 64;
        cudnnBackendDescriptor_t cfgs[64];
        int64_t got = 0;
        for (int64_t i = 0; i < count; i++) cfgs[i] = g_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "an engine config");
        if (g->failed[0]) { snprintf(why, why_n, "the %s graph: %s", g->name, g->failed); return -1; }
        if (count > 0)
            st = L->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                             &got, cfgs);
        if (debug) fprintf(stderr, "cudnn_attention: %s graph: heuristics mode %s: %lld engine config(s)\n", g->name,
                           mi ? "FALLBACK" : "A", (long long)got);
        if (st != CUDNN_STATUS_SUCCESS) got = 0;
        /* pass 0 takes deterministic engines only, pass 1 the rest */
        for (int pass = prefer_deterministic ? 0 : 1; pass < 2; pass++)
            for (int64_t i = 0; i < got; i++) {
                int64_t index;
                const int nondet = engine_nondeterministic(L, cfgs[i], &index);
                if (pass == 0 && nondet) continue;
                if (pass == 1 && prefer_deterministic && !nondet) continue;
                cudnnBackendDescriptor_t plan = NULL;
                tried++;
                st = L->cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
                if (st == CUDNN_STATUS_SUCCESS) {
                    L->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
                    st = L->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
                }
                if (st == CUDNN_STATUS_SUCCESS) st = L->cudnnBackendFinalize(plan);
                int64_t ws = 0, n = 0;
                if (st == CUDNN_STATUS_SUCCESS)
                    st = L->cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                                     1, &n, &ws);
                if (st == CUDNN_STATUS_SUCCESS) {
                    if (debug) fprintf(stderr, "cudnn_attention: %s graph: engine %lld%s finalized, workspace %lld bytes\n",
                                       g->name, (long long)index, nondet ? " (non-deterministic)" : "", (long long)ws);
                    g->plan = plan;
                    g->workspace = ws;
                    g->nondeterministic = nondet;
                    keep(g, plan);
                    return 0;
                }
                char text[400];
                status_text(L, st, text, sizeof text);
                snprintf(last, sizeof last, "engine %lld: %s", (long long)index, text);
                if (debug) fprintf(stderr, "cudnn_attention: %s graph: %s\n", g->name, last);
                if (plan) L->cudnnBackendDestroyDescriptor(plan);
            }
    }
    snprintf(why, why_n, "no engine config finalized for the %s graph (%d tried; last: %s)", g->name, tried, last);
    return -1;
}

/* ---- the library ---- */

struct CudnnAttention {
    CudnnLib L;
    char libname[256];
    char description[320];
    size_t version;
    cudnnHandle_t handle;
    int B, T, NH, HS, debug;
    Precision prec;
    Graph fwd, bwd;
    size_t workspace_bytes;
    float scale, neg_inf, one;
};

static int say(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && n) vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

static int load_library(CudnnAttention *a, const char *name, char *why, size_t n) {
    if (name && strcmp(name, "none") == 0) return say(why, n, "cuDNN is hidden: GPT2GEN_CUDNN_LIBRARY=none");
    if (!name) name = "libcudnn.so.9";
    snprintf(a->libname, sizeof a->libname, "%s", name);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return say(why, n, "cuDNN not found: %s could not be loaded (%s); install cuDNN 9 or name its library in "
                           "GPT2GEN_CUDNN_LIBRARY", name, dlerror());
    CudnnLib L = {.lib = h};
#define LOAD(fn) \
    L.fn = (__typeof__(L.fn))dlsym(h, CUDNN_STR(fn)); \
    if (!L.fn) { dlclose(h); return say(why, n, "%s lacks %s: not a cuDNN 9 library", name, CUDNN_STR(fn)); }
    CUDNN_FUNCS(LOAD)
#undef LOAD
    L.cudnnGetLastErrorString = (__typeof__(L.cudnnGetLastErrorString))dlsym(h, "cudnnGetLastErrorString");
    a->L = L;
    return 0;
}

static int build_graphs(CudnnAttention *a, char *why, size_t n) {
    Shapes s;
    shapes_init(&s, a->B, a->T, a->NH, a->HS, a->prec);
    a->fwd = (Graph){.L = &a->L, .name = "forward", .next_uid = UID_VIRTUAL};
    a->bwd = (Graph){.L = &a->L, .name = "backward", .next_uid = UID_VIRTUAL};
    build_forward(&a->fwd, &s);
    build_backward(&a->bwd, &s);
    if (make_plan(&a->fwd, a->handle, 0, a->debug, why, n) || make_plan(&a->bwd, a->handle, 1, a->debug, why, n)) return -1;
    return 0;
}

CudnnAttention *cudnn_attention_open(int B, int T, int NH, int HS, Precision prec, const Env *env, char *why, size_t why_n) {
    if (prec != PREC_BF16 && prec != PREC_FP16) { say(why, why_n, "cuDNN flash attention needs bf16 or fp16"); return NULL; }
    if (B < 1 || T < 2 || NH < 1) { say(why, why_n, "cuDNN attention refuses the shape B=%d T=%d NH=%d", B, T, NH); return NULL; }
    if (HS < 8 || HS % 8 != 0 || HS > 256) {
        say(why, why_n, "cuDNN attention refuses head size %d: it takes multiples of 8 up to 256", HS);
        return NULL;
    }
    CudnnAttention *a = xcalloc(1, sizeof *a);
    a->B = B; a->T = T; a->NH = NH; a->HS = HS; a->prec = prec;
    a->debug = env_or_defaults(env)->cudnn_debug;
    if (load_library(a, env_or_defaults(env)->cudnn_library, why, why_n)) { free(a); return NULL; }
    a->version = a->L.cudnnGetVersion();
    const int major = (int)(a->version / 10000), minor = (int)(a->version % 10000 / 100), patch = (int)(a->version % 100);
    snprintf(a->description, sizeof a->description, "cuDNN %d.%d.%d (%s)", major, minor, patch, a->libname);
    if (a->version < 90000) {
        say(why, why_n, "%s is too old: attention needs cuDNN 9.0 or newer", a->description);
        goto fail;
    }
    if (a->version < 91501 && T % 128 != 0) {
        say(why, why_n, "%s refuses T=%d: its attention backward can give NaN when T is not a multiple of 128 "
                        "(fixed in cuDNN 9.15.1)", a->description, T);
        goto fail;
    }
    a->scale = 1.0f / sqrtf((float)HS);
    a->neg_inf = a->version < 91000 ? -FLT_MAX : -INFINITY;
    a->one = 1.0f;
    cudnnStatus_t st = a->L.cudnnCreate(&a->handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        char text[400];
        status_text(&a->L, st, text, sizeof text);
        say(why, why_n, "%s: cudnnCreate failed: %s", a->description, text);
        a->handle = NULL;
        goto fail;
    }
    char reason[1024];
    if (build_graphs(a, reason, sizeof reason)) {
        say(why, why_n, "%s, B=%d T=%d NH=%d HS=%d %s: %s", a->description, B, T, NH, HS,
            prec == PREC_FP16 ? "fp16" : "bf16", reason);
        goto fail;
    }
    a->workspace_bytes = (size_t)(a->fwd.workspace > a->bwd.workspace ? a->fwd.workspace : a->bwd.workspace);
    if (a->bwd.nondeterministic) {
        size_t len = strlen(a->description);
        snprintf(a->description + len, sizeof a->description - len, ", backward not deterministic");
    }
    return a;
fail:
    cudnn_attention_close(a);
    return NULL;
}

size_t cudnn_attention_workspace_bytes(const CudnnAttention *a) { return a->workspace_bytes; }

const char *cudnn_attention_describe(const CudnnAttention *a) { return a->description; }

static int execute(CudnnAttention *a, const Graph *g, CUstream s, const int64_t *uids, void **ptrs, int n,
                   CUdeviceptr workspace, Err *err) {
    const CudnnLib *L = &a->L;
    char text[400];
    cudnnStatus_t st = L->cudnnSetStream(a->handle, s);
    if (st != CUDNN_STATUS_SUCCESS) {
        status_text(L, st, text, sizeof text);
        return err_set(err, "cuDNN attention %s: cudnnSetStream: %s", g->name, text);
    }
    cudnnBackendDescriptor_t pack = NULL;
    void *ws = (void *)(uintptr_t)workspace;
    const char *step = "creating the variant pack";
    st = L->cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "setting the variant pack";
        st = L->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
        if (st == CUDNN_STATUS_SUCCESS)
            st = L->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
        if (st == CUDNN_STATUS_SUCCESS)
            st = L->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
        if (st == CUDNN_STATUS_SUCCESS) { step = "finalizing the variant pack"; st = L->cudnnBackendFinalize(pack); }
        if (st == CUDNN_STATUS_SUCCESS) { step = "cudnnBackendExecute"; st = L->cudnnBackendExecute(a->handle, g->plan, pack); }
    }
    if (st != CUDNN_STATUS_SUCCESS) status_text(L, st, text, sizeof text);
    if (pack) L->cudnnBackendDestroyDescriptor(pack);
    if (st != CUDNN_STATUS_SUCCESS) return err_set(err, "cuDNN attention %s: %s: %s", g->name, step, text);
    return 0;
}

#define DEV(p) ((void *)(uintptr_t)(p))

int cudnn_attention_forward(CudnnAttention *a, CUstream s, CUdeviceptr out, CUdeviceptr stats, CUdeviceptr qkv,
                            CUdeviceptr workspace, Err *err) {
    const size_t third = (size_t)a->NH * a->HS * 2;   /* bytes of C 16-bit values */
    int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF};
    void *ptrs[] = {DEV(qkv), DEV(qkv + third), DEV(qkv + 2 * third), DEV(out), DEV(stats), &a->scale, &a->neg_inf};
    return execute(a, &a->fwd, s, uids, ptrs, (int)(sizeof uids / sizeof uids[0]), workspace, err);
}

int cudnn_attention_backward(CudnnAttention *a, CUstream s, CUdeviceptr dqkv, CUdeviceptr qkv, CUdeviceptr out,
                             CUdeviceptr dout, CUdeviceptr stats, CUdeviceptr softmax_sum, CUdeviceptr workspace,
                             Err *err) {
    const size_t third = (size_t)a->NH * a->HS * 2;
    int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_DO, UID_STATS, UID_SCALE, UID_NEG_INF, UID_ONE,
                      UID_SOFTMAX_SUM, UID_DQ, UID_DK, UID_DV};
    void *ptrs[] = {DEV(qkv), DEV(qkv + third), DEV(qkv + 2 * third), DEV(out), DEV(dout), DEV(stats), &a->scale,
                    &a->neg_inf, &a->one, DEV(softmax_sum), DEV(dqkv), DEV(dqkv + third), DEV(dqkv + 2 * third)};
    return execute(a, &a->bwd, s, uids, ptrs, (int)(sizeof uids / sizeof uids[0]), workspace, err);
}

void cudnn_attention_close(CudnnAttention *a) {
    if (!a) return;
    if (a->L.lib) {
        g_free(&a->fwd);
        g_free(&a->bwd);
        if (a->handle) a->L.cudnnDestroy(a->handle);
    }
    if (a->L.lib) dlclose(a->L.lib);
    free(a);
}
