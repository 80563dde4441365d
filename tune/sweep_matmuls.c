/* sweep_matmuls: cuBLASLt's first heuristic algorithms for every matmul of the plan, each held against the first
   one's output and timed (see tuner.h). */
#include "tune/tuner.h"
#include "runtime/cuda/tune_api.h"
#include <stdlib.h>
#include <string.h>

typedef struct { Matmuls *mm; int id; CUstream s; dptr D, A, B, bias, aux; } MmRun;
static int mm_run(void *ctx, Err *err) {
    MmRun *r = ctx;
    return matmul_run(r->mm, r->id, r->s, r->D, r->A, r->B, r->bias, r->aux, 1.0f, err);
}

static size_t layout_elems(int rows, int cols, int batch, long long stride) {
    return (size_t)rows * cols + (size_t)(batch - 1) * (size_t)stride;
}

/* a workload of the matmul's buffers, for their fill and sampling only: D (buffer 0) is the output */
static void matmul_buffers(Workload *w, Harness *g, const PlanMatmul *m) {
    size_t nA = layout_elems(m->transA ? m->k : m->m, m->transA ? m->m : m->k, m->batch, m->strideA);
    size_t nB = layout_elems(m->transB ? m->n : m->k, m->transB ? m->k : m->n, m->batch, m->strideB);
    size_t nD = layout_elems(m->m, m->n, m->batch, m->strideD);
    memset(w, 0, sizeof *w);
    w->family = m->name;
    w->b[0] = (WlBuf){harness_dalloc(g, nD * g->xs), nD, 0, 0.5f, 11};
    w->b[1] = (WlBuf){harness_dalloc(g, nA * g->xs), nA, 0, 0.5f, 12};
    w->b[2] = (WlBuf){harness_dalloc(g, nB * g->xs), nB, 0, 0.5f, 13};
    w->b[3] = (WlBuf){m->bias ? harness_dalloc(g, (size_t)m->m * g->xs) : 0, m->bias ? (size_t)m->m : 0, 0, 0.5f, 14};
    w->b[4] = (WlBuf){m->epilogue != EPI_NONE ? harness_dalloc(g, nD * g->xs) : 0, m->epilogue != EPI_NONE ? nD : 0, 0, 1.0f, 15};
    w->n_bufs = 5;
    w->out[w->n_out++] = (WlOut){0, 0, "D"};
}

/* the name of the j-th heuristic algorithm, as the tune db and the report write it */
static void algo_name(const cublasLtMatmulAlgo_t *algo, int j, char *name, size_t size) {
    MatmulAlgoChoice c;
    matmul_algo_describe(algo, j, &c);
    tune_algo_format(&c, name, size);
}

/* runs algorithm j (the one mm uses now) from the workload's fill: the first one's output becomes the reference
   (*ref, *nref), the others' are held against it; then times it, unless an earlier tune did (old: the default runs
   again only for the reference output); returns its status, and its time in *us */
static const char *measure_algo(Tuner *t, MmRun *r, Workload *w, int j, const TuneRecord *old, float **ref,
                                size_t *nref, double *us, Err *err) {
    Harness *g = &t->g;
    const char *status = "ok";
    size_t n = 0;
    float *got = NULL;
    if (workload_fill(w, g, err) || mm_run(r, err) || harness_wait(g, err) || !(got = workload_sample(w, g, &n, err)))
        status = "launch";
    else if (j == 0) { *ref = got; *nref = n; got = NULL; }
    else {
        size_t bad = 0;
        double e = tuner_rel_diff(got, *ref, n, &bad);
        if (n != *nref || bad || !(e <= g->tol)) {
            status = "mismatch";
            snprintf(err->msg, sizeof err->msg, "max error %.3g against the first heuristic, %zu not finite", e, bad);
        }
    }
    free(got);
    if (old) *us = old->us;   /* the default, run again only for the reference output */
    else if (!strcmp(status, "ok") && measure_median(g, &t->flush, mm_run, r, us, err)) status = "launch";
    return status;
}

static void sweep_matmul(Tuner *t, Matmuls *mm, int id) {
    const PlanMatmul *m = &t->plan.matmuls[id];
    TuneKey key;
    tune_key_matmul(&key, &t->env, &t->plan, id, t->cublaslt);
    Harness *g = &t->g;
    cublasLtMatmulAlgo_t algos[MATMUL_MAX_CANDIDATES];
    int n_algos = 0;
    Err err = {{0}};
    if (matmul_candidates(mm, id, t->o.algos, algos, &n_algos, &err)) {
        fprintf(t->rep, "matmul %-18s %s; not tuned\n", m->name, err.msg);
        return;
    }
    Workload w;
    matmul_buffers(&w, g, m);
    MmRun r = {mm, id, g->s, w.b[0].p, w.b[1].p, w.b[2].p, w.b[3].p, w.b[4].p};
    float *ref = NULL;
    size_t nref = 0;
    double best_us = -1, default_us = -1;
    int best = -1, rejected = 0;
    char name[256], dname[256] = "", bname[256] = "", rejects[1024] = "";
    for (int j = 0; j < n_algos; j++) {
        algo_name(&algos[j], j, name, sizeof name);
        if (j == 0) snprintf(dname, sizeof dname, "%s", name);
        matmul_use_algo(mm, id, &algos[j]);
        char dbname[64];
        tune_db_name(m->name, dbname, sizeof dbname);
        const TuneRecord *old = tuner_measured(t, "matmul", dbname, name, &key);
        TuneRecord rec;
        if (old && j > 0) rec = *old;
        else {
            if (j > 0 && !tuner_budget_left(t)) break;
            double us = 0;
            const char *status = measure_algo(t, &r, &w, j, old, &ref, &nref, &us, &err);
            if (j == 0 && strcmp(status, "ok")) {
                fprintf(t->rep, "matmul %-18s cuBLASLt's first heuristic fails: %s; not tuned\n", m->name, err.msg);
                t->failed++;
                break;
            }
            if (old) rec = *old;
            else tuner_record(t, &rec, "measure", "matmul", m->name, name, status, us, -1, &key);
            if (strcmp(status, "ok")) {
                size_t len = strlen(rejects);
                snprintf(rejects + len, sizeof rejects - len, "  rejected matmul %s %s: %s: %.200s\n", m->name, name, status, err.msg);
            }
        }
        tuner_progress(t, m->name, name, &rec, old != NULL);
        if (strcmp(rec.status, "ok")) { rejected++; continue; }
        if (j == 0) default_us = rec.us;
        if (best < 0 || rec.us < best_us) { best = j; best_us = rec.us; snprintf(bname, sizeof bname, "%s", name); }
    }
    free(ref);
    matmul_use_algo(mm, id, &algos[0]);
    harness_dfree_all(g);
    if (best < 0 || default_us <= 0) return;
    TuneRecord rec;
    tuner_record(t, &rec, "best", "matmul", m->name, bname, "ok", best_us, default_us, &key);
    fprintf(t->rep, "matmul %-18s default %-40s %10.1f us  chosen %-40s %10.1f us  %5.2fx  (%d algorithms, %d rejected)\n%s",
            m->name, dname, default_us, bname, best_us, default_us / best_us, n_algos, rejected, rejects);
}

/* 1 when plan's matmul id is swept: the globs match it, and the step runs it (a plan without a backward runs the
   forward's alone, and a decode step of few rows none: templates/decode.cu's decode_ln_linear and decode_linear_residual do its linears,
   gen/plan.h); the training step's all, whichever GELU path it has now (tune/gelu_path.c may choose another) */
static int swept(const Tuner *t, const Plan *plan, int id) {
    if (!tuner_matches(t, plan->matmuls[id].name)) return 0;
    return plan->step.kind == STEP_TRAIN || (plan->matmuls[id].per_step > 0 && !plan->decode_linear);
}

int sweep_matmuls_count(const Tuner *t, const Plan *plan) {
    int n = 0;
    for (int i = 0; i < MM_COUNT; i++) n += swept(t, plan, i) ? t->o.algos : 0;
    return n;
}

void sweep_matmuls(Tuner *t) {
    if (!sweep_matmuls_count(t, &t->plan)) return;
    Matmuls mm;
    dptr ws = 0;
    Err err = {{0}};
    if (cuda_check(cu.cuMemAlloc(&ws, CUBLASLT_WORKSPACE_BYTES), "cuBLASLt workspace", &err) ||
        matmuls_init(&mm, t->plan.matmuls, MM_COUNT, t->cfg->model.precision, ws, CUBLASLT_WORKSPACE_BYTES, &err)) {
        fprintf(t->rep, "matmuls: %s; not tuned\n", err.msg);
        t->failed++;
        if (ws) cu.cuMemFree(ws);
        return;
    }
    for (int i = 0; i < MM_COUNT; i++)
        if (swept(t, &t->plan, i)) sweep_matmul(t, &mm, i);
    matmuls_destroy(&mm);
    cu.cuMemFree(ws);
}
