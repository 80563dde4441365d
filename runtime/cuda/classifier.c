/* classifier: the logits, the losses and their gradient a chunk of rows at a time (Plan.classifier_rows, the
   classifier family's CHUNK: gen/kernels.c), so that no B*T x Vp buffer is kept. Per chunk: the logits matmul into
   BUF_LOGITS, then one pass over them for the losses and, for a backward, the dlogits in their place (in units of
   dlogits_unit, ops.h; templates/classifier.cu), then both backward matmuls: the chunk's rows of dlnf (BUF_DLN) and
   dwte (or an untied head's dlmhead) += dlogits^T lnf, scaled by alpha. */
#include "runtime/cuda/ops.h"

static size_t chunk_rows(const Cuda *c) { return (size_t)c->plan->classifier_rows; }
static int n_chunks(const Cuda *c) { return (int)((size_t)c->plan->step.B * c->plan->step.T / chunk_rows(c)); }
/* row r0's place in a buffer of rows of `width` floatX values */
static dptr rows_at(const Cuda *c, BufferId id, size_t r0, size_t width) { return buf(c, id, 0) + r0 * width * c->xs; }

/* chunk k's logits into BUF_LOGITS, the head wte or lmhead (untied); soft-capped where the model caps them and cap
   is set, else raw for the classifier kernel, which caps them itself (templates/classifier.cu) */
static int chunk_logits(Cuda *c, int k, int cap, Err *err) {
    c->logits_chunk = -1;
    OP("matmul classifier", op_linear(c, MM_CLASSIFIER, buf(c, BUF_LOGITS, 0), rows_at(c, BUF_LNF, k * chunk_rows(c), c->C),
                                      PW(cu_head(c), 0), 0, 0, err));
    if (cap && c->plan->model.logit_softcap > 0)
        OP("logit softcap", launch_softcap_forward(&c->ks, c->s, buf(c, BUF_LOGITS, 0), (long long)chunk_rows(c) * c->Vp, err));
    c->logits_chunk = cap ? k : -1;
    return 0;
}

/* chunk k's losses and, with grad, its dlogits in place of its raw logits; without, the buffer then holds the chunk's
   logits (capped by the kernel where the model caps them) */
static int chunk_loss(Cuda *c, int k, int grad, Err *err) {
    size_t R = chunk_rows(c);
    dptr logits = buf(c, BUF_LOGITS, 0), losses = buf(c, BUF_LOSSES, 0) + k * R * 4, targets = buf(c, BUF_TARGETS, 0) + k * R * 4;
    OP("classifier (loss+dlogits)", launch_classifier_forward(&c->ks, c->s, losses, logits, targets, dlogits_unit(c), grad, err));
    c->logits_chunk = grad ? -1 : k;
    return 0;
}

int op_classifier_logits(Cuda *c, int k, Err *err) {
    if (c->logits_chunk == k) return 0;
    if (!c->lnf_valid) return err_set(err, "no logits to read: run a forward first (a backward since has used them)");
    return chunk_logits(c, k, 1, err);
}

int op_classifier_targets(Cuda *c, const int32_t *targets, Err *err) {
    int BT = c->plan->step.B * c->plan->step.T;
    for (int i = 0; i < BT; i++)
        if (targets[i] < 0 || targets[i] >= c->V)
            return err_set(err, "target token %d at position %d is outside the vocabulary (0..%d)", targets[i], i, c->V - 1);
    return cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_TARGETS, 0), targets, (size_t)BT * 4, c->s), "copying targets to the GPU", err);
}

int op_classifier(Cuda *c, int grad, float alpha, Err *err) {
    size_t R = chunk_rows(c);
    dptr logits = buf(c, BUF_LOGITS, 0);
    for (int k = 0; k < n_chunks(c); k++) {
        if (chunk_logits(c, k, 0, err) || chunk_loss(c, k, grad, err)) return -1;
        if (!grad) continue;   /* the buffer keeps chunk k's logits */
        OP("matmul bwd classifier", op_linear_backward(c, MM_CLASSIFIER_DINP, MM_CLASSIFIER_DW, rows_at(c, BUF_DLN, k * R, c->C),
                                                       GW(cu_head(c), 0), logits, rows_at(c, BUF_LNF, k * R, c->C), PW(cu_head(c), 0),
                                                       alpha, 0, err));
    }
    return 0;
}

float classifier_alpha(const Cuda *c, float grad_scale) {
    return c->prec == PREC_FP16 ? grad_scale / (DLOGITS_UNIT_FP16 * (float)(c->plan->step.B * c->plan->step.T)) : grad_scale;
}

int op_classifier_read_losses(Cuda *c, float *loss, Err *err) {
    int BT = c->plan->step.B * c->plan->step.T;
    if (cuda_check(cu.cuMemcpyDtoHAsync(c->h_losses, buf(c, BUF_LOSSES, 0), (size_t)BT * 4, c->s), "reading the losses", err) ||
        cuda_device_sync(&c->dev, "the losses", err))
        return -1;
    double s = 0;
    for (int i = 0; i < BT; i++) s += c->h_losses[i];
    if (loss) *loss = (float)(s / BT);
    c->losses_valid = 1;
    return 0;
}
