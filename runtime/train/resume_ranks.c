/* resume_ranks: the resume of ranks in several processes, each reading only its own checkpoint.dir, agreeing over
   their comm (see resume.h, resume_find_ranks). */
#include "runtime/train/resume.h"
#include "common/files.h"
#include "runtime/ranks/ranks.h"
#include "runtime/train/rundir.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MSG_BYTES = 2048 };
enum { PROPOSE, NO_MORE, FATAL };   /* rank 0's word */
enum { HAVE, LACK, BAD };           /* a rank's answer */

/* Rank 0's word to every rank: a step to take, with its state's header; no step left (steps: how many rank 0's
   folder holds); or an error that ends the resume on every rank (msg) */
typedef struct { int32_t what, step, steps; int32_t header[STATE_HEADER_INTS]; char msg[MSG_BYTES]; } Proposal;
/* each rank's answer: it has its part, or why not */
typedef struct { int32_t what; char msg[MSG_BYTES]; } Answer;
_Static_assert(sizeof(Proposal) % 4 == 0 && sizeof(Answer) % 4 == 0, "shared as 4-byte elements");

typedef enum { FROM_RANK0, PER_RANK, SHARDS } Split;

/* buf's n 4-byte elements, from rank 0 to all (FROM_RANK0), or from each rank r its n/world at r*n/world
   (PER_RANK), or its ZeRO-1 shard (SHARDS) */
static int share(Comm *c, void *buf, size_t n, Split how, Err *err) {
    size_t (*parts)[2] = xcalloc((size_t)c->world, sizeof *parts);
    for (int q = 0; q < c->world; q++) {
        if (how == SHARDS) ranks_shard(n, c->world, q, &parts[q][0], &parts[q][1]);
        else if (how == PER_RANK) { parts[q][1] = n / (size_t)c->world; parts[q][0] = (size_t)q * parts[q][1]; }
        else if (q == 0) parts[q][1] = n;
    }
    int rc = c->share(c, (void *const[]){buf}, n, (const size_t (*)[2])parts, err);
    free(parts);
    return rc;
}

/* Rank 0: its next step (from *i on) whose state loads, fits the run, has the marker and is rank 0's part, into
   s; the steps passed over are printed with the reason, as resume_find prints them. */
static void propose(const ResumeWant *w, const int *steps, int n, int *i, TrainState *s, Proposal *p) {
    for (; *i < n; ++*i) {
        char model[RUNDIR_PATH_MAX], state[RUNDIR_PATH_MAX];
        Err why, e;
        rundir_paths(w->dir, steps[*i], model, state);
        if (state_load(state, s, &why) == 0) {
            if (state_check(state, s, &w->run, w->max_step, &e)) {
                state_free(s);
                p->what = FATAL;
                snprintf(p->msg, sizeof p->msg, "%.2040s", e.msg);
                return;
            }
            if (!resume_marker(w->dir, steps[*i], &why) &&
                (state_count(s) == s->num_params || !resume_shard_fits("rank 0's state", s, s, 0, &why))) {
                p->what = PROPOSE;
                p->step = steps[*i];
                state_header_put(s, p->header);
                return;
            }
            state_free(s);
        }
        printf("resume: skipped step %d: %s\n", steps[*i], why.msg);
    }
    p->what = NO_MORE;
}

/* Rank r (not 0): its part of step, of the checkpoint whose rank-0 state hs is, from its own folder: a ZeRO-1 shard
   that fits, into part; nothing to read for a ZeRO-0 checkpoint (rank 0's state is all of it). */
static void answer(const ResumeWant *w, int rank, const TrainState *hs, int step, TrainState *part, Answer *a) {
    memset(part, 0, sizeof *part);
    a->what = HAVE;
    if (state_count(hs) == hs->num_params) return;
    char path[RUNDIR_PATH_MAX];
    rundir_rank_state(w->dir, step, rank, path);
    Err why;
    if (!file_exists(path)) {
        a->what = LACK;
        snprintf(a->msg, sizeof a->msg, "rank %d has no part of step %d in %s (%s)", rank, step, w->dir, strrchr(path, '/') + 1);
        return;
    }
    if (state_load(path, part, &why) == 0 && resume_shard_fits(path, part, hs, rank, &why) == 0) return;
    state_free(part);
    a->what = BAD;
    snprintf(a->msg, sizeof a->msg, "rank %d: %.2000s", rank, why.msg);
}

/* Every rank gets the whole state: rank 0's header (hs) and shard order, and m, v and the weights of every rank's
   part (rank 0's in s, the others' in part). */
static int take(Comm *c, const TrainState *hs, TrainState *s, TrainState *part, Err *err) {
    size_t n = hs->num_params;
    float *m = xcalloc(n, sizeof *m), *v = xcalloc(n, sizeof *v), *params = xcalloc(n, sizeof *params);
    int32_t *order = xcalloc((size_t)hs->n_shards, sizeof *order);
    const TrainState *mine = c->first_rank == 0 ? s : part;
    if (mine->m) resume_put_part(mine, m, v, params);
    if (c->first_rank == 0) memcpy(order, s->shard_order, (size_t)hs->n_shards * sizeof *order);
    Split how = state_count(hs) == n ? FROM_RANK0 : SHARDS;
    int rc = share(c, m, n, how, err) || share(c, v, n, how, err) || share(c, params, n, how, err) ||
             share(c, order, (size_t)hs->n_shards, FROM_RANK0, err) ? -1 : 0;
    state_free(part);
    state_free(s);
    *s = *hs;
    s->m = m; s->v = v; s->params = params; s->shard_order = order;
    s->shard_offset = 0;
    s->shard_count = n;
    if (rc) state_free(s);
    return rc;
}

/* The reasons of the ranks that lack their part (or whose part is not of this checkpoint), joined by "; " and cut
   to len - 1 bytes; "" if none. */
static void reasons(const Answer *all, int world, char *out, size_t len) {
    size_t k = 0;
    for (int q = 1; q < world; q++) {
        if (all[q].what == HAVE) continue;
        for (const char *t = k ? "; " : ""; *t && k + 1 < len; t++) out[k++] = *t;
        for (size_t j = 0; j < MSG_BYTES && all[q].msg[j] && k + 1 < len; j++) out[k++] = all[q].msg[j];
    }
    out[k] = 0;
}

/* One step rank 0 proposed: 1 taken (s whole), 0 passed over for rank 0's model file, 2 for the other ranks' parts
   (why: the reason), -1 failed (err). */
static int try_step(const ResumeWant *w, Comm *c, const Proposal *p, TrainState *s, char *model, char *state,
                    char *why, Err *err) {
    int rank = c->first_rank;
    TrainState hs, part;
    memset(&hs, 0, sizeof hs);
    Err herr = {{0}};
    int bad = state_header_get(p->header, &hs, "rank 0's state", &herr);   /* rank 0 read it whole: never, but said */
    Answer *all = xcalloc((size_t)c->world, sizeof *all), verdict = {HAVE, ""};
    memset(&part, 0, sizeof part);
    if (bad) { all[rank].what = BAD; snprintf(all[rank].msg, sizeof all[rank].msg, "rank %d: %.2000s", rank, herr.msg); }
    else if (rank != 0) answer(w, rank, &hs, p->step, &part, &all[rank]);
    int rc = share(c, all, (size_t)c->world * (sizeof *all / 4), PER_RANK, err);
    if (!rc) reasons(all, c->world, why, MSG_BYTES);
    free(all);
    if (rc || why[0]) { state_free(&part); state_free(s); return rc ? -1 : 2; }
    if (take(c, &hs, s, &part, err)) return -1;
    rundir_paths(w->dir, p->step, model, state);
    Err e;
    if (rank == 0 && resume_model_matches(model, s, w->model_bf16, &e)) {
        verdict.what = BAD;
        snprintf(verdict.msg, sizeof verdict.msg, "%.2000s", e.msg);
    }
    if (share(c, &verdict, sizeof verdict / 4, FROM_RANK0, err)) { state_free(s); return -1; }
    snprintf(why, MSG_BYTES, "%s", verdict.msg);
    if (verdict.what != HAVE) { state_free(s); return 0; }
    if (rank != 0) snprintf(state, RUNDIR_PATH_MAX, "rank 0's state of step %d", p->step);
    return 1;
}

/* Rank 0's last word when none of its n steps qualified: the reasons of the newest step proposed (first), if the
   other ranks were why. */
static void none_left(const ResumeWant *w, int n, const char *first, Proposal *p) {
    if (first[0])
        snprintf(p->msg, sizeof p->msg, "%.1000s: resume takes a step only where every rank has its part, and none of the "
                 "%d checkpoint steps in %.500s does (rank 0 printed each one's reasons); start each rank with the checkpoint.dir "
                 "it saved into, or start over with another checkpoint.dir", first, n, w->dir);
    else
        snprintf(p->msg, sizeof p->msg, "%.1000s: none of its %d checkpoint steps has a complete, valid model+state pair "
                 "(the reasons are above); start over with another checkpoint.dir", w->dir, n);
}

int resume_find_ranks(const ResumeWant *w, Comm *c, TrainState *s, char *model, char *state, Err *err) {
    int *steps = NULL, n = c->first_rank == 0 ? rundir_steps(w->dir, &steps) : 0, i = 0, rc = 0;
    Proposal *p = xmalloc(sizeof *p);
    char first[MSG_BYTES] = "", why[MSG_BYTES];
    for (;; i++) {
        memset(p, 0, sizeof *p);
        memset(s, 0, sizeof *s);
        if (c->first_rank == 0) {
            propose(w, steps, n, &i, s, p);
            p->steps = n;
            if (p->what == NO_MORE && n > 0) none_left(w, n, first, p);
        }
        if (share(c, p, sizeof *p / 4, FROM_RANK0, err)) { state_free(s); rc = -1; break; }
        if (p->what != PROPOSE) { rc = p->what == NO_MORE && p->steps == 0 ? 0 : err_set(err, "%s", p->msg); break; }
        why[0] = 0;
        int got = try_step(w, c, p, s, model, state, why, err);
        if (got == 1 || got < 0) { rc = got; break; }
        if (c->first_rank == 0) printf("resume: skipped step %d: %s\n", p->step, why);
        if (got == 2 && !first[0]) snprintf(first, sizeof first, "%s", why);
    }
    free(steps);
    free(p);
    return rc;
}
