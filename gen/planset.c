/* planset: every plan of a command, made in one place (planset.h). */
#include "gen/planset.h"
#include "gen/config.h"
#include <stdlib.h>
#include <string.h>

static void buckets(PlanSet *ps, int maxT) {
    int T = 64;
    ps->n_buckets = 0;
    for (;;) {
        ps->bucket_T[ps->n_buckets++] = T < maxT ? T : maxT;
        if (T >= maxT || ps->n_buckets == PLANSET_MAX_BUCKETS) break;
        T *= 2;
    }
}

int planset_bucket(const PlanSet *ps, int n) {
    for (int i = 0; i < ps->n_buckets; i++)
        if (ps->bucket_T[i] >= n) return i;
    return ps->n_buckets - 1;
}

/* The database's choices for plan (the first plan's report in ps->applied, its notes on msgs); where it names an
   attention path, the path is decided again from the facts (tune_db_apply) */
static void tune(PlanSet *ps, Plan *plan, const PlanInputs *in, FILE *msgs, int first) {
    TuneApplied quiet;
    if (in->db)
        tune_db_apply(in->db, in->env, plan, in->cublaslt, in->facts, first ? &ps->applied : &quiet, first ? msgs : NULL);
}

static Plan *make(PlanSet *ps, const Config *cfg, const char *name, const StepShape *s, const PlanInputs *in, FILE *msgs,
                  Err *err) {
    Plan *p = xcalloc(1, sizeof *p);
    int first = !ps->train && !ps->decode && !ps->eval[0];
    if (plan_make(p, cfg, name, s, in->arch, in->facts, err)) {
        free(p);
        return NULL;
    }
    tune(ps, p, in, msgs, first);
    return p;
}

/* the decode plan, and for its rows the prefill and the uncached forward of every bucket where prompts are asked for */
static int make_sampling(PlanSet *ps, const Config *cfg, const PlanRequest *req, const PlanInputs *in, FILE *msgs,
                         Err *err) {
    int shared = req->train;   /* on the training plan's weights, else the decode plan holds them */
    StepShape s = step_decode(cfg, req->decode_rows, shared);
    if (!(ps->decode = make(ps, cfg, "decode", &s, in, msgs, err))) return -1;
    for (int i = 0; req->prompts && i < ps->n_buckets; i++) {
        s = step_prefill(cfg, req->decode_rows, ps->bucket_T[i], 1);
        if (!(ps->prefill[i] = make(ps, cfg, "prefill", &s, in, msgs, err))) return -1;
        s = step_forward(cfg, req->decode_rows, ps->bucket_T[i], 1);
        if (!(ps->forward[i] = make(ps, cfg, "forward", &s, in, msgs, err))) return -1;
    }
    return 0;
}

int planset_make(PlanSet *ps, const Config *cfg, const PlanRequest *req, const PlanInputs *in, FILE *msgs, Err *err) {
    memset(ps, 0, sizeof *ps);
    buckets(ps, cfg->model.max_seq_len);
    if (req->train) {
        StepShape s = step_train(cfg);
        if (!(ps->train = make(ps, cfg, "train", &s, in, msgs, err))) goto fail;
    }
    if (req->decode_rows > 0 && make_sampling(ps, cfg, req, in, msgs, err)) goto fail;
    for (int i = 0; req->eval_rows > 0 && i < ps->n_buckets; i++) {
        StepShape s = step_forward(cfg, req->eval_rows, ps->bucket_T[i], req->train || req->decode_rows > 0);
        if (!(ps->eval[i] = make(ps, cfg, "eval", &s, in, msgs, err))) goto fail;
    }
    return 0;
fail:
    planset_free(ps);
    return -1;
}

void planset_free(PlanSet *ps) {
    free(ps->train);
    free(ps->decode);
    for (int i = 0; i < PLANSET_MAX_BUCKETS; i++) {
        free(ps->prefill[i]);
        free(ps->forward[i]);
        free(ps->eval[i]);
    }
    memset(ps, 0, sizeof *ps);
}

int planset_ahead(const PlanSet *ps, const Plan *out[2]) {
    int n = 0;
    if (ps->train) out[n++] = ps->train;
    if (ps->decode) out[n++] = ps->decode;
    return n;
}
