/* schedule: a plan's step as data, the ordered ops of its forward and backward (docs/model.md, "The model").
   GPT-2's block is written once, in gen/schedule.c, for the plan's step kind (train, forward, prefill, decode),
   GELU path, recompute level and streams; runtime/cuda/step.c and runtime/cpu/cpu_step.c run the lists, each
   looking its implementation up by op kind. plan.txt lists them for people.

   A phase is a head (run once), a block (run once per layer: the forward for l = 0..L-1, the backward for
   l = L-1..0) and a tail (run once). An op names its buffers: BufferId (gen/memory.h) or parameter tensor
   (P_* of common/gpt2.h, in the parameters or the gradients) with a layer relative to the block's (SchedLayer),
   and the matmul (MM_*) that runs it where one does. A block op may run on some layers only (SchedWhen): the
   GPU folds each residual add into the next LayerNorm, so the first layer's ln1 stands alone and the last
   layer's residual goes into the final LayerNorm. The classifier (logits, losses and their gradient, a chunk of
   rows at a time) runs between the forward and the backward, where the call asks for it; a decode step's logits
   are in its forward's tail. */
#ifndef GPT2GEN_GEN_SCHEDULE_H
#define GPT2GEN_GEN_SCHEDULE_H
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"
#include "gen/kernels.h"
#include "gen/matmuls.h"
#include "gen/memory.h"

/* The arguments of each kind, in order (a0, a1, ...; "-" where it may be none: a null pointer). "+=": accumulated. */
typedef enum {
    OP_ENCODER,             /* out = wte[inputs] + wpe:             out, inputs, wte, wpe */
    OP_DECODE_EMBED,        /* the same at the position pos:        out, tokens, wte, wpe, pos */
    OP_LAYERNORM,           /* out = LN(inp):                       out, mean, rstd, inp, w, b */
    OP_RESIDUAL_LAYERNORM,  /* res = x1 + x2, out = LN(res):        res, out, mean, rstd, x1, x2, w, b */
    OP_MATMUL,              /* out = inp @ W^T + bias (mm); with aux, mm's GELU epilogue: aux = that, out = GELU(aux):
                                                                    out, inp, W, bias-, aux- */
    OP_FC_GELU,             /* the fused fc (train.gelu "fused"): pre = inp @ W^T + b, out = GELU(pre):
                                                                    pre, out, inp, W, b */
    OP_KERNEL,              /* one declared kernel (gen/kernels.c), launched as declared: its pointer parameters
                               from the arguments in order, its scalar one (the size) n; the CPU runs the function
                               cpu_ops.c registers under the kernel's name (cpu_kernel_find). An elementwise op needs
                               no kind of its own: docs/adding-an-op.md */
    OP_KV_APPEND,           /* the layer's keys and values at positions pos..: kcache, vcache, qkv, pos */
    OP_ATTENTION,           /* causal attention:                    out, stats, qkv */
    OP_DECODE_ATTENTION,    /* one query per row against the cache, which it appends first:
                                                                    out, kcache, vcache, qkv, pos, partial */
    OP_LN_MATMUL,           /* out = norm(inp) @ W^T + bias (mm: the model's LayerNorm or RMSNorm), the MLP's
                               activation on fc (SwiGLU: silu(norm(inp) @ gate^T + gate bias) times it), the logit
                               soft-cap on the classifier of a capped model; a decode
                               step's of few rows (Plan.decode_linear), no mean or rstd kept:
                                                                    out, inp, lnw, lnb-, W, bias-, gate-, gate bias- */
    OP_MATMUL_RESIDUAL,     /* out = res + (inp @ W^T + bias) (mm): the same steps' residual add:
                                                                    out, inp, W, bias-, res */
    OP_ZERO,                /* n elements of buf = 0:               buf */
    OP_LAYERNORM_BACKWARD,  /* dinp += LN'(dout), dw, db +=; out-: also out = LN(inp) (b-) from mean and rstd:
                                                                    dinp, dw, db, dout, inp, w, mean, rstd, out-, b- */
    OP_MATMUL_DINP,         /* dinp = dout @ W (mm), times GELU'(pre) with pre (mm's DGELU epilogue):
                                                                    dinp, dout, W, pre- */
    OP_MATMUL_DW,           /* dW += dout^T @ inp (mm):             dW, dout, inp */
    OP_BIAS_BACKWARD,       /* db += the column sums of dout (n columns): db, dout */
    OP_GELU_BACKWARD_BIAS,  /* dinout *= GELU'(pre), db += its column sums: dinout, pre, db */
    OP_FCPROJ_DGELU,        /* the fused fcproj dinp: dpre = (dout @ W) * GELU'(pre), the fc bias gradient's partials:
                                                                    dpre, dout, W, pre */
    OP_FC_BIAS_REDUCE,      /* db += those partials' sums (the column sums of dpre: the CPU's meaning): db, dpre */
    OP_ATTENTION_BACKWARD,  /* dqkv = attention'(dout):             dqkv, qkv, out, dout, stats, ddot */
    OP_ENCODER_BACKWARD,    /* dwte, dwpe += from dout:             dwte, dwpe, dout, inputs */
    OP_GRAD_READY,          /* the block's layer's gradients (head and tail: the rest's) are final: the backend's
                               grad_ready, after the compute stream waits for mark */
    /* the GPU backward's two streams (Plan.streams 2); no-ops on the CPU and where the GPU has no side stream */
    OP_FORK,                /* the side stream starts after the compute stream's work so far; ops go on the side */
    OP_MARK,                /* the side's piece ends with mark; ops go on the compute stream again */
    OP_WAIT,                /* the compute stream waits for mark (if this backward recorded it) */
    /* GPT-2's relatives (docs/model.md, "Architectures"); eps is the model's norm_eps */
    OP_RMSNORM,             /* out = x * rsqrt(mean(x^2) + eps) * w: out, rstd, inp, w */
    OP_RESIDUAL_RMSNORM,    /* res = x1 + x2, out = RMS(res):       res, out, rstd, x1, x2, w */
    OP_RMSNORM_BACKWARD,    /* dinp += RMS'(dout), dw +=:           dinp, dw, dout, inp, w, rstd */
    OP_QK_NORM,             /* each head's q and k of inp (qkv) RMS-normed with qw, kw into out, v copied; rstd- per
                               head (out may be inp where rstd is none); where gpt2_qk_norm_rotates, q and k then
                               rotated as OP_ROPE at pos (and no OP_ROPE): out, rstd-, inp, qw, kw, pos- */
    OP_QK_NORM_BACKWARD,    /* dinout (dqkv) from d(out) to d(inp), in place, where gpt2_qk_norm_rotates first
                               rotated back as OP_ROPE_BACKWARD; dqw, dkw +=:
                                                                    dinout, inp, qw, kw, rstd, dqw, dkw, pos- */
    OP_ROPE,                /* q and k heads of qkv rotated in place (rotate_half, rope_theta) at positions t, or
                               pos + t with pos:                    qkv, pos- */
    OP_ROPE_BACKWARD,       /* the gradient rotated back:           dqkv, pos- */
    OP_RELU2,               /* out = relu(pre)^2:                   out, pre */
    OP_RELU2_BACKWARD,      /* dinout *= 2 relu(pre):               dinout, pre */
    OP_SWIGLU,              /* out = silu(gate) * up:               out, up, gate */
    OP_SWIGLU_BACKWARD,     /* from d(out) in dinout: dgate = d * up * silu'(gate), dinout = d * silu(gate):
                                                                    dinout, dgate, up, gate */
    OP_MATMUL_DINP_ACC,     /* dinp += dout @ W (mm):               dinp, dout, W */
    OP_SOFTCAP,             /* logits = cap * tanh(logits / cap), n elements: logits */
    OP_KINDS
} OpKind;

/* The side stream's marks: what the compute stream waits for before it overwrites what the side reads
   (dresidual, dfch, dqkv), and the side's end. SCHED_NO_MARK: none. */
typedef enum { MARK_DRES, MARK_DFCH, MARK_DQKV, MARK_DONE, NUM_MARKS, SCHED_NO_MARK = NUM_MARKS } SideMark;

typedef enum { REF_NONE, REF_BUF, REF_PARAM, REF_GRAD } RefSpace;
/* the layer of a reference: 0 (a buffer that serves every layer, a tensor of no layer), the block's l, l+1, l-1, L-1 */
typedef enum { AT_0, AT_L, AT_NEXT, AT_PREV, AT_LAST } SchedLayer;
/* the layers of a block that run an op */
typedef enum { ON_EVERY, ON_FIRST, ON_LATER, ON_LAST, ON_BELOW_LAST } SchedWhen;

typedef struct {
    uint8_t space;          /* RefSpace */
    uint8_t id;             /* BufferId (REF_BUF) or P_* (REF_PARAM: the parameters, REF_GRAD: the gradients) */
    uint8_t layer;          /* SchedLayer */
} SchedRef;

#define SCHED_MAX_ARGS 10
#define SCHED_MAX_OPS 48

typedef struct {
    uint8_t kind;           /* OpKind */
    uint8_t when;           /* SchedWhen (block ops; head and tail ops run always) */
    uint8_t mark;           /* OP_MARK, OP_WAIT, OP_GRAD_READY: SideMark */
    int8_t mm;              /* the MatmulId that runs it, or -1 */
    int16_t kernel_id;      /* OP_KERNEL: the kernel's id (K_* of kernel_ids.h, an index into Plan.kernels), else -1 */
    const KernelDecl *kernel;   /* OP_KERNEL: its declaration, else NULL */
    long long n;            /* OP_ZERO: elements; OP_BIAS_BACKWARD: columns; OP_KERNEL: the scalar parameter */
    const char *name;       /* what it is, for the profile and plan.txt: "matmul qkv" */
    SchedRef arg[SCHED_MAX_ARGS];
} SchedOp;

typedef struct {
    int n;
    SchedOp ops[SCHED_MAX_OPS];
} SchedList;

typedef struct {
    SchedList head, block, tail;
    int reverse;            /* the block runs for l = L-1 down to 0 */
} SchedPhase;

typedef struct {
    SchedPhase forward;     /* inputs (or a decode step's tokens) to the final LayerNorm (a decode step: the logits) */
    SchedPhase backward;    /* a training step: from d(loss)/d(lnf) in BUF_DLN down to dresidual of layer 0 */
    SchedList embed_backward;   /* then the embeddings' (the GPU uploads the encoder's buckets in between) */
} OpSchedule;

struct Plan;
/* The ops of plan's step (its step kind, GELU path, recompute and streams; a forward plan has no backward). */
void schedule_make(OpSchedule *s, const struct Plan *plan);
/* Calls run for every op of the phase in order: the head's and the tail's with l = GRAD_PART_REST (-1), the block's
   for each layer whose SchedWhen takes it; stops at the first non-zero return. */
typedef int (*SchedRunFn)(void *ctx, const SchedOp *op, int l, Err *err);
int schedule_run_phase(const SchedPhase *ph, int L, SchedRunFn run, void *ctx, Err *err);
int schedule_run_list(const SchedList *list, int l, int L, SchedRunFn run, void *ctx, Err *err);
/* The absolute layer of r for block layer l of L (-1 for a head or tail op: AT_0 and AT_LAST only). */
static inline int schedule_layer(const SchedRef *r, int l, int L) {
    switch (r->layer) {
    case AT_L: return l;
    case AT_NEXT: return l + 1;
    case AT_PREV: return l - 1;
    case AT_LAST: return L - 1;
    default: return 0;
    }
}
const char *schedule_kind_name(int kind);   /* "matmul", "layernorm backward", ... */
/* plan's schedule for people: one line per op, what it writes and reads (a section of plan.txt) */
void schedule_write(FILE *f, const struct Plan *plan);
#endif
