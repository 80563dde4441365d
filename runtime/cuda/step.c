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
       split) the bias epilogue and our kernel */
    dptr fch = buf(c, BUF_FCH, l);
    if (gelu_forward_in_kernel(c->plan->gelu)) {
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

/* the forward from the tokens to the final LayerNorm's output (BUF_LNF), queued on the stream */
static int forward_trunk(Cuda *c, const int32_t *inputs, Err *err) {
    c->losses_valid = c->lnf_valid = c->have_targets = 0;
    c->logits_chunk = -1;
    int BT = c->plan->step.B * c->plan->step.T;
    for (int i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= c->V)
            return err_set(err, "input token %d at position %d is outside the vocabulary (0..%d)", inputs[i], i, c->V - 1);
    memcpy(c->h_inputs, inputs, (size_t)BT * 4);
    if (cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_INPUTS, 0), c->h_inputs, (size_t)BT * 4, c->s), "copying inputs to the GPU", err))
        return -1;
    OP("encoder forward", op_encoder_forward(c, err));
    return cu_forward_layers(c, err);
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

/* The backward of a linear layer that reads a LayerNorm's output (ln), then of that LayerNorm: dln = dout @ W,
   dW += dout^T ln, db; dresidual += LN'(dln). At recompute=2 ln is not kept: the LayerNorm backward makes it again
   (from inp and the saved mean and rstd, one more write and no more reads) and the dW matmul runs after it; else
   the dW matmul runs first. */
static int linear_layernorm_backward(Cuda *c, const char *name, int dinp_id, int dw_id, dptr dW, dptr db, dptr dout,
                                     dptr W, dptr ln, dptr inp, dptr lnw, dptr lnb, dptr dlnw, dptr dlnb, dptr mean,
                                     dptr rstd, Err *err) {
    dptr dres = buf(c, BUF_DRESIDUAL, 0), dln = buf(c, BUF_DLN, 0);
    int OC = c->plan->matmuls[dinp_id].k;
    if (c->recompute < 2) {
        OP(name, op_linear_backward(c, dinp_id, dw_id, dln, dW, dout, ln, W, 1.0f, 0, err));
        if (db) OP("bias backward", op_bias_backward(c, db, dout, OC, err));
        OP("layernorm backward", op_layernorm_backward(c, dres, dlnw, dlnb, dln, inp, lnw, mean, rstd, 0, 0, err));
        return 0;
    }
    OP(name, op_linear_backward_dinp(c, dinp_id, dln, dout, W, 1.0f, 0, err));
    OP("layernorm backward", op_layernorm_backward(c, dres, dlnw, dlnb, dln, inp, lnw, mean, rstd, ln, lnb, err));
    OP(name, op_linear_backward_dw(c, dw_id, dW, dout, ln, 1.0f, err));
    if (db) OP("bias backward", op_bias_backward(c, db, dout, OC, err));
    return 0;
}

static int backward_layer(Cuda *c, int l, Err *err) {
    dptr residual = residual_in(c, l), ln1 = buf(c, BUF_LN1, l), ln2 = buf(c, BUF_LN2, l);
    dptr m1 = buf(c, BUF_LN1_MEAN, l), r1 = buf(c, BUF_LN1_RSTD, l), m2 = buf(c, BUF_LN2_MEAN, l), r2 = buf(c, BUF_LN2_RSTD, l);
    dptr res2 = buf(c, BUF_RESIDUAL2, l), fch = buf(c, BUF_FCH, l), fchg = buf(c, BUF_FCH_GELU, l);
    dptr dres = buf(c, BUF_DRESIDUAL, 0), dfch = buf(c, BUF_DFCH, 0), datty = buf(c, BUF_DATTY, 0);
    if (c->recompute >= 1) OP("gelu recompute", op_gelu_forward(c, fchg, fch, err));
    /* dfch = (dresidual @ fcprojw) * GELU'(fch): the DGELU epilogue, or (train.gelu) the matmul, then our kernel,
       which also sums the fc bias gradient */
    int gelu_kernel = gelu_backward_in_kernel(c->plan->gelu);
    OP(gelu_kernel ? "matmul bwd fcproj" : "matmul bwd fcproj+dgelu",
       op_linear_backward(c, MM_FCPROJ_DINP, MM_FCPROJ_DW, dfch, GW(P_FCPROJW, l), dres, fchg, PW(P_FCPROJW, l), 1.0f,
                          gelu_kernel ? 0 : fch, err));
    OP("bias backward", op_bias_backward(c, GW(P_FCPROJB, l), dres, c->C, err));
    if (gelu_kernel) OP("gelu backward", op_gelu_backward_bias(c, dfch, fch, GW(P_FCB, l), err));
    if (linear_layernorm_backward(c, "matmul bwd fc", MM_FC_DINP, MM_FC_DW, GW(P_FCW, l), gelu_kernel ? 0 : GW(P_FCB, l),
                                  dfch, PW(P_FCW, l), ln2, res2, PW(P_LN2W, l), PW(P_LN2B, l), GW(P_LN2W, l),
                                  GW(P_LN2B, l), m2, r2, err))
        return -1;
    OP("matmul bwd attproj", op_linear_backward(c, MM_ATTPROJ_DINP, MM_ATTPROJ_DW, datty, GW(P_ATTPROJW, l), dres,
                                                buf(c, BUF_ATTY, l), PW(P_ATTPROJW, l), 1.0f, 0, err));
    OP("bias backward", op_bias_backward(c, GW(P_ATTPROJB, l), dres, c->C, err));
    if (op_attention_backward(c, l, err)) return -1;
    return linear_layernorm_backward(c, "matmul bwd qkv", MM_QKV_DINP, MM_QKV_DW, GW(P_QKVW, l), GW(P_QKVB, l),
                                     buf(c, BUF_DQKV, 0), PW(P_QKVW, l), ln1, residual, PW(P_LN1W, l), PW(P_LN1B, l),
                                     GW(P_LN1W, l), GW(P_LN1B, l), m1, r1, err);
}

/* The backward from the final LayerNorm down, once BUF_DLN holds d(loss)/d(lnf) and the classifier's dwte is in. */
static int backward_trunk(Backend *be, Err *err) {
    Cuda *c = cuda_of(be);
    c->prof.steps++;
    c->lnf_valid = 0;
    dptr dres = buf(c, BUF_DRESIDUAL, 0), dln = buf(c, BUF_DLN, 0);
    if (cuda_check(cu.cuMemsetD8Async(dres, 0, (size_t)c->plan->step.B * c->plan->step.T * c->C * c->xs, c->s), "zeroing dresidual", err)) return -1;
    OP("layernorm backward", op_layernorm_backward(c, dres, GW(P_LNFW, 0), GW(P_LNFB, 0), dln, buf(c, BUF_RESIDUAL3, c->L - 1),
                                                   PW(P_LNFW, 0), buf(c, BUF_LNF_MEAN, 0), buf(c, BUF_LNF_RSTD, 0), 0, 0, err));
    for (int l = c->L - 1; l >= 0; l--)
        if (backward_layer(c, l, err) || (be->grad_ready && be->grad_ready(be->grad_ready_ctx, l, err))) return -1;
    OP("encoder backward", op_encoder_backward(c, err));
    if (be->grad_ready && be->grad_ready(be->grad_ready_ctx, GRAD_PART_REST, err)) return -1;
    return 0;
}

/* The forward kept no logits: each chunk's are made again, now with their gradient. */
int cu_backward(Backend *be, float grad_scale, Err *err) {
    Cuda *c = cuda_of(be);
    if (!c->have_targets) return err_set(err, "backward needs a forward with targets first");
    if (op_classifier(c, 1, classifier_alpha(c, grad_scale), err) || backward_trunk(be, err)) return -1;
    return cuda_device_sync(&c->dev, "backward", err);
}

/* A training micro-step: each chunk's logits once, their losses and gradient together; the losses are read when
   the backward is done, so the host waits once. */
int cu_forward_backward(Backend *be, const int32_t *inputs, const int32_t *targets, float grad_scale, float *loss, Err *err) {
    Cuda *c = cuda_of(be);
    profile_queue_start(&c->prof);
    if (forward_trunk(c, inputs, err) || op_classifier_targets(c, targets, err) || op_encoder_upload_buckets(c, inputs, err))
        return -1;
    c->have_targets = 1;
    if (op_classifier(c, 1, classifier_alpha(c, grad_scale), err) || backward_trunk(be, err)) return -1;
    profile_queue_queued(&c->prof);
    if (op_classifier_read_losses(c, loss, err)) return -1;
    profile_queue_done(&c->prof);
    return 0;
}
