/* step: the schedule of one forward and one backward on the GPU, layer by layer (docs/model.md,
   "The model"). What the backward needs is kept per layer unless train.recompute says otherwise
   (1: the GELU output is recomputed, 2: the LayerNorm outputs too). */
#include "runtime/cuda/ops.h"
#include <string.h>

/* the residual stream entering layer l */
static dptr residual_in(Cuda *c, int l) { return l == 0 ? buf(c, BUF_ENCODED, 0) : buf(c, BUF_RESIDUAL3, l - 1); }

static int forward_layer(Cuda *c, int l, Err *err) {
    dptr ln1 = buf(c, BUF_LN1, l), ln2 = buf(c, BUF_LN2, l), tmp = buf(c, BUF_TMP, 0);
    dptr res2 = buf(c, BUF_RESIDUAL2, l), res3 = buf(c, BUF_RESIDUAL3, l), fchg = buf(c, BUF_FCH_GELU, l);
    if (l == 0)
        OP("layernorm forward", op_layernorm(c, ln1, buf(c, BUF_LN1_MEAN, 0), buf(c, BUF_LN1_RSTD, 0), residual_in(c, 0),
                                             PW(P_LN1W, 0), PW(P_LN1B, 0), err));
    dptr qkv = buf(c, BUF_QKV, l), pos = buf(c, BUF_DECODE_POS, 0);
    OP("matmul qkv", op_linear(c, MM_QKV, qkv, ln1, PW(P_QKVW, l), PW(P_QKVB, l), 0, err));
    dptr kc = c->kcache + l * c->cache_layer_bytes, vc = c->vcache + l * c->cache_layer_bytes;
    if (c->plan->step.kind == STEP_DECODE) {   /* each row's query against its cached positions; the combine appends */
        dptr partial = buf(c, BUF_ATT_PARTIAL, 0);
        OP("decode attention", launch_decode_attention(&c->ks, c->s, partial, qkv, kc, vc, pos, err) ||
                               launch_decode_attention_combine(&c->ks, c->s, buf(c, BUF_ATTY, l), kc, vc, partial, qkv,
                                                               pos, err));
    } else {
        if (c->kcache) OP("kv append", launch_kv_append(&c->ks, c->s, kc, vc, qkv, pos, err));   /* a prefill */
        if (op_attention(c, l, err)) return -1;
    }
    OP("matmul attproj", op_linear(c, MM_ATTPROJ, tmp, buf(c, BUF_ATTY, l), PW(P_ATTPROJW, l), PW(P_ATTPROJB, l), 0, err));
    OP("layernorm forward", op_residual_layernorm(c, res2, ln2, buf(c, BUF_LN2_MEAN, l), buf(c, BUF_LN2_RSTD, l),
                                                  residual_in(c, l), tmp, PW(P_LN2W, l), PW(P_LN2B, l), err));
    /* fch = ln2 @ fcw^T + fcb, fchg = GELU(fch): one cuBLASLt call with the GELU epilogue, or (train.gelu kernel or
       split) the bias epilogue and our kernel, or (fused) our matmul with both */
    dptr fch = buf(c, BUF_FCH, l);
    if (gelu_fused(c->plan->gelu)) {
        OP("matmul fc+gelu", fc_gemm_forward(&c->ks, c->s, fch, fchg, ln2, PW(P_FCW, l), PW(P_FCB, l), err));
    } else if (gelu_forward_in_kernel(c->plan->gelu)) {
        OP("matmul fc", op_linear(c, MM_FC, fch, ln2, PW(P_FCW, l), PW(P_FCB, l), 0, err));
        OP("gelu forward", op_gelu_forward(c, fchg, fch, err));
    } else {
        OP("matmul fc+gelu", op_linear(c, MM_FC, fchg, ln2, PW(P_FCW, l), PW(P_FCB, l), fch, err));
    }
    OP("matmul fcproj", op_linear(c, MM_FCPROJ, tmp, fchg, PW(P_FCPROJW, l), PW(P_FCPROJB, l), 0, err));
    /* residual3 = residual2 + tmp, then the next LayerNorm (the next layer's ln1, or the final one) */
    if (l + 1 < c->L)
        OP("layernorm forward", op_residual_layernorm(c, res3, buf(c, BUF_LN1, l + 1), buf(c, BUF_LN1_MEAN, l + 1),
                                                      buf(c, BUF_LN1_RSTD, l + 1), res2, tmp, PW(P_LN1W, l + 1),
                                                      PW(P_LN1B, l + 1), err));
    else
        OP("layernorm forward", op_residual_layernorm(c, res3, buf(c, BUF_LNF, 0), buf(c, BUF_LNF_MEAN, 0),
                                                      buf(c, BUF_LNF_RSTD, 0), res2, tmp, PW(P_LNFW, 0), PW(P_LNFB, 0), err));
    return 0;
}

int cu_forward_layers(Cuda *c, Err *err) {
    for (int l = 0; l < c->L; l++)
        if (forward_layer(c, l, err)) return -1;
    return 0;
}

/* the tokens to BUF_INPUTS, checked against the vocabulary first */
static int upload_inputs(Cuda *c, const int32_t *inputs, Err *err) {
    int BT = c->plan->step.B * c->plan->step.T;
    for (int i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= c->V)
            return err_set(err, "input token %d at position %d is outside the vocabulary (0..%d)", inputs[i], i, c->V - 1);
    memcpy(c->h_inputs, inputs, (size_t)BT * 4);
    return cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_INPUTS, 0), c->h_inputs, (size_t)BT * 4, c->s), "copying inputs to the GPU", err);
}

/* the forward from BUF_INPUTS to the final LayerNorm's output (BUF_LNF), queued on the stream */
static int forward_from_inputs(Cuda *c, Err *err) {
    OP("encoder forward", op_encoder_forward(c, err));
    return cu_forward_layers(c, err);
}

/* a new forward starts: nothing of the last one (its losses, final LayerNorm, logits, targets) is to be read */
static void forget_forward(Cuda *c) {
    c->losses_valid = c->lnf_valid = c->have_targets = 0;
    c->logits_chunk = -1;
}

static int forward_trunk(Cuda *c, const int32_t *inputs, Err *err) {
    forget_forward(c);
    return upload_inputs(c, inputs, err) || forward_from_inputs(c, err) ? -1 : 0;
}

/* Without targets, the logits are made a chunk at a time as get_logits asks for them. With targets, the losses;
   a training plan's backward then makes each chunk's logits again, with their gradient (cu_forward_backward, what
   training calls, makes them once). */
int cu_forward(Backend *be, const int32_t *inputs, const int32_t *targets, float *loss, Err *err) {
    Cuda *c = cuda_of(be);
    if (forward_trunk(c, inputs, err)) return -1;
    if (c->plan->step.fills_cache) return cuda_device_sync(&c->dev, "prefill", err);   /* no logits */
    c->lnf_valid = 1;
    if (!targets) return cuda_device_sync(&c->dev, "forward", err);
    if (op_classifier_targets(c, targets, err) || op_classifier(c, 0, 0.0f, err) || op_classifier_read_losses(c, loss, err))
        return -1;
    if (c->plan->step.kind != STEP_TRAIN) return 0;   /* no backward follows */
    if (op_encoder_upload_buckets(c, inputs, err)) return -1;
    c->have_targets = 1;
    return 0;
}

/* The backward on two streams (Plan.streams 2; one while profiling, which times ops on the compute stream): the
   input-gradient chain (the dinp matmuls, the GELU and attention backward, the LayerNorm backward) on the compute
   stream; each layer's weight-gradient matmuls, bias gradients and GELU recompute, which nothing in the chain reads,
   on the side stream, where they fill the gaps and share the GPU with the chain's memory-bound kernels. A side
   piece starts after a fork (the compute stream's work so far) and ends with a mark, an event that the compute
   stream waits for before it overwrites what the piece reads: dresidual (the LayerNorm backward's accumulation),
   dfch (the next layer's fcproj dinp), dqkv (the next layer's attention backward); at recompute=2 the LayerNorm
   outputs the side's dW matmuls read are remade by the next layer's LayerNorm backward, after a wait for a later
   mark. A wait is only for a mark recorded in the same backward (the one before it ended with the join; a CUDA
   graph's recording can wait only for what it recorded). The side stream has its own cuBLASLt workspace and bias
   scratch. Same kernels, same sums: the gradients are the bits of one stream. */
static void use_stream(Cuda *c, int side) {
    c->s = side ? c->side : c->dev.compute;
    c->mm.workspace = buf(c, side ? BUF_CUBLASLT_WORKSPACE_SIDE : BUF_CUBLASLT_WORKSPACE, 0);
    c->bias_scratch = buf(c, side ? BUF_BIAS_SCRATCH_SIDE : BUF_BIAS_SCRATCH, 0);
}
static int side_begin(Cuda *c, Err *err) {
    if (!c->side) return 0;
    if (cuda_check(cu.cuEventRecord(c->ev_fork, c->dev.compute), "recording the side stream's fork", err) ||
        cuda_check(cu.cuStreamWaitEvent(c->side, c->ev_fork, 0), "the side stream's fork", err))
        return -1;
    use_stream(c, 1);
    return 0;
}
static int side_end(Cuda *c, SideMark mark, Err *err) {
    if (!c->side) return 0;
    use_stream(c, 0);
    c->marked[mark] = 1;
    return cuda_check(cu.cuEventRecord(c->ev_mark[mark], c->side), "recording a side stream mark", err);
}
static int wait_side(Cuda *c, SideMark mark, Err *err) {
    if (!c->side || !c->marked[mark]) return 0;
    return cuda_check(cu.cuStreamWaitEvent(c->dev.compute, c->ev_mark[mark], 0), "waiting for the side stream", err);
}

int step_open(Cuda *c, Err *err) {
    c->bias_scratch = buf(c, BUF_BIAS_SCRATCH, 0);
    if (c->plan->streams < 2 || c->prof.on) return 0;
    if (cuda_check(cu.cuStreamCreate(&c->side, CU_STREAM_DEFAULT), "creating the side stream", err) ||
        cuda_check(cu.cuEventCreate(&c->ev_fork, CU_EVENT_DISABLE_TIMING), "creating the side stream's events", err))
        return -1;
    for (int i = 0; i < NUM_MARKS; i++)
        if (cuda_check(cu.cuEventCreate(&c->ev_mark[i], CU_EVENT_DISABLE_TIMING), "creating the side stream's events", err))
            return -1;
    return 0;
}

void step_close(Cuda *c) {
    if (c->step_graph) cu.cuGraphExecDestroy(c->step_graph);
    c->step_graph = NULL;
    if (c->ev_fork) cu.cuEventDestroy(c->ev_fork);
    for (int i = 0; i < NUM_MARKS; i++)
        if (c->ev_mark[i]) cu.cuEventDestroy(c->ev_mark[i]);
    if (c->side) cu.cuStreamDestroy(c->side);
    c->side = NULL;
}

/* A linear layer's weight and bias gradients (db 0: summed elsewhere) on the side stream, then its mark */
static int weight_grads(Cuda *c, const char *name, int dw_id, dptr dW, dptr db, dptr dout, dptr inp, int OC, SideMark mark,
                        Err *err) {
    if (side_begin(c, err)) return -1;
    OP(name, op_linear_backward_dw(c, dw_id, dW, dout, inp, 1.0f, err));
    if (db) OP("bias backward", op_bias_backward(c, db, dout, OC, err));
    return side_end(c, mark, err);
}

/* The backward of a linear layer that reads a LayerNorm's output (ln), then of that LayerNorm: dln = dout @ W,
   dW += dout^T ln, db; dresidual += LN'(dln). At recompute=2 ln is not kept: the LayerNorm backward makes it again
   (from inp and the saved mean and rstd, one more write and no more reads) and the dW matmul runs after it; else
   the dW matmul runs first. mark: the side's mark of dout's readers. */
static int linear_layernorm_backward(Cuda *c, const char *name, int dinp_id, int dw_id, dptr dW, dptr db, dptr dout,
                                     dptr W, dptr ln, dptr inp, dptr lnw, dptr lnb, dptr dlnw, dptr dlnb, dptr mean,
                                     dptr rstd, SideMark mark, Err *err) {
    dptr dres = buf(c, BUF_DRESIDUAL, 0), dln = buf(c, BUF_DLN, 0);
    int OC = c->plan->matmuls[dinp_id].k, rec2 = c->recompute >= 2;
    if (!rec2 && weight_grads(c, name, dw_id, dW, db, dout, ln, OC, mark, err)) return -1;
    OP(name, op_linear_backward_dinp(c, dinp_id, dln, dout, W, 1.0f, 0, err));
    if (wait_side(c, MARK_DRES, err)) return -1;
    OP("layernorm backward", op_layernorm_backward(c, dres, dlnw, dlnb, dln, inp, lnw, mean, rstd, rec2 ? ln : 0,
                                                   rec2 ? lnb : 0, err));
    return rec2 ? weight_grads(c, name, dw_id, dW, db, dout, ln, OC, mark, err) : 0;
}

static int backward_layer(Cuda *c, int l, Err *err) {
    dptr residual = residual_in(c, l), ln1 = buf(c, BUF_LN1, l), ln2 = buf(c, BUF_LN2, l);
    dptr m1 = buf(c, BUF_LN1_MEAN, l), r1 = buf(c, BUF_LN1_RSTD, l), m2 = buf(c, BUF_LN2_MEAN, l), r2 = buf(c, BUF_LN2_RSTD, l);
    dptr res2 = buf(c, BUF_RESIDUAL2, l), fch = buf(c, BUF_FCH, l), fchg = buf(c, BUF_FCH_GELU, l);
    dptr dres = buf(c, BUF_DRESIDUAL, 0), dfch = buf(c, BUF_DFCH, 0), datty = buf(c, BUF_DATTY, 0);
    int gelu_kernel = gelu_backward_in_kernel(c->plan->gelu), fused = gelu_fused(c->plan->gelu);
    /* the side: the GELU output again (for the fcproj dW only), the fcproj weight and bias gradients */
    if (side_begin(c, err)) return -1;
    if (c->recompute >= 1) OP("gelu recompute", op_gelu_forward(c, fchg, fch, err));
    OP(gelu_kernel ? "matmul bwd fcproj" : "matmul bwd fcproj+dgelu",
       op_linear_backward_dw(c, MM_FCPROJ_DW, GW(P_FCPROJW, l), dres, fchg, 1.0f, err));
    OP("bias backward", op_bias_backward(c, GW(P_FCPROJB, l), dres, c->C, err));
    if (side_end(c, MARK_DRES, err)) return -1;
    /* dfch = (dresidual @ fcprojw) * GELU'(fch): the DGELU epilogue, or (train.gelu) the matmul, then our kernel,
       which also sums the fc bias gradient, or (fused) our matmul with both; dfch is free once the layer above's fc
       gradients are in */
    if (wait_side(c, MARK_DFCH, err)) return -1;
    if (fused) {
        OP("matmul bwd fcproj+dgelu", op_fcproj_dgelu_backward(c, dfch, dres, PW(P_FCPROJW, l), fch, err));
        OP("bias backward", op_fc_bias_reduce(c, GW(P_FCB, l), err));
    } else {
        OP(gelu_kernel ? "matmul bwd fcproj" : "matmul bwd fcproj+dgelu",
           op_linear_backward_dinp(c, MM_FCPROJ_DINP, dfch, dres, PW(P_FCPROJW, l), 1.0f, gelu_kernel ? 0 : fch, err));
        if (gelu_kernel) OP("gelu backward", op_gelu_backward_bias(c, dfch, fch, GW(P_FCB, l), err));
    }
    if (linear_layernorm_backward(c, "matmul bwd fc", MM_FC_DINP, MM_FC_DW, GW(P_FCW, l),
                                  gelu_kernel || fused ? 0 : GW(P_FCB, l),
                                  dfch, PW(P_FCW, l), ln2, res2, PW(P_LN2W, l), PW(P_LN2B, l), GW(P_LN2W, l),
                                  GW(P_LN2B, l), m2, r2, MARK_DFCH, err) ||
        weight_grads(c, "matmul bwd attproj", MM_ATTPROJ_DW, GW(P_ATTPROJW, l), GW(P_ATTPROJB, l), dres,
                     buf(c, BUF_ATTY, l), c->C, MARK_DRES, err))
        return -1;
    OP("matmul bwd attproj", op_linear_backward_dinp(c, MM_ATTPROJ_DINP, datty, dres, PW(P_ATTPROJW, l), 1.0f, 0, err));
    /* dqkv is free once the layer above's qkv gradients are in */
    if (wait_side(c, MARK_DQKV, err) || op_attention_backward(c, l, err)) return -1;
    return linear_layernorm_backward(c, "matmul bwd qkv", MM_QKV_DINP, MM_QKV_DW, GW(P_QKVW, l), GW(P_QKVB, l),
                                     buf(c, BUF_DQKV, 0), PW(P_QKVW, l), ln1, residual, PW(P_LN1W, l), PW(P_LN1B, l),
                                     GW(P_LN1W, l), GW(P_LN1B, l), m1, r1, MARK_DQKV, err);
}

/* The backward from the final LayerNorm down to layer 0, once BUF_DLN holds d(loss)/d(lnf) and the classifier's
   dwte is in; the side stream's work is all in (joined) at its end. */
static int backward_layers(Backend *be, Err *err) {
    Cuda *c = cuda_of(be);
    if (c->side) use_stream(c, 0);   /* where a failed step may have left it */
    memset(c->marked, 0, sizeof c->marked);
    dptr dres = buf(c, BUF_DRESIDUAL, 0), dln = buf(c, BUF_DLN, 0);
    if (cuda_check(cu.cuMemsetD8Async(dres, 0, (size_t)c->plan->step.B * c->plan->step.T * c->C * c->xs, c->s), "zeroing dresidual", err)) return -1;
    OP("layernorm backward", op_layernorm_backward(c, dres, GW(P_LNFW, 0), GW(P_LNFB, 0), dln, buf(c, BUF_RESIDUAL3, c->L - 1),
                                                   PW(P_LNFW, 0), buf(c, BUF_LNF_MEAN, 0), buf(c, BUF_LNF_RSTD, 0), 0, 0, err));
    for (int l = c->L - 1; l >= 0; l--) {
        if (backward_layer(c, l, err)) return -1;
        /* layer l's gradients are all in once the compute stream has the side's last mark of the layer */
        if (be->grad_ready && (wait_side(c, MARK_DQKV, err) || be->grad_ready(be->grad_ready_ctx, l, err))) return -1;
    }
    /* the side's work all in before anything after (the encoder backward, the optimizer, the next forward) */
    return side_end(c, MARK_DONE, err) || wait_side(c, MARK_DONE, err) ? -1 : 0;
}

/* after backward_layers: the embeddings' gradients, the rest of the gradients handed on */
static int backward_tail(Backend *be, Err *err) {
    Cuda *c = cuda_of(be);
    OP("encoder backward", op_encoder_backward(c, err));
    if (be->grad_ready && be->grad_ready(be->grad_ready_ctx, GRAD_PART_REST, err)) return -1;
    return 0;
}

/* The forward kept no logits: each chunk's are made again, now with their gradient. */
int cu_backward(Backend *be, float grad_scale, Err *err) {
    Cuda *c = cuda_of(be);
    if (!c->have_targets) return err_set(err, "backward needs a forward with targets first");
    c->prof.steps++;
    c->lnf_valid = 0;
    if (op_classifier(c, 1, classifier_alpha(c, grad_scale), err) || backward_layers(be, err) || backward_tail(be, err))
        return -1;
    return cuda_device_sync(&c->dev, "backward", err);
}

/* A training micro-step's ops between the uploads (inputs, targets) and the encoder backward: the forward, each
   chunk's logits once with their losses and gradient (alpha), the backward down to layer 0. */
static int micro_step_ops(Backend *be, float alpha, Err *err) {
    Cuda *c = cuda_of(be);
    return forward_from_inputs(c, err) || op_classifier(c, 1, alpha, err) || backward_layers(be, err) ? -1 : 0;
}

/* The micro-step as a CUDA graph (Plan.graph): micro_step_ops recorded once and replayed, so that the GPU starts
   each kernel without waiting for the host's launch, and the host's part of a micro-step is one call. Where it is
   not: while profiling (the profile synchronizes each op), with GPT2GEN_SYNC (each launch checked), where the
   gradients are handed on layer by layer (several ranks overlap their averaging with the backward: a host call
   between kernels), and for the first micro-step, which runs op by op (it is what is recorded, and whatever is set
   up on first use is then set up outside a recording). The launches' arguments are the plan's fixed buffers and
   alpha, so a graph serves while alpha stays (fp16's loss scale changes it: recorded again). */
static int graph_serves(Backend *be) {
    Cuda *c = cuda_of(be);
    return c->plan->graph && !c->prof.on && !c->ks.sync_each && !be->grad_ready && c->micro_steps > 0;
}

static int record_micro_step(Backend *be, float alpha, Err *err) {
    Cuda *c = cuda_of(be);
    if (c->step_graph) { cu.cuGraphExecDestroy(c->step_graph); c->step_graph = NULL; }
    CUgraph g = NULL;
    int rc = cuda_check(cu.cuStreamBeginCapture(c->dev.compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "recording the training micro-step", err);
    if (!rc) {
        rc = micro_step_ops(be, alpha, err);
        Err end;
        int ended = cuda_check(cu.cuStreamEndCapture(c->dev.compute, &g), "recording the training micro-step", rc ? &end : err);
        rc = rc || ended;
    }
    use_stream(c, 0);
    if (!rc) rc = cuda_check(cu.cuGraphInstantiate(&c->step_graph, g, 0), "instantiating the training micro-step's graph", err);
    if (g) cu.cuGraphDestroy(g);
    if (rc) {
        c->step_graph = NULL;
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return err_set(err, "%s (train.cuda_graph = false runs the micro-step op by op)", why);
    }
    c->step_graph_alpha = alpha;
    return 0;
}

static int run_micro_step(Backend *be, float alpha, Err *err) {
    Cuda *c = cuda_of(be);
    if (!graph_serves(be)) return micro_step_ops(be, alpha, err);
    if ((!c->step_graph || memcmp(&alpha, &c->step_graph_alpha, sizeof alpha)) && record_micro_step(be, alpha, err)) return -1;
    c->graph_runs++;
    return cuda_check(cu.cuGraphLaunch(c->step_graph, c->s), "running the training micro-step's graph", err);
}

/* A training micro-step: each chunk's logits once, their losses and gradient together; the losses are read when
   the backward is done, so the host waits once. */
int cu_forward_backward(Backend *be, const int32_t *inputs, const int32_t *targets, float grad_scale, float *loss, Err *err) {
    Cuda *c = cuda_of(be);
    profile_queue_start(&c->prof);
    forget_forward(c);
    c->prof.steps++;
    if (upload_inputs(c, inputs, err) || op_classifier_targets(c, targets, err) ||
        run_micro_step(be, classifier_alpha(c, grad_scale), err) || op_encoder_upload_buckets(c, inputs, err) ||
        backward_tail(be, err))
        return -1;
    c->have_targets = 1;
    c->micro_steps++;
    profile_queue_queued(&c->prof);
    if (op_classifier_read_losses(c, loss, err)) return -1;
    profile_queue_done(&c->prof);
    return 0;
}
