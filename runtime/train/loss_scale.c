/* loss_scale: dynamic loss scaling (see loss_scale.h). */
#include "runtime/train/loss_scale.h"
#include <math.h>
#include <stdlib.h>

void loss_scale_init(LossScaler *s, int enabled, double initial, int interval) {
    s->enabled = enabled;
    s->scale = enabled ? (float)initial : 1.0f;
    s->interval = interval > 0 ? interval : 1;
    s->clean = 0;
    s->skipped = 0;
}

LossScaleVerdict loss_scale_after(LossScaler *s, float scaled_norm) {
    if (!isfinite(scaled_norm)) {
        if (!s->enabled || s->scale <= 1.0f) return LOSS_SCALE_FATAL;
        s->scale *= 0.5f;
        s->clean = 0;
        s->skipped++;
        return LOSS_SCALE_SKIP;
    }
    if (s->enabled && ++s->clean >= s->interval) {
        if (s->scale < LOSS_SCALE_MAX) s->scale *= 2.0f;
        s->clean = 0;
    }
    return LOSS_SCALE_APPLY;
}

/* ---------------------------------------------------------------- the test hook */

/* Walks the comma-separated step numbers of spec, setting *hit when step is one of them; -1 at a bad item. */
static int hook_walk(const char *spec, int step, int *hit) {
    const char *p = spec;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 2147483647L || (*end && *end != ',')) return -1;
        if (v == step) *hit = 1;
        p = *end ? end + 1 : end;
        if (*end && !*p) return -1;   /* a trailing comma */
    }
    return 0;
}

int loss_scale_hook_check(const char *spec, Err *err) {
    int hit = 0;
    if (!spec || !*spec) return 0;
    if (hook_walk(spec, 0, &hit))
        return err_set(err, "GPT2GEN_TEST_OVERFLOW: \"%s\": expected step numbers >= 1 separated by commas, like \"3,7\"", spec);
    return 0;
}

int loss_scale_hook_hits(const char *spec, int step) {
    int hit = 0;
    if (!spec || !*spec) return 0;
    return hook_walk(spec, step, &hit) == 0 && hit;
}
