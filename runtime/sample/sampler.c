/* sampler: generation with the decode and prefill plans (sampler.h). */
#include "runtime/sample/sampler.h"
#include "common/clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sampler_open(Sampler *s, const PlanSet *plans, Backend *weights, const char *which, int device, const Env *env,
                 Err *err) {
    memset(s, 0, sizeof *s);
    s->plans = plans;
    s->device = device;
    s->env = env;
    snprintf(s->which, sizeof s->which, "%s", weights ? weights->name : which);
    const Plan *dp = plans->decode;
    if (!dp || dp->step.shared_weights != (weights != NULL))
        return err_set(err, "sampler: the plan set has no decode plan %s shared weights", weights ? "with" : "without");
    s->rows = dp->step.B;
    BackendOptions o = {dp, device, 0, 0, weights, env, NULL};
    if (!(s->decode = backend_create(&o, s->which, err))) return -1;
    snprintf(s->which, sizeof s->which, "%s", s->decode->name);   /* "auto" has chosen: the other plans follow */
    s->weights = weights ? weights : s->decode;
    /* one greedy step at position 0 loads the decode step's kernels and records its graph (a prompt's steps write
       that position again before they read it) */
    int rows = s->rows;
    int32_t *tok = xcalloc((size_t)rows, sizeof *tok), *drawn = xcalloc((size_t)rows, sizeof *drawn);
    uint64_t *rng = xcalloc((size_t)rows, sizeof *rng);
    DecodeRun run = {tok, 0, 1, {0, 0, 1}, rng, drawn, NULL, NULL};
    int rc = s->decode->run(s->decode, &(BackendRun){.phase = BACKEND_DECODE, .decode = &run}, err) == 1 ? 0 : -1;
    free(tok); free(drawn); free(rng);
    return rc;
}

Backend *sampler_backend(Sampler *s) { return s->weights; }

/* a backend of bucket's prefill plan (prefill) or uncached forward plan, kept in *be while the bucket stays */
static int ensure(Sampler *s, int *at, Backend **be, int bucket, int prefill, Err *err) {
    if (*be && *at == bucket) return 0;
    if (*be) { (*be)->destroy(*be); *be = NULL; }
    const Plan *plan = prefill ? s->plans->prefill[bucket] : s->plans->forward[bucket];
    if (!plan) return err_set(err, "sampler: the plan set has no %s plans (PlanRequest.prompts)", prefill ? "prefill" : "forward");
    int T = plan->step.T;
    BackendOptions o = {plan, s->device, 0, 0, s->weights, s->env, prefill ? s->decode : NULL};
    if (!(*be = backend_create(&o, s->which, err))) return -1;
    *at = bucket;
    /* the first forward of a backend loads its kernels and libraries: once here, not in the timed prefill (the
       positions it writes into the cache are written again before anything reads them) */
    int32_t *zeros = xcalloc((size_t)s->rows * T, sizeof *zeros);
    int rc = (*be)->run(*be, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = zeros}, err);
    free(zeros);
    return rc;
}

static int check_lengths(const Sampler *s, int n, int max_new, Err *err) {
    int maxT = s->plans->decode->model.max_seq_len, cached = s->plans->decode->step.cache_T;
    if (n < 1 || max_new < 1) return err_set(err, "sampler: a prompt of %d tokens and %d new ones", n, max_new);
    if (n + max_new > maxT)
        return err_set(err, "a prompt of %d tokens and %d new tokens make %d positions, more than the model's %d (maxT)",
                       n, max_new, n + max_new, maxT);
    if (n + max_new > cached)   /* the plans were made for fewer (PlanRequest.positions) */
        return err_set(err, "a prompt of %d tokens and %d new tokens make %d positions, more than the %d the key/value "
                       "cache was made for", n, max_new, n + max_new, cached);
    return 0;
}

/* the steps' bookkeeping: end-of-text per row, and the caller's callback */
typedef struct {
    int rows, eot, ended;
    unsigned char *done;
    SampleCallback cb;
    void *ctx;
} Track;

static int track_step(void *ctx, int step, const int32_t *tok) {
    Track *t = ctx;
    for (int b = 0; b < t->rows; b++)
        if (!t->done[b] && tok[b] == t->eot) { t->done[b] = 1; t->ended++; }
    if (t->cb && t->cb(t->ctx, step, tok)) return 1;
    return t->eot >= 0 && t->ended == t->rows;
}

int sampler_generate(Sampler *s, const int32_t *prompt, int n, int max_new, const SampleSettings *ss, uint64_t *rng,
                     int eot, int32_t *drawn, SampleCallback on_step, void *ctx, SampleStats *st, Err *err) {
    if (check_lengths(s, n, max_new, err)) return -1;
    int R = s->rows;
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n;
    double t0 = now_seconds();
    if (n > 1) {   /* positions 0..n-2 in one forward; the rows' padding after them is never attended to */
        int bucket = planset_bucket(s->plans, n - 1), T = s->plans->bucket_T[bucket];
        if (ensure(s, &s->prefill_bucket, &s->prefill, bucket, 1, err)) return -1;
        t0 = now_seconds();   /* the prefill's time, not its plan's making (kernels compiled or from the cache) */
        int32_t *in = xmalloc((size_t)R * T * sizeof *in);
        for (int b = 0; b < R; b++)
            for (int t = 0; t < T; t++) in[(size_t)b * T + t] = prompt[t < n - 1 ? t : n - 2];
        int rc = s->prefill->run(s->prefill, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = in}, err);
        free(in);
        if (rc) return -1;
        st->prefill_tokens = n - 1;
    }
    double t1 = now_seconds();
    int32_t *first = xmalloc((size_t)R * sizeof *first);
    for (int b = 0; b < R; b++) first[b] = prompt[n - 1];
    Track tr = {R, eot, 0, xcalloc((size_t)R, 1), on_step, ctx};
    DecodeRun run = {first, n - 1, max_new, *ss, rng, drawn, track_step, &tr};
    int done = s->decode->run(s->decode, &(BackendRun){.phase = BACKEND_DECODE, .decode = &run}, err);
    free(first); free(tr.done);
    st->prefill_ms = (t1 - t0) * 1e3;
    st->decode_ms = (now_seconds() - t1) * 1e3;
    st->tokens = done > 0 ? done : 0;
    return done;
}

int sampler_generate_uncached(Sampler *s, const int32_t *prompt, int n, int max_new, const SampleSettings *ss,
                              uint64_t *rng, int eot, int32_t *drawn, SampleCallback on_step, void *ctx,
                              SampleStats *st, Err *err) {
    if (check_lengths(s, n, max_new, err)) return -1;
    int R = s->rows, V = s->plans->decode->model.vocab_size, bucket = planset_bucket(s->plans, n + max_new - 1);
    int T = s->plans->bucket_T[bucket];
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n;
    if (ensure(s, &s->forward_bucket, &s->forward, bucket, 0, err)) return -1;
    int32_t *seq = xmalloc((size_t)R * T * sizeof *seq);
    for (int b = 0; b < R; b++)
        for (int t = 0; t < T; t++) seq[(size_t)b * T + t] = prompt[t < n ? t : n - 1];
    float *logits = xmalloc((size_t)V * sizeof *logits);
    Track tr = {R, eot, 0, xcalloc((size_t)R, 1), on_step, ctx};
    double t0 = now_seconds();
    int i = 0, rc = 0;
    for (; i < max_new && !rc; i++) {
        int at = n - 1 + i;   /* the position whose logits draw the next token */
        rc = s->forward->run(s->forward, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = seq}, err);
        for (int b = 0; b < R && !rc; b++) {
            rc = s->forward->read(s->forward, BACKEND_LOGITS, (size_t)b * T + at, logits, err);
            if (!rc) drawn[(size_t)i * R + b] = sample_draw(logits, V, ss, &rng[b]);
            if (!rc && at + 1 < T) seq[(size_t)b * T + at + 1] = drawn[(size_t)i * R + b];
        }
        if (!rc && track_step(&tr, i, drawn + (size_t)i * R)) { i++; break; }
    }
    st->decode_ms = (now_seconds() - t0) * 1e3;
    st->tokens = i;
    free(seq); free(logits); free(tr.done);
    return rc ? -1 : i;
}

void sampler_close(Sampler *s) {
    /* the plans that run on the decode backend's cache or weights go first */
    if (s->prefill) s->prefill->destroy(s->prefill);
    if (s->forward) s->forward->destroy(s->forward);
    if (s->decode) s->decode->destroy(s->decode);
    memset(s, 0, sizeof *s);
}
