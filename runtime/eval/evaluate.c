/* evaluate: scoring the completions of an evaluation set with a forward plan (evaluate.h). */
#include "runtime/eval/evaluate.h"
#include "runtime/sample/sampler.h"
#include <stdlib.h>
#include <string.h>

int evaluator_open(Evaluator *e, const Config *cfg, const EvalSet *set, int rows, Backend *weights, const char *which,
                   const char *arch, int device, const Env *env, Err *err) {
    memset(e, 0, sizeof *e);
    char model[64];
    snprintf(model, sizeof model, "vocab_size %d, max_seq_len %d", cfg->model.vocab_size, cfg->model.max_seq_len);
    if (evalset_check_model(set, cfg->model.vocab_size, cfg->model.max_seq_len, model, err)) return -1;
    e->rows = rows < set->rows ? rows : set->rows;
    e->T = sampler_bucket(set->longest_row, cfg->model.max_seq_len);
    e->plan = xcalloc(1, sizeof *e->plan);
    StepShape s = step_forward(cfg, e->rows, e->T, weights != NULL);
    const char *kind = weights ? weights->name : which;
    CudaFacts facts;
    if (plan_make(e->plan, cfg, "eval", &s, arch, backend_plan_facts(&facts, kind, env, device), err)) return -1;
    BackendOptions o = {e->plan, device, 0, 0, weights, env, NULL};
    e->be = backend_create(&o, kind, err);
    return e->be ? 0 : -1;
}

Backend *evaluator_backend(Evaluator *e) { return e->be; }

/* Row r of set: its example k and completion j (rows run example by example, completion by completion). */
typedef struct {
    int k, j;
} RowAt;

/* The inputs and targets of one row: context then completion, padding after (token 0, whose losses are not used). */
static void fill_row(const EvalSet *set, RowAt at, int T, int32_t *in, int32_t *tg) {
    const EvalExample *x = &set->ex[at.k];
    size_t c = x->comp;
    for (int i = 0; i < at.j; i++) c += (size_t)x->comp_len[i];
    int n = x->ctx_len + x->comp_len[at.j];
    for (int t = 0; t < T; t++) {
        int v = t >= n ? 0 : t < x->ctx_len ? set->tokens[x->ctx + t] : set->tokens[c + (t - x->ctx_len)];
        in[t] = v;
        if (t > 0) tg[t - 1] = v;
    }
    tg[T - 1] = 0;
}

int evaluator_run(Evaluator *e, const EvalSet *set, EvalResult *r, EvalProgress progress, void *ctx, Err *err) {
    memset(r, 0, sizeof *r);
    int R = e->rows, T = e->T;
    r->examples = set->n;
    r->choices = xcalloc((size_t)set->n, sizeof *r->choices);
    r->scores = xcalloc((size_t)set->rows, sizeof *r->scores);
    int32_t *in = xmalloc((size_t)R * T * sizeof *in), *tg = xmalloc((size_t)R * T * sizeof *tg);
    float *losses = xmalloc((size_t)R * T * sizeof *losses);
    RowAt *at = xmalloc((size_t)R * sizeof *at);
    int rc = 0, k = 0, j = 0;
    for (int done = 0; done < set->rows && !rc;) {
        int n = 0;
        for (; n < R && done + n < set->rows; n++) {
            at[n] = (RowAt){k, j};
            fill_row(set, at[n], T, in + (size_t)n * T, tg + (size_t)n * T);
            if (++j == set->ex[k].n_completions) { k++; j = 0; }
        }
        for (int b = n; b < R; b++) {   /* a last, partial batch: the spare rows repeat the first one */
            memcpy(in + (size_t)b * T, in, (size_t)T * sizeof *in);
            memcpy(tg + (size_t)b * T, tg, (size_t)T * sizeof *tg);
        }
        rc = e->be->forward(e->be, in, tg, NULL, err) || e->be->get_losses(e->be, losses, err) ? -1 : 0;
        for (int b = 0; b < n && !rc; b++) {
            const EvalExample *x = &set->ex[at[b].k];
            double sum = 0;
            for (int t = x->ctx_len - 1; t < x->ctx_len - 1 + x->comp_len[at[b].j]; t++) sum += losses[(size_t)b * T + t];
            r->scores[done + b] = sum / x->comp_len[at[b].j];
        }
        done += n;
        if (!rc && progress && progress(ctx, done, set->rows)) rc = -1;
    }
    for (int row = 0, x = 0; !rc && x < set->n; row += set->ex[x].n_completions, x++) {
        int best = 0;
        for (int c = 1; c < set->ex[x].n_completions; c++)
            if (r->scores[row + c] < r->scores[row + best]) best = c;
        r->choices[x] = best;
        r->correct += best == set->ex[x].label;
    }
    r->accuracy = set->n ? (double)r->correct / set->n : 0;
    free(in); free(tg); free(losses); free(at);
    if (rc) evalresult_free(r);
    return rc;
}

void evaluator_close(Evaluator *e) {
    if (e->be) e->be->destroy(e->be);
    free(e->plan);
    memset(e, 0, sizeof *e);
}

void evalresult_free(EvalResult *r) {
    free(r->choices);
    free(r->scores);
    r->choices = NULL;
    r->scores = NULL;
}
