/* resume: the newest complete, valid model+state pair (see resume.h). */
#include "runtime/resume.h"
#include "common/bf16.h"
#include "runtime/checkpoint.h"
#include "runtime/rundir.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model file holds the state's weights as a save writes them (bf16-rounded for a bf16 model). */
static int model_matches(const char *model, const TrainState *s, int bf16, Err *err) {
    float *p = xmalloc(s->num_params * sizeof(float));
    int rc = checkpoint_load(model, &s->shape, p, err);
    for (size_t i = 0; i < s->num_params && !rc; i++) {
        float want = bf16 ? bf16_to_f32(bf16_from_f32(s->params[i])) : s->params[i];
        if (memcmp(&want, &p[i], sizeof want))
            rc = err_set(err, "%s: its weights are not those of its resume state (parameter %zu differs)", model, i);
    }
    free(p);
    return rc;
}

int resume_find(const ResumeWant *w, TrainState *s, char *model, char *state, Err *err) {
    int *steps, n = rundir_steps(w->dir, &steps), rc = -1;
    for (int i = 0; i < n && rc < 0; i++) {
        Err why;
        rundir_paths(w->dir, steps[i], model, state);
        if (state_load(state, s, &why) == 0) {
            if (state_check(state, s, &w->run, w->max_step, err)) { state_free(s); free(steps); return -1; }
            if (model_matches(model, s, w->model_bf16, &why) == 0) { rc = 1; break; }
            state_free(s);
        }
        printf("resume: skipped step %d: %s\n", steps[i], why.msg);
    }
    free(steps);
    if (n == 0) return 0;
    if (rc < 0) return err_set(err, "%s: none of its %d checkpoint steps has a complete, valid model+state pair (the reasons are above); "
                               "start over with another checkpoint.dir", w->dir, n);
    return 1;
}
