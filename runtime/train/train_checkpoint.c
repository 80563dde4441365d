/* train_checkpoint: a run's checkpoints: the save of every rank's parts (with several ranks, the marker last), and
   the start from a resume state, checkpoint.init or fresh weights. See runtime/train/train.h and docs/training.md. */
#include "runtime/train/train_run.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "runtime/train/resume.h"
#include "runtime/train/state.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a state of this run records besides its arrays and position; resume compares a saved state to it. */
static TrainState run_state(const Run *r) {
    const RunSpec *c = r->run;
    return (TrainState){.ranks = c->train.num_gpus, .rank = 0, .shuffle = 1, .num_params = r->num_params,
                        .n_shards = r->train->n_files, .shape = r->plan->model, .B = c->train.batch_size,
                        .T = c->train.seq_len, .seed = (uint64_t)c->train.seed};
}

/* Every rank gets its part (all of it, or its ZeRO-1 shard) of the whole AdamW state. */
static int scatter_opt_state(Run *r, const float *m, const float *v, Err *err) {
    for (int k = 0; k < r->local; k++) {
        Backend *be = r->rk[k].be;
        if (be->write(be, BACKEND_ADAM_M, m + be->opt_offset, err) || be->write(be, BACKEND_ADAM_V, v + be->opt_offset, err))
            return -1;
    }
    return 0;
}

/* Every rank's backend gets the same parameters. */
static int set_all_params(Run *r, const float *params, Err *err) {
    for (int k = 0; k < r->local; k++)
        if (r->rk[k].be->write(r->rk[k].be, BACKEND_PARAMS, params, err)) return -1;
    return 0;
}

int run_agree(Run *r, int flag, int *any, Err *err) {
    double v[r->local], *p[r->local];
    for (int k = 0; k < r->local; k++) { v[k] = flag; p[k] = &v[k]; }
    if (r->comm->all_reduce_sum_f64(r->comm, p, err)) return -1;
    *any = v[0] > 0;
    return 0;
}

/* A several-rank save's parts: the state (rank 0's, whole under ZeRO-0) or every rank's state shard (ZeRO-1), the
   model (rank 0), then the marker done_<step>.bin, which resume needs. Each process removes its own parts of an
   older save of this step (rank 0 the marker first) before any rank writes, and every part of a save that failed
   on any rank, so resume never takes a save that did not finish. */
static void remove_save(Run *r, int step) {
    char path[RUNDIR_PATH_MAX], model[RUNDIR_PATH_MAX];
    if (r->lead) { rundir_done(r->run->checkpoint.dir, step, path); remove(path); }
    for (int k = 0; k < r->local; k++) { rundir_rank_state(r->run->checkpoint.dir, step, r->first + k, path); remove(path); }
    rundir_paths(r->run->checkpoint.dir, step, model, path);
    if (r->lead) remove(model);
}

/* This process's state files: rank 0's whole state (1 rank, ZeRO-0), or under ZeRO-1 each of its ranks' shard of
   m, v and the weights. s holds the step, position and scaler; its arrays are set here. mine (num_params) gets the
   first of this process's ranks' parameters as read (rank 0's where this process drives it), and under ZeRO-1 the
   master weights of the shards of the other ranks it drives (the emulation: all of them). */
static int save_states(Run *r, int step, TrainState *s, float *mine, Err *err) {
    int zero1 = r->world > 1 && r->run->train.zero_stage == 1, rc = 0;
    float *other = NULL;
    for (int k = 0; k < r->local && !rc; k++) {
        int rank = r->first + k;
        if (!zero1 && rank != 0) continue;
        if (k > 0 && !other) other = xmalloc(r->num_params * sizeof(float));
        float *params = k == 0 ? mine : other;
        Backend *be = r->rk[k].be;
        char path[RUNDIR_PATH_MAX];
        rundir_rank_state(r->run->checkpoint.dir, step, rank, path);
        s->rank = rank;
        s->shard_offset = r->world > 1 ? be->opt_offset : 0;
        s->shard_count = r->world > 1 ? be->opt_count : 0;
        s->m = xmalloc(be->opt_count * sizeof(float));
        s->v = xmalloc(be->opt_count * sizeof(float));
        s->params = params + be->opt_offset;
        rc = be->read(be, BACKEND_PARAMS, 0, params, err) || be->read(be, BACKEND_ADAM_M, 0, s->m, err) ||
             be->read(be, BACKEND_ADAM_V, 0, s->v, err);
        if (!rc) rc = state_save(path, s, err);
        if (!rc && k > 0) memcpy(mine + be->opt_offset, s->params, be->opt_count * sizeof(float));
        free(s->m); free(s->v);
        s->m = s->v = s->params = NULL;
    }
    free(other);
    return rc ? -1 : 0;
}

/* Under ZeRO-1, ranks in other processes send rank 0 their shards' master weights over the comm (no process reads
   another's files: each rank's checkpoint.dir may be its own node's). Every process calls it, with its mine. */
static int share_master_weights(Run *r, float *mine, Err *err) {
    if (r->local == r->world) return 0;   /* every rank is in this process: save_states put their shards in */
    size_t (*parts)[2] = xmalloc((size_t)r->world * sizeof *parts);
    for (int q = 0; q < r->world; q++) ranks_shard(r->num_params, r->world, q, &parts[q][0], &parts[q][1]);
    int rc = r->comm->share(r->comm, (void *const[]){mine}, r->num_params, (const size_t (*)[2])parts, err);
    free(parts);
    return rc;
}

static int write_done(Run *r, int step, Err *err) {
    char path[RUNDIR_PATH_MAX];
    rundir_done(r->run->checkpoint.dir, step, path);
    char text[128];
    int n = snprintf(text, sizeof text, "gpt2gen checkpoint %d: %d ranks, ZeRO-%d, every part written\n", step,
                     r->world, r->run->train.zero_stage);
    return write_file_atomic(path, text, (size_t)n, err);
}

/* Saves the checkpoint of step: the state(s), then the model, each written atomically, then with several ranks,
   once every rank has written its parts, the marker. resume_find takes only pairs whose files are there and agree
   (and, with several ranks, whose marker is there), and a save that fails removes what it wrote, so a failed or
   killed save leaves the previous complete checkpoint the newest. Every rank calls this at the same step. */
int run_save_checkpoint(Run *r, int step, Err *err) {
    const RunSpec *c = r->run;
    char model[RUNDIR_PATH_MAX], state[RUNDIR_PATH_MAX];
    rundir_paths(c->checkpoint.dir, step, model, state);
    TrainState s = run_state(r);
    s.step = step; s.epoch = r->train->epoch; s.row_pos = r->train->row_pos; s.shard_pos = r->train->shard_pos;
    s.sample_rng = r->sample_rng; s.shard_order = r->train->shard_order;
    s.loss_scale = r->scaler.scale; s.loss_scale_clean = r->scaler.clean; s.skipped = r->scaler.skipped;
    s.zero_stage = r->world > 1 ? c->train.zero_stage : 0;
    int several = r->world > 1, any = 0, rc = 0;
    if (several) {
        remove_save(r, step);
        if (run_agree(r, 0, &any, err)) return -1;
    }
    float *params0 = xmalloc(r->num_params * sizeof(float));
    rc = save_states(r, step, &s, params0, err);
    Err e;
    if (several) {   /* every rank's state part is written (or one failed, and all know it) */
        if (run_agree(r, rc != 0, &any, rc ? &e : err)) { free(params0); return -1; }
        if (any && !rc) rc = err_set(err, "step %d: another rank could not write its part of the checkpoint", step);
    }
    /* Under ZeRO-1 rank 0 holds master weights for its shard only (with 16-bit weights, its copy of the rest is
       their stochastic rounding); the other parts of the model file are the other ranks' master weights, the
       ones their state parts hold, so that the model file is the master weights (rounded to nearest in a 16-bit
       file), all of it, as resume checks. In fp32 those parts equal rank 0's copy; they are sent all the same,
       one path for all. (rc is every rank's here: the agreement above.) */
    if (!rc && several && c->train.zero_stage == 1) rc = share_master_weights(r, params0, err);
    if (!rc && r->lead) rc = checkpoint_save(model, &s.shape, params0, r->plan->step.precision != PREC_FP32, err);
    free(params0);
    if (several) {
        int failed = rc != 0;
        if (run_agree(r, failed, &any, failed ? &e : err)) return -1;
        if (any && !rc) rc = err_set(err, "step %d: rank 0 could not write the model file", step);
        if (!rc && r->lead) rc = write_done(r, step, err);
        if (rc) remove_save(r, step);
    } else if (rc) remove(state);
    if (rc) return -1;
    rundir_sync(&r->dir);
    if (!r->quiet) printf("saved %s and %s%s\n", model, state, r->world > 1 && c->train.zero_stage == 1 ? " (and the other ranks' state shards)" : "");
    metrics_event(&r->metrics, "checkpoint", "step", json_integer(step), "model", metrics_text(model, strlen(model)), NULL);
    return 0;
}

/* The loss scaler as the state left it. A version 2 state records no scale: fp32 and bf16 runs lose nothing (they
   never scale or skip); an fp16 run starts again from train.loss_scale, and says so. */
static void resume_scaler(LossScaler *ls, const TrainState *s, const char *state) {
    ls->skipped = s->skipped;
    if (!ls->enabled) return;
    if (s->loss_scale == 0) { printf("note: %s records no loss scale (version 2): starting from train.loss_scale = %g\n", state, ls->scale); return; }
    ls->scale = s->loss_scale;
    ls->clean = s->loss_scale_clean;
}

/* Continues from the newest valid pair (resume_find): 1 when resumed (*step set), 0 when there is none. */
static int resume_from(Run *r, int *step, Err *err) {
    const RunSpec *c = r->run;
    ResumeWant w = {c->checkpoint.dir, run_state(r), c->train.steps, r->plan->step.precision != PREC_FP32};
    TrainState s;
    char model[RUNDIR_PATH_MAX], state[RUNDIR_PATH_MAX];
    /* ranks in other processes may have folders of their own: each reads its own, and they agree over the comm */
    int found = r->local < r->world ? resume_find_ranks(&w, r->comm, &s, model, state, err) : resume_find(&w, &s, model, state, err);
    int rc = 0;
    if (found <= 0) return found;
    Err e;
    for (int k = 0; k < r->local && !rc; k++)
        if (dataloader_seek(&r->rk[k].train, s.epoch, s.shard_pos, s.row_pos, &e)) rc = err_set(err, "%s: %s", state, e.msg);
    for (int i = 0; i < s.n_shards && !rc; i++)
        if (s.shard_order[i] != r->train->shard_order[i]) rc = err_set(err, "%s: its shard order is not this run's", state);
    if (!rc) rc = set_all_params(r, s.params, err);
    if (!rc) rc = scatter_opt_state(r, s.m, s.v, err);
    if (!rc) { r->sample_rng = s.sample_rng; *step = s.step; printf("resuming from %s (step %d)\n", state, s.step); }
    if (!rc) resume_scaler(&r->scaler, &s, state);
    state_free(&s);
    return rc ? -1 : 1;
}

/* Parameters at the start: a resume state, else checkpoint.init, else fresh init. Returns the first step. */
int run_initial_state(Run *r, Err *err) {
    const RunSpec *c = r->run;
    int step = 0, found = c->checkpoint.resume ? resume_from(r, &step, err) : 0;
    if (found) return found < 0 ? -1 : step;
    if (c->checkpoint.resume) printf("resume: no checkpoint in %s yet; starting fresh\n", c->checkpoint.dir);
    GPT2Shape shape = r->plan->model;
    float *params = xmalloc(r->num_params * sizeof(float));
    int rc = 0;
    if (c->checkpoint.init[0]) {
        rc = checkpoint_load(c->checkpoint.init, &shape, params, err);
        if (!rc) printf("loaded weights from %s\n", c->checkpoint.init);
    } else gpt2_init_params(&shape, params, (unsigned long)c->train.seed);
    if (!rc) rc = set_all_params(r, params, err);
    free(params);
    return rc ? -1 : 0;
}
