/* ops: the CUDA backend's state and its ops, one file per op family:
 *   encoder.c    token + position embedding, its backward (deterministic buckets)
 *   layernorm.c  LayerNorm forward (plain, fused with the residual add) and backward
 *   linear.c     the linear layers: cuBLASLt matmuls with bias / GELU epilogues, bias gradients, GELU
 *   attention.c  causal attention without the T x T scores: cuDNN's flash attention or our template
 *   classifier.c logits, losses, dlogits and their matmuls, a chunk of rows at a time
 *   arch.c       GPT-2's relatives' ops: RMSNorm, QK-norm, RoPE, grouped-query attention's expanded k and v, ReLU^2,
 *                SwiGLU, the decode step's soft-cap
 *   optimizer.c  gradients to zero, their sum of squares (the global norm), AdamW (Backend.run's phases)
 *   step.c       a forward and a backward: the plan's schedule run around the host's work (Backend.run's phases)
 *   step_ops.c   one op of the schedule (gen/schedule.h) by its kind, and the backward's side stream
 *   decode.c     a decode plan's step against the key/value cache, replayed as a CUDA graph (BACKEND_DECODE)
 *   cuda_backend.c  creation, Backend.run's dispatch, the arrays to and from the host (Backend.read, write)
 * Every op runs on the stream c->s: the device's compute stream, or for the backward's weight gradients the side
 * stream (step.c); the ops of the step follow docs/model.md, "The model". */
#ifndef GPT2GEN_CUDA_OPS_H
#define GPT2GEN_CUDA_OPS_H
#include "runtime/cuda/tune_api.h"   /* dptr, the device, kernels, matmuls, cuDNN; the ops tune/ also runs */
#include "runtime/cuda/arena.h"
#include "runtime/cuda/profile.h"
#include "runtime/sample/sampling.h"   /* DecodeRun, SampleSettings: BACKEND_DECODE's */
#include "gen/plan.h"
#include "kernel_launch.h"
#define DECODE_IN_FLIGHT 8   /* decode steps queued ahead of the one whose tokens the host waits for */

typedef struct {
    CudaDevice dev;
    CUstream s;                      /* dev.compute, or (inside the backward) side */
    const Plan *plan;
    const Env *env;                  /* GPT2GEN_SYNC, _PROFILE, _CUDNN_* (BackendOptions.env; never NULL) */
    Kernels ks;
    Matmuls mm;
    Arena arena;
    Profile prof;
    Precision prec;                  /* floatX: fp32, bf16 or fp16 */
    size_t xs;                       /* bytes per floatX */
    int C, L, NH, HS, V, Vp;         /* the plan's model (B and T: plan->step) */
    size_t np, psz[NUM_PARAM_TENSORS], poff[NUM_PARAM_TENSORS];
    /* host side */
    int32_t *h_inputs, *h_count, *h_bucket_token, *h_bucket_start, *h_positions;
    float *h_losses, *h_partials;
    int n_buckets, have_targets, losses_valid;
    int lnf_valid;                   /* BUF_LNF holds the last forward's final LayerNorm: logits can be made from it */
    int logits_chunk;                /* the chunk of rows whose logits BUF_LOGITS holds, or -1 */
    /* attention through cuDNN (NULL: the flash template); its workspace, inside the logits buffer where it fits */
    CudnnAttention *cudnn;
    dptr cudnn_workspace, cudnn_workspace_own;
    /* the key/value cache: a decode plan's own, or (a prefill) that of the decode backend it fills; 0 without */
    dptr kcache, vcache;
    size_t cache_layer_bytes;
    /* a decode plan: the drawn tokens (maxT*B ints) in host memory the GPU writes, the step as a CUDA graph for the
       settings it was recorded with, and an event per step in flight */
    int32_t *h_drawn;
    dptr d_drawn;
    CUgraphExec graph;
    SampleSettings graph_settings;
    CUevent step_done[DECODE_IN_FLIGHT];
    /* while a greedy step's ops are enqueued on the decode linears (Plan.decode_greedy_fused): BUF_DECODE_BEST, which
       the classifier's decode_ln_linear folds each row's logits into; else 0 */
    dptr decode_best;
    /* the training backward's side stream (Plan.streams 2, not while profiling; NULL without) and its events
       (step.c); the bias scratch of the stream ops go on now (BUF_BIAS_SCRATCH, or _SIDE) */
    CUstream side;
    CUevent ev_fork, ev_mark[NUM_MARKS];
    int marked[NUM_MARKS];           /* the mark was recorded in this backward (what a wait may wait for) */
    dptr bias_scratch;
    /* the training micro-step as a CUDA graph (Plan.graph; step.c), recorded for alpha step_graph_alpha; the
       micro-steps run so far (the first runs op by op), and those replayed from the graph */
    CUgraphExec step_graph;
    float step_graph_alpha;
    long micro_steps, graph_runs;
} Cuda;

static inline Cuda *cuda_of(Backend *be) { return (Cuda *)be->impl; }
/* buffer id's memory for layer l (layer 0 for buffers that serve every layer) */
static inline dptr buf(const Cuda *c, BufferId id, int l) {
    return c->arena.buf[id] + (size_t)l * c->plan->memory.buffers[id].layer_bytes;
}
/* parameter tensor i (of layer l for the per-layer tensors) in the parameters (BUF_PARAMS) or gradients */
dptr tensor_at(const Cuda *c, BufferId base, int i, int l);
#define PW(i, l) tensor_at(c, BUF_PARAMS, (i), (l))
#define GW(i, l) tensor_at(c, BUF_GRADS, (i), (l))
#define OP(name, call) PROFILED(&c->prof, name, call)

int op_encoder_forward(Cuda *c, Err *err);                     /* BUF_INPUTS -> BUF_ENCODED */
/* the position embedding the encoder kernels add: wpe, or with RoPE (no wpe) BUF_WPE_ZERO, maxT rows of zeros */
static inline dptr cu_wpe(const Cuda *c) {
    return c->plan->model.position == POS_ROPE ? c->arena.buf[BUF_WPE_ZERO] : tensor_at(c, BUF_PARAMS, P_WPE, 0);
}
int op_encoder_upload_buckets(Cuda *c, const int32_t *inputs, Err *err);
int op_encoder_backward(Cuda *c, Err *err);                    /* BUF_DRESIDUAL -> dwte, dwpe */

int op_layernorm(Cuda *c, dptr out, dptr mean, dptr rstd, dptr inp, dptr w, dptr b, Err *err);
int op_residual_layernorm(Cuda *c, dptr res, dptr out, dptr mean, dptr rstd, dptr x1, dptr x2, dptr w, dptr b, Err *err);
/* dinp += LN'(dout), dw and db += the weight gradients; out not 0: also out = LN(inp) with bias b, from the saved
   mean and rstd (recompute=2 makes the LayerNorm output again here, for the weight-gradient matmul after it) */
int op_layernorm_backward(Cuda *c, dptr dinp, dptr dw, dptr db, dptr dout, dptr inp, dptr w, dptr mean, dptr rstd,
                          dptr out, dptr b, Err *err);

/* out = inp @ W^T (+ bias) through plan matmul id; aux: the GELU pre-activation for MM_FC with the GELU epilogue */
int op_linear(Cuda *c, int id, dptr out, dptr inp, dptr W, dptr bias, dptr aux, Err *err);
/* dinp = alpha dout @ W (times GELU'(pre) for the DGELU entry), dW += alpha dout^T @ inp */
int op_linear_backward(Cuda *c, int dinp_id, int dw_id, dptr dinp, dptr dW, dptr dout, dptr inp, dptr W, float alpha,
                       dptr pre, Err *err);
/* its two halves: the dinp matmul; the dW matmul */
int op_linear_backward_dinp(Cuda *c, int dinp_id, dptr dinp, dptr dout, dptr W, float alpha, dptr pre, Err *err);
int op_linear_backward_dw(Cuda *c, int dw_id, dptr dW, dptr dout, dptr inp, float alpha, Err *err);
/* db += the column sums of dout (B*T rows of OC): a linear layer's bias gradient, a pass of its own over dout
   (templates/bias.cu; profiled apart from the matmuls as "bias backward") */
int op_bias_backward(Cuda *c, dptr db, dptr dout, int OC, Err *err);
/* dinout (B*T, 4C) *= GELU'(pre), and db (4C) += its column sums: the fc layer's GELU backward and bias gradient */
int op_gelu_backward_bias(Cuda *c, dptr dinout, dptr pre, dptr db, Err *err);
/* train.gelu = "fused" (templates/fc_gemm.cu): dpre (B*T, 4C) = (dout @ W) * GELU'(pre), W fcproj's (C, 4C) weight
   (transposed first into BUF_FCPROJ_WT), with the fc bias gradient's partials into BUF_FC_PARTIALS; then db (4C) += their
   sums */
int op_fcproj_dgelu_backward(Cuda *c, dptr dpre, dptr dout, dptr W, dptr pre, Err *err);
int op_fc_bias_reduce(Cuda *c, dptr db, Err *err);

/* GPT-2's relatives' ops (arch.c; gen/schedule.h says what each computes) */
int op_rmsnorm_backward(Cuda *c, dptr dinp, dptr dw, dptr dout, dptr inp, dptr w, dptr rstd, Err *err);
int op_qk_norm_backward(Cuda *c, dptr dinout, dptr inp, dptr qw, dptr kw, dptr rstd, dptr dqw, dptr dkw, dptr pos,
                        Err *err);
/* the attention's scratch for grouped-query attention on cuDNN (Plan.kv_expand: BUF_QKV_X, BUF_DQKV_X), else zeros */
AttExpand op_attention_expand(const Cuda *c);
int op_arch(Cuda *c, const SchedOp *op, const dptr *a, Err *err);   /* 1: not one of theirs */
/* the classifier's weight: wte, or lmhead when the head is untied */
static inline int cu_head(const Cuda *c) { return c->plan->model.untied ? P_LMHEAD : P_WTE; }

/* The plan's attention path (Plan.attention, decided when the plan was made): cuDNN's, opened here (a failure is an
   error: the plan's facts said it serves), or the flash template. Prints one line saying which, with the plan's
   reason. */
int  attention_open(Cuda *c, Err *err);
void attention_close(Cuda *c);

/* The classifier over every row, a chunk of Plan.classifier_rows rows at a time (classifier.c): the chunk's logits
   from BUF_LNF, its losses into BUF_LOSSES (for the targets op_classifier_targets uploaded) and, with grad, its
   dlogits (in place of the logits) and the backward's matmuls: dlnf rows into BUF_DLN, dwte += alpha * dlogits^T lnf.
   The dlogits are (softmax - onehot) * dlogits_unit: d(mean loss), unit 1/(B*T), except in fp16, where the unit is 2^15
   and alpha carries 1/(2^15 B*T) (classifier_alpha). fp16's normal range starts at 6e-5, and the probabilities of a 50k
   vocabulary are mostly far below that (1/(B*T) would push them lower still): times 2^15 they keep fp16's 11
   bits down to 2e-9, while |softmax - onehot| <= 1 keeps them below fp16's largest value, 65504. */
int   op_classifier_targets(Cuda *c, const int32_t *targets, Err *err);   /* checked against V, then uploaded */
int   op_classifier(Cuda *c, int grad, float alpha, Err *err);
float classifier_alpha(const Cuda *c, float grad_scale);   /* the backward's alpha for a loss gradient scaled by grad_scale */
/* waits for the stream, then the losses to the host (h_losses) and their mean into *loss (when not NULL) */
int   op_classifier_read_losses(Cuda *c, float *loss, Err *err);
/* chunk k's logits into BUF_LOGITS, unless it holds them (a read of BACKEND_LOGITS after a forward) */
int   op_classifier_logits(Cuda *c, int k, Err *err);
#define DLOGITS_UNIT_FP16 32768.0f
static inline float dlogits_unit(const Cuda *c) { return c->prec == PREC_FP16 ? DLOGITS_UNIT_FP16 : 1.0f / (float)(c->plan->step.B * c->plan->step.T); }

/* The plan's schedule (gen/schedule.h) on the GPU (step_ops.c): cu_run_op runs one op by its kind (ctx: a CuRun;
   run, the Backend.run whose grad_ready a training backward's OP_GRAD_READY calls, may be NULL), cu_run_phase a
   phase (the forward: a decode plan's from its tokens to the logits, any other's from BUF_INPUTS to BUF_LNF, with a
   prefill's keys and values into the cache; the backward), cu_run_list a head or tail list. cu_use_stream: the ops
   go on the compute stream (side 0) or the side stream, each with its own cuBLASLt workspace and bias scratch. */
typedef struct { Cuda *c; const BackendRun *run; } CuRun;
int  cu_run_op(void *ctx, const SchedOp *op, int l, Err *err);
int  cu_run_phase(Cuda *c, const BackendRun *run, const SchedPhase *ph, Err *err);
int  cu_run_list(Cuda *c, const BackendRun *run, const SchedList *list, Err *err);
void cu_use_stream(Cuda *c, int side);
/* the backward's side stream and events where the plan has two streams and the profile is off; step_close also
   frees the micro-step's graph (step.c) */
int  step_open(Cuda *c, Err *err);
void step_close(Cuda *c);
int cu_decode(Backend *be, DecodeRun *run, Err *err);
int  decode_open(Cuda *c, Err *err);    /* a decode plan's host buffers and events */
void decode_close(Cuda *c);
/* Backend.run's phases (backend.h: BackendPhase), each after backend_check_run: step.c, optimizer.c, decode.c */
int cu_forward(Backend *be, const int32_t *inputs, const int32_t *targets, float *loss, Err *err);
int cu_backward(Backend *be, const BackendRun *r, Err *err);
int cu_forward_backward(Backend *be, const BackendRun *r, Err *err);
int cu_zero_grad(Backend *be, Err *err);
int cu_grad_sumsq(Backend *be, size_t offset, size_t n, double *sumsq, Err *err);
int cu_update(Backend *be, const BackendRun *r, Err *err);
#endif
