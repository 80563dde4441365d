/* engine: a tune from start to end (see tune.h and tuner.h): the untuned build and step, the sweeps, the database's
   best records applied, the tuned build and step, the report. */
#include "tune/tuner.h"
#include "gen/build.h"
#include "runtime/cuda/tune_api.h"
#include "common/clock.h"
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TUNE_MAX_ALGOS == MATMUL_MAX_CANDIDATES, "tune.h's TUNE_MAX_ALGOS is cuBLASLt's candidates at the most");

int tuner_matches(const Tuner *t, const char *name) {
    if (!t->o.pattern) return 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", t->o.pattern);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (!fnmatch(p, name, 0)) return 1;
    return 0;
}

int tuner_budget_left(Tuner *t) {
    if (t->o.budget > 0 && now_seconds() - t->t0 > t->o.budget) {
        if (!t->over_budget) fprintf(stderr, "tune: budget of %.0f s reached; keeping the best so far\n", t->o.budget);
        t->over_budget = 1;
    }
    return !t->over_budget;
}

void tuner_progress(Tuner *t, const char *what, const char *variant, const TuneRecord *r, int reused) {
    t->done++;
    double el = now_seconds() - t->t0, eta = t->done < t->total ? el / t->done * (t->total - t->done) : 0;
    char plan[64];
    tune_plan_label(&t->plan, plan, sizeof plan);
    fprintf(stderr, "tune [%d/%d] %s: %s %s: %s%s %.1f us, elapsed %.0f s, ETA %.0f s\n", t->done, t->total, plan, what,
            variant, r->status, reused ? " (from the database)" : "", r->us, el, eta);
}

const TuneRecord *tuner_measured(Tuner *t, const char *what, const char *name, const char *variant, const TuneKey *key) {
    return tune_db_find(&t->db, "measure", what, name, variant, key, NULL);
}

void tuner_record(Tuner *t, TuneRecord *r, const char *rec, const char *what, const char *name, const char *variant,
                  const char *status, double us, double default_us, const TuneKey *key) {
    memset(r, 0, sizeof *r);
    snprintf(r->record, sizeof r->record, "%s", rec);
    snprintf(r->what, sizeof r->what, "%s", what);
    tune_db_name(name, r->name, sizeof r->name);
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    snprintf(r->status, sizeof r->status, "%s", status);
    r->us = us;
    r->default_us = default_us;
    r->key = *key;
    tune_db_put(&t->db, r);
    Err err;
    if (!strcmp(rec, "measure") && tune_db_append(&t->db, r, &err)) fprintf(stderr, "gpt2gen tune: %s\n", err.msg);
}

double tuner_rel_diff(const float *a, const float *ref, size_t n, size_t *nonfinite) {
    *nonfinite = 0;
    for (size_t i = 0; i < n; i++) *nonfinite += !isfinite(a[i]);
    return harness_relerr(a, ref, n);
}

int tuner_run_workload(void *ctx, Err *err) {
    WlRun *r = ctx;
    return r->w->run(r->w, r->g, r->ks, err);
}

/* the step before and after into the report; 0 when the tuned step's losses match the untuned ones */
static int compare_steps(Tuner *t, double before, const float *lb, double after, const float *la, int twice) {
    const Config *cfg = t->cfg;
    double worst, tol;
    int ok = measure_steps_agree(cfg->model.precision, lb, la, &worst, &tol);
    fprintf(t->rep, "step           untuned %.2f ms -> tuned %.2f ms  %.3fx  (B=%d T=%d, %s, mean of 10 steps after 2 warm-up%s)\n",
            before, after, before / after, cfg->run.train.batch_size, cfg->run.train.seq_len, precision_name(cfg->model.precision),
            twice ? "; each the faster of two timings" : "");
    fprintf(t->rep, "%s tuned step matches the untuned one: losses of 3 steps differ by at most %.2e (tolerance %.0e)\n",
            ok ? "ok" : "FAIL", worst, tol);
    return ok ? 0 : -1;
}

/* A step of a few ms is noisy (host work and launches, not the kernels): both steps timed once more, from the cache,
   each keeping its faster time. Each plan runs its own attention path (the tuned one the database's). */
static int time_steps_again(Tuner *t, const Plan *tuned, double *before, double *after, Err *err) {
    double before2 = 0, after2 = 0;
    float l2[3];
    BuildStats st;
    Err e;
    fprintf(stderr, "tune: the tuned step was slower (%.2f against %.2f ms): timing both again\n", *after, *before);
    int rc = build_run(&t->plan, t->o.jobs, 1, t->o.env, &st, &e) || measure_step_time(&t->plan, t->o.env, 10, &before2, l2, &e);
    rc = rc || build_run(tuned, t->o.jobs, 1, t->o.env, &st, &e) || measure_step_time(tuned, t->o.env, 10, &after2, l2, &e);
    if (rc) return err_set(err, "timing the steps again: %s", e.msg);
    *before = fmin(*before, before2);
    *after = fmin(*after, after2);
    if (*after > *before * 1.03)
        fprintf(t->rep, "note           the tuned step is slower than the untuned one here: the kernels' own times above did "
                "not carry over to the whole step (at this size it is bound by launches and host work); "
                "`--no-tune-db` builds the defaults\n");
    return 0;
}

/* tuned (the database's best records applied) built and its step timed against the untuned one's, before */
static int tuned_step(Tuner *t, const Plan *tuned, double before, const float *lb, Err *err) {
    double after = 0;
    float la[3] = {0};
    BuildStats st;
    Err e;
    if (build_run(tuned, t->o.jobs, 1, t->o.env, &st, &e)) return err_set(err, "building the tuned kernels: %s", e.msg);
    fprintf(stderr, "tune: timing the tuned step\n");
    if (measure_step_time(tuned, t->o.env, 10, &after, la, &e)) return err_set(err, "tuned step: %s", e.msg);
    int twice = after > before * 1.03;
    if (twice && time_steps_again(t, tuned, &before, &after, err)) return -1;
    if (compare_steps(t, before, lb, after, la, twice)) t->failed++;
    return 0;
}

/* t->plan's kernel families and matmuls timed (the matmuls first: most of a step's time); -1 and err when a default
   variant does not compile or a variant broke the GPU's context. The variants stay (sweep_kernels_free) for the
   training step's attention path. */
static int sweep_plan(Tuner *t, Err *err) {
    sweep_kernels_list(t);
    if (sweep_kernels_compile(t, err)) return -1;
    sweep_matmuls(t);
    sweep_kernels(t);
    if (t->lost[0])   /* the variant's failure is recorded (a later tune skips it); nothing after it was measured */
        return err_set(err, "%s, which broke the GPU's context: the tune stops here (the database keeps what was "
                       "measured before and that variant's failure); run it again to measure the rest", t->lost);
    return 0;
}

/* the training step: built and timed untuned, swept, its attention and GELU paths, then built with the database's
   choices and timed again */
static int run_train(Tuner *t, Err *err) {
    double before = 0;
    float lb[3] = {0};
    BuildStats st;
    Err e;
    if (build_run(&t->plan, t->o.jobs, 1, t->o.env, &st, err)) return -1;
    fprintf(stderr, "tune: timing the untuned step\n");
    if (measure_step_time(&t->plan, t->o.env, 10, &before, lb, &e)) return err_set(err, "untuned step: %s", e.msg);
    if (sweep_plan(t, err)) return -1;
    /* the tuned plan, as a build will see it: the database's best records applied */
    Plan *tuned = xmalloc(sizeof *tuned);
    *tuned = t->plan;
    TuneApplied ap;
    tune_db_apply(&t->db, &t->env, tuned, t->cublaslt, &t->facts.facts, &ap, stderr);
    if (tuner_matches(t, "attention-path") && t->cfg->model.precision != PREC_FP32 && !strcmp(t->plan.attention_origin, "auto"))
        attention_path_sweep(t, tuned, &ap);
    /* GPT-2's relatives have the one GELU path (gen/plan.c, gelu_for_model) */
    if (tuner_matches(t, "gelu-path") && !strcmp(t->plan.gelu_origin, "auto") && gpt2_is_gpt2(&t->plan.model))
        gelu_path_sweep(t, tuned, &ap);
    sweep_kernels_free(t);
    if (tune_db_rewrite(&t->db, &e)) fprintf(stderr, "gpt2gen tune: %s\n", e.msg);
    int rc = tuned_step(t, tuned, before, lb, err);   /* the database's attention path is tuned's own */
    free(tuned);
    return rc;
}

/* another plan (decode, eval): swept, and what the database now gives it, as the commands that run it will take it
   (gen/planset.h); it is not timed as a whole step */
static int run_other(Tuner *t, Err *err) {
    int rc = sweep_plan(t, err);
    sweep_kernels_free(t);
    if (rc) return -1;
    Plan *tuned = xmalloc(sizeof *tuned);
    *tuned = t->plan;
    TuneApplied ap;
    tune_db_apply(&t->db, &t->env, tuned, t->cublaslt, &t->facts.facts, &ap, NULL);
    char label[64];
    tune_plan_label(&t->plan, label, sizeof label);
    fprintf(t->rep, "plan %s: the database gives it %d kernel famil%s and %d matmul%s (no whole step is timed here)\n",
            label, ap.kernels, ap.kernels == 1 ? "y" : "ies", ap.matmuls, ap.matmuls == 1 ? "" : "s");
    free(tuned);
    return 0;
}

/* every target in turn, each with its heading in the report */
static int run(Tuner *t, Err *err) {
    const TuneTargets *ts = t->targets;
    for (int i = 0; i < ts->n; i++) {   /* the whole tune's work, for the ETA */
        t->total += sweep_kernels_count(t, ts->plan[i]) + sweep_matmuls_count(t, ts->plan[i]);
        if (ts->plan[i]->step.kind == STEP_TRAIN && tuner_matches(t, "gelu-path") && !strcmp(ts->plan[i]->gelu_origin, "auto"))
            t->total += 3;   /* three whole steps */
    }
    int rc = 0;
    for (int i = 0; i < ts->n && !rc; i++) {
        t->plan = *ts->plan[i];
        harness_use_plan(&t->g, &t->plan);
        char label[64];
        tune_plan_label(&t->plan, label, sizeof label);
        fprintf(t->rep, "## plan %s\n", label);
        fprintf(stderr, "tune: plan %s\n", label);
        rc = t->plan.step.kind == STEP_TRAIN ? run_train(t, err) : run_other(t, err);
        fflush(t->rep);
    }
    Err e;
    if (tune_db_rewrite(&t->db, &e)) fprintf(stderr, "gpt2gen tune: %s\n", e.msg);
    return rc;
}

/* the run with its report: the heading, what the sweeps report, the time it took */
static int run_reported(Tuner *t, TuneReport *rep, Err *err) {
    const Config *cfg = t->cfg;
    t->t0 = now_seconds();
    tune_db_load(&t->db, tune_db_path(t->o.env), stderr);
    t->scratch = xmalloc(sizeof *t->scratch);
    t->rep = open_memstream(&rep->text, &rep->len);
    fprintf(t->rep, "# gpt2gen tune %s on %s (%s), %s; %d plan%s; database %s\n", cfg->path, t->env.gpu, t->env.arch,
            precision_name(cfg->model.precision), t->targets->n, t->targets->n == 1 ? "" : "s", tune_db_path(t->o.env));
    int rc = run(t, err);
    fprintf(t->rep, "tune took %.0f s%s\n", now_seconds() - t->t0, t->over_budget ? " (budget reached: some variants not measured)" : "");
    fclose(t->rep);
    rep->failed = t->failed;
    sweep_kernels_free(t);
    free(t->scratch);
    tune_db_free(&t->db);
    return rc;
}

int tune_run(const Config *cfg, const TuneTargets *targets, const TuneOptions *opt, TuneReport *rep, Err *err) {
    memset(rep, 0, sizeof *rep);
    if (targets->n < 1) return err_set(err, "no plan to tune");
    Tuner *t = xcalloc(1, sizeof *t);
    t->o = *opt;
    t->cfg = cfg;
    t->targets = targets;
    t->plan = *targets->plan[0];
    cuda_plan_facts(&t->facts, opt->env, 0);   /* the harness's GPU */
    Err e;
    int rc = -1;
    const char *hook = env_or_defaults(opt->env)->tune_env;
    if (tune_env_probe(&t->env, t->cublaslt, sizeof t->cublaslt, opt->env, &e) || hook) {
        /* one clause: "needs a GPU (libcuda.so.1: ...)", not "needs a GPU: no GPU (...)" */
        const char *why = hook ? "GPT2GEN_TUNE_ENV is a test hook for builds" : e.msg;
        int no_gpu = !strncmp(why, "no GPU", 6);
        err_set(err, "needs a GPU%s%s", no_gpu ? "" : ": ", no_gpu ? why + 6 : why);
    }
    else if (harness_open(&t->g, cfg, &t->plan, opt->env))
        err_set(err, "GPU 0 could not be opened");
    else {
        if (measure_flush_open(&t->flush, &t->g, err) == 0) rc = run_reported(t, rep, err);
        measure_flush_close(&t->flush);
        cuda_device_close(&t->g.dev);
    }
    free(t);
    return rc;
}

void tune_report_free(TuneReport *rep) {
    free(rep->text);
    rep->text = NULL;
}
