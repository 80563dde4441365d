/* resume: the newest complete, valid model+state pair (see resume.h). */
#include "runtime/train/resume.h"
#include "common/bf16.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "runtime/ranks/ranks.h"
#include "runtime/train/rundir.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model file holds the state's weights as a save writes them (bf16-rounded for a bf16 model). */
int resume_model_matches(const char *model, const TrainState *s, int bf16, Err *err) {
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

/* Puts one rank's part (m, v, weights of its range) into the whole arrays. */
void resume_put_part(const TrainState *part, float *m, float *v, float *params) {
    size_t off = part->shard_offset, n = state_count(part);
    memcpy(m + off, part->m, n * sizeof(float));
    memcpy(v + off, part->v, n * sizeof(float));
    memcpy(params + off, part->params, n * sizeof(float));
}

/* Rank k's state shard agrees with rank 0's state s: same run, step, data position and scaler, rank k, and
   exactly rank k's ZeRO-1 shard. */
int resume_shard_fits(const char *path, const TrainState *sh, const TrainState *s, int k, Err *why) {
    size_t off, cnt;
    ranks_shard(s->num_params, s->ranks, k, &off, &cnt);
    if (sh->num_params != s->num_params || sh->ranks != s->ranks || sh->rank != k || sh->step != s->step || sh->epoch != s->epoch ||
        sh->shard_pos != s->shard_pos || sh->row_pos != s->row_pos || sh->seed != s->seed || sh->B != s->B ||
        sh->T != s->T || sh->zero_stage != s->zero_stage || sh->skipped != s->skipped || sh->n_shards != s->n_shards)
        return err_set(why, "%s: not rank %d's part of the checkpoint rank 0's state describes (another run, step or position)", path, k);
    if (sh->shard_offset != off || state_count(sh) != cnt)
        return err_set(why, "%s: holds parameters [%zu, +%zu), rank %d's shard is [%zu, +%zu)", path, sh->shard_offset,
                       state_count(sh), k, off, cnt);
    return 0;
}

int resume_marker(const char *dir, int step, Err *why) {
    char path[RUNDIR_PATH_MAX];
    rundir_done(dir, step, path);
    return file_exists(path) ? 0 : err_set(why, "%s is missing: the save of this step did not finish on every rank", path);
}

/* A several-rank checkpoint is complete when its marker is there (written after every other part). Under ZeRO-1
   the other ranks' shards are read too and s then holds the whole state (all num_params). */
static int gather_ranks(const ResumeWant *w, int step, TrainState *s, Err *why) {
    if (s->ranks == 1) return 0;
    char path[RUNDIR_PATH_MAX];
    if (resume_marker(w->dir, step, why)) return -1;
    if (state_count(s) == s->num_params) return 0;
    size_t n = s->num_params;
    float *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float)), *params = xmalloc(n * sizeof(float));
    int rc = resume_shard_fits("rank 0's state", s, s, 0, why);
    if (!rc) resume_put_part(s, m, v, params);
    for (int k = 1; k < s->ranks && !rc; k++) {
        TrainState sh;
        rundir_rank_state(w->dir, step, k, path);
        rc = state_load(path, &sh, why) || resume_shard_fits(path, &sh, s, k, why) ? -1 : 0;
        if (!rc) resume_put_part(&sh, m, v, params);
        state_free(&sh);
    }
    if (rc) { free(m); free(v); free(params); return -1; }
    free(s->m); free(s->v); free(s->params);
    s->m = m; s->v = v; s->params = params;
    s->shard_offset = 0;
    s->shard_count = n;
    return 0;
}

int resume_find(const ResumeWant *w, TrainState *s, char *model, char *state, Err *err) {
    int *steps, n = rundir_steps(w->dir, &steps), rc = -1;
    for (int i = 0; i < n && rc < 0; i++) {
        Err why;
        rundir_paths(w->dir, steps[i], model, state);
        if (state_load(state, s, &why) == 0) {
            if (state_check(state, s, &w->run, w->max_step, err)) { state_free(s); free(steps); return -1; }
            if (gather_ranks(w, steps[i], s, &why) == 0 && resume_model_matches(model, s, w->model_bf16, &why) == 0) { rc = 1; break; }
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
