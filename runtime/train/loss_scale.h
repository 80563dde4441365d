/* loss_scale: dynamic loss scaling for fp16 training, the one implementation both backends go through (the
 * training loop, runtime/train/train.c, drives it). fp16 keeps 5 exponent bits, so small gradients would flush to
 * zero: the loss gradient is multiplied by the scale S before the backward, and the gradients are divided by S
 * again in the gradient norm, the clipping and the AdamW update. S is a power of two, so scaling and unscaling
 * are exact.
 *
 * After each step's gradient norm (of the scaled gradients):
 *   - not finite (an overflow somewhere in the backward): the step is skipped (no AdamW update, no change to m,
 *     v or the weights), S is halved and the clean count restarts;
 *   - finite: the step is applied; after `interval` consecutive clean steps S doubles (at most LOSS_SCALE_MAX)
 *     and the count restarts.
 * A non-finite norm at S = 1, or with the scaler off (fp32, bf16: S stays 1 and no step is ever skipped), is
 * fatal: scaling down cannot help, the run stops as it always did.
 *
 * What a skipped step means: it still counts as a step (its micro-batches are consumed, the step counter, the
 * learning-rate schedule, checkpoint.every and eval follow the step number as if it had been applied), but
 * AdamW's bias correction counts applied updates only: the update of step s (1-based) uses t = s - skipped.
 * The scale, the clean count and the skipped count are part of the resume state (runtime/train/state.h). */
#ifndef GPT2GEN_LOSS_SCALE_H
#define GPT2GEN_LOSS_SCALE_H
#include "common/err.h"
#include "gen/spec.h"   /* LOSS_SCALE_MAX, config_loss_scale_valid */

typedef struct {
    int enabled;       /* precision fp16 */
    float scale;       /* S: what the loss gradient is multiplied by; 1 when disabled */
    int interval;      /* clean steps before S doubles */
    int clean;         /* consecutive clean steps since S last changed */
    int skipped;       /* steps skipped so far in the run */
} LossScaler;

typedef enum { LOSS_SCALE_APPLY, LOSS_SCALE_SKIP, LOSS_SCALE_FATAL } LossScaleVerdict;

void loss_scale_init(LossScaler *s, int enabled, double initial, int interval);
/* The verdict on a step whose scaled gradients have global norm scaled_norm, and S updated for the next step
   (read s->scale before calling for the scale this step used). FATAL leaves the scaler as it was. */
LossScaleVerdict loss_scale_after(LossScaler *s, float scaled_norm);

/* Test hook: GPT2GEN_TEST_OVERFLOW="3,7" makes the backward of steps 3 and 7 (1-based, as the log numbers
   them) overflow: their first micro-batch's loss gradient is multiplied by infinity, so the gradients hold
   inf/NaN on any backend. loss_scale_hook_check validates the variable's text (NULL or empty: no hook);
   loss_scale_hook_hits says whether step (1-based) is listed. */
int loss_scale_hook_check(const char *spec, Err *err);
int loss_scale_hook_hits(const char *spec, int step);
#endif
