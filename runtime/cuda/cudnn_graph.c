/* cudnn_graph: the forward and backward graphs of cuDNN's composite attention (see cudnn_attention.h), built
   descriptor by descriptor through the backend API: one graph's descriptors and its first failure, its tensors
   and operations, then the two graphs. runtime/cuda/cudnn_plan.c finalizes them into execution plans. */
#include "runtime/cuda/cudnn_internal.h"
#include <cudnn_graph.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one graph: every descriptor it creates, the first failure ---- */

static void g_fail(Graph *g, cudnnStatus_t st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void g_fail(Graph *g, cudnnStatus_t st, const char *fmt, ...) {
    if (g->failed[0]) return;
    char what[200], text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cudnn_status_text(g->L, st, text, sizeof text);
    snprintf(g->failed, sizeof g->failed, "%s: %s", what, text);
}

void g_keep(Graph *g, cudnnBackendDescriptor_t d) {
    if (g->n_descs == g->cap_descs) {
        g->cap_descs = g->cap_descs ? 2 * g->cap_descs : 64;
        cudnnBackendDescriptor_t *grown = xcalloc((size_t)g->cap_descs, sizeof *grown);
        if (g->n_descs) memcpy(grown, g->descs, (size_t)g->n_descs * sizeof *grown);
        free(g->descs);
        g->descs = grown;
    }
    g->descs[g->n_descs++] = d;
}

cudnnBackendDescriptor_t g_new(Graph *g, cudnnBackendDescriptorType_t type, const char *what) {
    if (g->failed[0]) return NULL;
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t st = g->L->cudnnBackendCreateDescriptor(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) { g_fail(g, st, "creating the descriptor of %s", what); return NULL; }
    g_keep(g, d);
    return d;
}

void g_set_(Graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr, const char *attr_name,
            cudnnBackendAttributeType_t type, int64_t n, const void *value, const char *what) {
    if (g->failed[0]) return;
    cudnnStatus_t st = g->L->cudnnBackendSetAttribute(d, attr, type, n, value);
    if (st != CUDNN_STATUS_SUCCESS) g_fail(g, st, "%s: setting %s", what, attr_name);
}

void g_finalize(Graph *g, cudnnBackendDescriptor_t d, const char *what) {
    if (g->failed[0]) return;
    cudnnStatus_t st = g->L->cudnnBackendFinalize(d);
    if (st != CUDNN_STATUS_SUCCESS) g_fail(g, st, "%s: finalizing", what);
}

void g_free(Graph *g) {
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
    Layout dq_accum;        /* the nondeterministic backward's fp32 dQ, (b,h,t,d) packed */
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
    s->dq_accum = (Layout){{b, h, t, d}, {h * t * d, t * d, d, 1}};
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
   dQ in fp32 with atomics). The K view that dQ's matmul reads is typed fp32, as cudnn-frontend leaves it.
   Not deterministic: dQ = dS.K goes into a real fp32 (B,NH,T,HS) accumulator in the workspace (cuDNN clears it:
   9.6 and newer), then IDENTITY writes dQ: cudnn-frontend's default form on Hopper with cuDNN 9, PyTorch's. */
static void build_backward(Graph *g, const Shapes *s, int deterministic) {
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
    if (deterministic) {
        matmul(g, ds, k, dq, "MATMUL(dS, K) -> dQ");
        return;
    }
    cudnnBackendDescriptor_t acc = tensor(g, UID_DQ_ACCUM, f32, &s->dq_accum, REAL, "dQ accumulator");
    matmul(g, ds, k, acc, "MATMUL(dS, K) -> dQ accumulator");
    pointwise(g, CUDNN_POINTWISE_IDENTITY, f32, acc, NULL, NULL, dq, -1, "IDENTITY(dQ accumulator) -> dQ");
}

int cudnn_attention_build_graphs(CudnnAttention *a, char *why, size_t n) {
    Shapes s;
    shapes_init(&s, a->B, a->T, a->NH, a->HS, a->prec);
    a->fwd = (Graph){.L = &a->L, .name = "forward", .next_uid = UID_VIRTUAL};
    a->bwd = (Graph){.L = &a->L, .name = "backward", .next_uid = UID_VIRTUAL};
    build_forward(&a->fwd, &s);
    build_backward(&a->bwd, &s, a->deterministic);
    if (cudnn_make_plan(&a->fwd, a->handle, 0, a->debug, why, n) ||
        cudnn_make_plan(&a->bwd, a->handle, a->deterministic, a->debug, why, n))
        return -1;
    return 0;
}
