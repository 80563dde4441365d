/* classifier: the losses and d(mean loss)/d(logits) in one pass over the logits (templates/classifier.cu);
   the dlogits overwrite the logits (in units of dlogits_unit, ops.h), and the backward scales them by
   grad_scale (as cuBLASLt's alpha). */
#include "runtime/cuda/ops.h"

int op_classifier(Cuda *c, const int32_t *targets, float *loss, Err *err) {
    int BT = c->plan->step.B * c->plan->step.T;
    for (int i = 0; i < BT; i++)
        if (targets[i] < 0 || targets[i] >= c->V)
            return err_set(err, "target token %d at position %d is outside the vocabulary (0..%d)", targets[i], i, c->V - 1);
    dptr losses = buf(c, BUF_LOSSES, 0);
    if (cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_TARGETS, 0), targets, (size_t)BT * 4, c->s), "copying targets to the GPU", err) ||
        launch_classifier_forward(&c->ks, c->s, losses, buf(c, BUF_LOGITS, 0), buf(c, BUF_TARGETS, 0), dlogits_unit(c), 1, err) ||
        cuda_check(cu.cuMemcpyDtoHAsync(c->h_losses, losses, (size_t)BT * 4, c->s), "reading the losses", err) ||
        cuda_device_sync(&c->dev, "forward (the losses)", err))
        return -1;
    double s = 0;
    for (int i = 0; i < BT; i++) s += c->h_losses[i];
    if (loss) *loss = (float)(s / BT);
    return 0;
}
