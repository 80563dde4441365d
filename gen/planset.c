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

/* The facts' answers within one plan set, one question per attention shape: a prefill and a forward plan of one
   bucket ask the same (on a GPU each question builds cuDNN's graph once: runtime/cuda/attention.c). */
#define FACTS_MEMO (2 * PLANSET_MAX_BUCKETS + 4)
typedef struct {
    const PlanFacts *inner;
    PlanFacts facts;
    int n;
    struct { int kind, B, T, precision, deterministic, serves; char why[PLAN_WHY_MAX]; } seen[FACTS_MEMO];
} FactsMemo;

static int memo_cudnn(void *ctx, const Plan *plan, char *why, size_t n) {
    FactsMemo *m = ctx;
    const StepShape *st = &plan->step;
    for (int i = 0; i < m->n; i++)
        if (m->seen[i].kind == (int)st->kind && m->seen[i].B == st->B && m->seen[i].T == st->T &&
            m->seen[i].precision == (int)st->precision && m->seen[i].deterministic == plan->deterministic) {
            snprintf(why, n, "%s", m->seen[i].why);
            return m->seen[i].serves;
        }
    char w[PLAN_WHY_MAX] = "";
    int serves = m->inner->cudnn_attention(m->inner->ctx, plan, w, sizeof w);
    snprintf(why, n, "%s", w);
    if (m->n < FACTS_MEMO) {
        m->seen[m->n].kind = (int)st->kind; m->seen[m->n].B = st->B; m->seen[m->n].T = st->T;
        m->seen[m->n].precision = (int)st->precision; m->seen[m->n].deterministic = plan->deterministic;
        m->seen[m->n].serves = serves;
        snprintf(m->seen[m->n].why, sizeof m->seen[m->n].why, "%s", w);
        m->n++;
    }
    return serves;
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
    int maxT = cfg->model.max_seq_len, want = req->positions > 0 && req->positions < maxT ? req->positions : maxT;
    int cached = ps->bucket_T[planset_bucket(ps, want)];   /* a bucket: few distinct kernels */
    StepShape s = step_decode(cfg, req->decode_rows, shared);
    s.cache_T = cached;
    if (!(ps->decode = make(ps, cfg, "decode", &s, in, msgs, err))) return -1;
    for (int i = 0; req->prompts && i < ps->n_buckets && ps->bucket_T[i] <= cached; i++) {
        s = step_prefill(cfg, req->decode_rows, ps->bucket_T[i], 1);
        s.cache_T = cached;
        if (!(ps->prefill[i] = make(ps, cfg, "prefill", &s, in, msgs, err))) return -1;
        s = step_forward(cfg, req->decode_rows, ps->bucket_T[i], 1);
        if (!(ps->forward[i] = make(ps, cfg, "forward", &s, in, msgs, err))) return -1;
    }
    return 0;
}

int planset_make(PlanSet *ps, const Config *cfg, const PlanRequest *req, const PlanInputs *given, FILE *msgs,
                 Err *err) {
    memset(ps, 0, sizeof *ps);
    FactsMemo *memo = xcalloc(1, sizeof *memo);
    PlanInputs use = *given;
    const PlanInputs *in = &use;
    if (given->facts && given->facts->cudnn_attention) {
        memo->inner = given->facts;
        memo->facts = (PlanFacts){memo_cudnn, memo};
        use.facts = &memo->facts;
    }
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
    free(memo);
    return 0;
fail:
    free(memo);
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
