/* gpt2gen tune: every variant of every kernel family, every cuBLASLt candidate of every matmul, and cuDNN against
   the attention template, timed at the config's shapes on this GPU; the fastest correct ones go into the tuning
   database (gen/tune_db.h), and build/<name>/ is rebuilt with them. */
#include "cli/commands.h"
#include "tune/measure.h"
#include "gen/build.h"
#include "gen/emit.h"
#include "gen/nvrtc.h"
#include "gen/tune_db.h"
#include "runtime/cuda/ops.h"
#include "runtime/cuda/tune_env.h"
#include "common/clock.h"
#include "common/files.h"
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *TUNE_USAGE =
    "usage: gpt2gen tune CONFIG.lua [--kernels PATTERN] [--budget SECONDS] [--algos N] [--set KEY=VALUE]... [-j N]\n"
    "\n"
    "Times, on this GPU at CONFIG.lua's shapes, every variant of every kernel family (each combination of its\n"
    "tunables' candidates that the declarations allow; the config's tune table narrows or widens them), cuBLASLt's\n"
    "first N heuristic algorithms for every matmul of the plan, and cuDNN's attention against the template. Each\n"
    "variant's output is held against the default's (a mismatch, a compile or a launch failure is rejected and\n"
    "reported); times are medians of CUDA-event timings after an L2 flush. Every result is appended to the tuning\n"
    "database (build/tune-db.txt, or $GPT2GEN_TUNE_DB) as it is measured, so an interrupted tune resumes without\n"
    "measuring again; the fastest become its \"best\" records, which `gpt2gen build` and `train` then use.\n"
    "Rebuilds build/<name>/ with them, times a training step before and after, and writes the report to stdout and\n"
    "build/<name>/tune_report.txt.\n"
    "\n"
    "options:\n"
    "  --kernels PATTERN  only what matches these globs (comma-separated) on family names, matmul names or\n"
    "                     \"attention-path\", e.g. --kernels 'layernorm,gelu' (default: everything)\n"
    "  --budget SECONDS   stop measuring new variants after this long; the best so far are kept\n"
    "  --algos N          cuBLASLt heuristic algorithms per matmul, 1 to 32 (default 16)\n"
    "  --set KEY=VALUE    override a config value (repeatable)\n"
    "  -j N               parallel compiles (default: one per core)\n";

typedef struct {
    Args a;
    Config cfg;
    Plan plan;                           /* the untuned plan: the baseline */
    Plan *scratch;                       /* a copy for one variant */
    TuneEnv env;
    char cublaslt[32];
    TuneDb db;
    const char *pattern;
    double budget, t0;
    int algos, done, total, over_budget, failed;
    G g;
    Flush flush;
    char *img[PLAN_MAX_MODULES];         /* the default variant's CUBIN of each module */
    FILE *rep;                           /* the report */
    char *rep_text;
    size_t rep_len;
} Tuner;

static int matches(const Tuner *t, const char *name) {
    if (!t->pattern) return 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", t->pattern);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (!fnmatch(p, name, 0)) return 1;
    return 0;
}

static int budget_left(Tuner *t) {
    if (t->budget > 0 && now_seconds() - t->t0 > t->budget) {
        if (!t->over_budget) fprintf(stderr, "tune: budget of %.0f s reached; keeping the best so far\n", t->budget);
        t->over_budget = 1;
    }
    return !t->over_budget;
}

static void progress(Tuner *t, const char *what, const char *variant, const TuneRecord *r, int reused) {
    t->done++;
    double el = now_seconds() - t->t0, eta = t->done < t->total ? el / t->done * (t->total - t->done) : 0;
    fprintf(stderr, "tune [%d/%d] %s %s: %s%s %.1f us, elapsed %.0f s, ETA %.0f s\n", t->done, t->total, what, variant,
            r->status, reused ? " (from the database)" : "", r->us, el, eta);
}

/* the measure record of (what, name, variant) with key: from the database, else NULL */
static const TuneRecord *measured(Tuner *t, const char *what, const char *name, const char *variant, const TuneKey *key) {
    return tune_db_find(&t->db, "measure", what, name, variant, key, NULL);
}

static void record(Tuner *t, TuneRecord *r, const char *rec, const char *what, const char *name, const char *variant,
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

/* ---------------------------------------------------------------- kernel families */

typedef struct {
    int n;
    TuneVariant v[TUNE_MAX_VARIANTS];
    CompileJob *jobs;                    /* one per variant */
    char **sources;
    int refused;
} FamilyVariants;

static int compile_all(Tuner *t, FamilyVariants *fv) {
    int total = 0;
    for (int i = 0; i < t->plan.n_modules; i++) total += fv[i].n;
    CompileJob *flat = xcalloc((size_t)total, sizeof *flat);
    int k = 0;
    for (int i = 0; i < t->plan.n_modules; i++) {
        fv[i].jobs = flat + k;
        fv[i].sources = xcalloc((size_t)fv[i].n, sizeof(char *));
        for (int j = 0; j < fv[i].n; j++, k++) {
            Err err;
            *t->scratch = t->plan;
            flat[k].name = t->plan.modules[i].decl->family;
            if (plan_set_tunables(t->scratch, i, fv[i].v[j].v, "tune-db", &err) == 0)
                fv[i].sources[j] = emit_module(t->scratch, &t->scratch->modules[i], &err);
            flat[k].source = fv[i].sources[j] ? fv[i].sources[j] : "#error the variant could not be emitted\n";
            flat[k].source_path = t->plan.modules[i].source_path;
            flat[k].arch = t->plan.arch;
        }
    }
    double t0 = now_seconds();
    fprintf(stderr, "tune: compiling %d variants of %d kernel families (through the cache %s)\n", total,
            t->plan.n_modules, nvrtc_cache_dir(t->a.env));
    Err err;
    nvrtc_compile_all(flat, total, t->a.env, t->a.jobs > 0 ? t->a.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN), &err);
    int cached = 0;
    for (int i = 0; i < total; i++) cached += flat[i].from_cache;
    fprintf(stderr, "tune: compiled in %.1f s (%d from the cache)\n", now_seconds() - t0, cached);
    for (int i = 0; i < t->plan.n_modules; i++) {
        if (!fv[i].jobs[0].cubin) {
            fprintf(stderr, "gpt2gen tune: the default %s kernels do not compile: %s\n", t->plan.modules[i].decl->family,
                    fv[i].jobs[0].err.msg);
            return -1;
        }
        t->img[i] = fv[i].jobs[0].cubin;
    }
    return 0;
}

typedef struct { Workload *w; G *g; Kernels *ks; } WlRun;
static int wl_run(void *ctx, Err *err) { WlRun *r = ctx; return r->w->run(r->w, r->g, r->ks, err); }

/* loads the variant's kernels (the other modules' defaults), runs the workload once from its fill, samples its
   outputs; status "launch" and err when something failed */
static float *run_variant(Tuner *t, int module, const TuneVariant *v, const char *cubin, Workload *w, Kernels *ks,
                          size_t *n, Err *err) {
    memset(ks, 0, sizeof *ks);
    *t->scratch = t->plan;
    if (plan_set_tunables(t->scratch, module, v->v, "tune-db", err)) return NULL;
    char *img[PLAN_MAX_MODULES];
    memcpy(img, t->img, sizeof img);
    img[module] = (char *)cubin;
    if (kernels_load_images(ks, t->scratch, &t->g.dev, img, err)) return NULL;
    ks->sync_each = 0;
    if (workload_fill(w, &t->g, err) || w->run(w, &t->g, ks, err) || gpu_wait(&t->g, err)) return NULL;
    return workload_sample(w, &t->g, n, err);
}

static double rel_diff(const float *a, const float *ref, size_t n, size_t *nonfinite) {
    *nonfinite = 0;
    for (size_t i = 0; i < n; i++) *nonfinite += !isfinite(a[i]);
    return relerr(a, ref, n);
}

static void tune_family(Tuner *t, int i, FamilyVariants *fv) {
    const PlanModule *m = &t->plan.modules[i];
    const char *fam = m->decl->family;
    TuneKey key;
    tune_key_kernel(&key, &t->env, &t->plan, i);
    int max_tun[FAMILY_MAX_TUNABLES] = {0};
    for (int j = 0; j < fv->n; j++)
        for (int k = 0; k < m->n_tunables; k++)
            if (fv->v[j].v[k] > max_tun[k]) max_tun[k] = fv->v[j].v[k];
    Workload w;
    char why[256], name[256], dname[256];
    tune_variant_name(m, fv->v[0].v, dname, sizeof dname);
    if (workload_setup(&w, &t->g, fam, max_tun, why, sizeof why)) {
        fprintf(t->rep, "kernel %-12s %s: %s; default kept\n", fam, dname, why);
        t->done += fv->n;
        return;
    }
    Kernels ks;
    Err err = {{0}};
    size_t nref = 0, n = 0;
    float *ref = run_variant(t, i, &fv->v[0], t->img[i], &w, &ks, &nref, &err);
    double best_us = -1, default_us = -1;
    int best = -1, ok = 0, rejected = 0, reused_n = 0;
    char rejects[2048] = "";
    if (!ref) {
        fprintf(t->rep, "kernel %-12s the default variant %s fails: %s; not tuned\n", fam, dname, err.msg);
        t->failed++;
        kernels_unload(&ks);
        dfree_all(&t->g);
        return;
    }
    kernels_unload(&ks);
    for (int j = 0; j < fv->n; j++) {
        tune_variant_name(m, fv->v[j].v, name, sizeof name);
        const TuneRecord *old = measured(t, "kernel", fam, name, &key);
        TuneRecord r;
        if (old) { r = *old; reused_n++; }
        else {
            if (j > 0 && !budget_left(t)) continue;
            const char *status = "ok";
            double us = 0;
            err.msg[0] = 0;
            if (!fv->jobs[j].cubin) status = "compile";
            else {
                float *got = run_variant(t, i, &fv->v[j], fv->jobs[j].cubin, &w, &ks, &n, &err);
                size_t bad = 0;
                double e = got && n == nref ? rel_diff(got, ref, n, &bad) : 0;
                if (!got) status = "launch";
                else if (n != nref || bad || !(e <= t->g.tol)) {
                    status = "mismatch";
                    snprintf(err.msg, sizeof err.msg, "max error %.3g against the default (tolerance %.1g), %zu not finite",
                             e, t->g.tol, bad);
                } else {
                    WlRun wr = {&w, &t->g, &ks};
                    if (time_median(&t->g, &t->flush, wl_run, &wr, &us, &err)) status = "launch";
                }
                free(got);
                kernels_unload(&ks);
            }
            if (strcmp(status, "ok") && !fv->jobs[j].cubin) snprintf(err.msg, sizeof err.msg, "%.300s", fv->jobs[j].err.msg);
            record(t, &r, "measure", "kernel", fam, name, status, us, -1, &key);
            if (strcmp(status, "ok")) {
                size_t len = strlen(rejects);
                snprintf(rejects + len, sizeof rejects - len, "  rejected %s %s: %s: %.200s\n", fam, name, status, err.msg);
            }
        }
        progress(t, fam, name, &r, old != NULL);
        if (strcmp(r.status, "ok")) { rejected++; continue; }
        ok++;
        if (j == 0) default_us = r.us;
        if (best < 0 || r.us < best_us) { best = j; best_us = r.us; }
    }
    free(ref);
    dfree_all(&t->g);
    if (best < 0 || default_us <= 0) {
        fprintf(t->rep, "kernel %-12s no variant could be timed; default kept\n%s", fam, rejects);
        return;
    }
    tune_variant_name(m, fv->v[best].v, name, sizeof name);
    TuneRecord r;
    record(t, &r, "best", "kernel", fam, name, "ok", best_us, default_us, &key);
    fprintf(t->rep, "kernel %-12s default %-40s %10.1f us  chosen %-40s %10.1f us  %5.2fx  (%d variants: %d ok, %d rejected, "
            "%d refused by the constraints%s)\n%s", fam, dname, default_us, name, best_us, default_us / best_us, fv->n, ok,
            rejected, fv->refused, reused_n ? ", some measured by an earlier tune" : "", rejects);
}

/* ---------------------------------------------------------------- matmuls */

typedef struct { Matmuls *mm; int id; CUstream s; dptr D, A, B, bias, aux; } MmRun;
static int mm_run(void *ctx, Err *err) {
    MmRun *r = ctx;
    return matmul_run(r->mm, r->id, r->s, r->D, r->A, r->B, r->bias, r->aux, 1.0f, err);
}

static size_t layout_elems(int rows, int cols, int batch, long long stride) {
    return (size_t)rows * cols + (size_t)(batch - 1) * (size_t)stride;
}

static void tune_matmul(Tuner *t, Matmuls *mm, int id) {
    const PlanMatmul *m = &t->plan.matmuls[id];
    TuneKey key;
    tune_key_matmul(&key, &t->env, &t->plan, id, t->cublaslt);
    G *g = &t->g;
    cublasLtMatmulAlgo_t algos[MATMUL_MAX_CANDIDATES];
    int n_algos = 0;
    Err err = {{0}};
    if (matmul_candidates(mm, id, t->algos, algos, &n_algos, &err)) {
        fprintf(t->rep, "matmul %-18s %s; not tuned\n", m->name, err.msg);
        return;
    }
    size_t nA = layout_elems(m->transA ? m->k : m->m, m->transA ? m->m : m->k, m->batch, m->strideA);
    size_t nB = layout_elems(m->transB ? m->n : m->k, m->transB ? m->k : m->n, m->batch, m->strideB);
    size_t nD = layout_elems(m->m, m->n, m->batch, m->strideD);
    Workload w;   /* only its buffers and sampling: D is the output */
    memset(&w, 0, sizeof w);
    w.family = m->name;
    w.b[0] = (WlBuf){dalloc(g, nD * g->xs), nD, 0, 0.5f, 11};
    w.b[1] = (WlBuf){dalloc(g, nA * g->xs), nA, 0, 0.5f, 12};
    w.b[2] = (WlBuf){dalloc(g, nB * g->xs), nB, 0, 0.5f, 13};
    w.b[3] = (WlBuf){m->bias ? dalloc(g, (size_t)m->m * g->xs) : 0, m->bias ? (size_t)m->m : 0, 0, 0.5f, 14};
    w.b[4] = (WlBuf){m->epilogue != EPI_NONE ? dalloc(g, nD * g->xs) : 0, m->epilogue != EPI_NONE ? nD : 0, 0, 1.0f, 15};
    w.n_bufs = 5;
    w.out[w.n_out++] = (WlOut){0, 0, "D"};
    MmRun r = {mm, id, g->s, w.b[0].p, w.b[1].p, w.b[2].p, w.b[3].p, w.b[4].p};
    float *ref = NULL;
    size_t nref = 0, n = 0;
    double best_us = -1, default_us = -1;
    int best = -1, rejected = 0;
    char name[256], dname[256] = "", bname[256] = "", rejects[1024] = "";
    for (int j = 0; j < n_algos; j++) {
        MatmulAlgoChoice c;
        matmul_algo_describe(&algos[j], j, &c);
        tune_algo_format(&c, name, sizeof name);
        if (j == 0) snprintf(dname, sizeof dname, "%s", name);
        matmul_use_algo(mm, id, &algos[j]);
        char dbname[64];
        tune_db_name(m->name, dbname, sizeof dbname);
        const TuneRecord *old = measured(t, "matmul", dbname, name, &key);
        TuneRecord rec;
        if (old && j > 0) rec = *old;
        else {
            if (j > 0 && !budget_left(t)) break;
            const char *status = "ok";
            double us = 0;
            float *got = NULL;
            if (workload_fill(&w, g, &err) || mm_run(&r, &err) || gpu_wait(g, &err) || !(got = workload_sample(&w, g, &n, &err)))
                status = "launch";
            else if (j == 0) { ref = got; nref = n; got = NULL; }
            else {
                size_t bad = 0;
                double e = rel_diff(got, ref, n, &bad);
                if (n != nref || bad || !(e <= g->tol)) {
                    status = "mismatch";
                    snprintf(err.msg, sizeof err.msg, "max error %.3g against the first heuristic, %zu not finite", e, bad);
                }
            }
            free(got);
            if (old) us = old->us;   /* the default, run again only for the reference output */
            else if (!strcmp(status, "ok") && time_median(g, &t->flush, mm_run, &r, &us, &err)) status = "launch";
            if (j == 0 && strcmp(status, "ok")) {
                fprintf(t->rep, "matmul %-18s cuBLASLt's first heuristic fails: %s; not tuned\n", m->name, err.msg);
                t->failed++;
                break;
            }
            if (old) rec = *old;
            else record(t, &rec, "measure", "matmul", m->name, name, status, us, -1, &key);
            if (strcmp(status, "ok")) {
                size_t len = strlen(rejects);
                snprintf(rejects + len, sizeof rejects - len, "  rejected matmul %s %s: %s: %.200s\n", m->name, name, status, err.msg);
            }
        }
        progress(t, m->name, name, &rec, old != NULL);
        if (strcmp(rec.status, "ok")) { rejected++; continue; }
        if (j == 0) default_us = rec.us;
        if (best < 0 || rec.us < best_us) { best = j; best_us = rec.us; snprintf(bname, sizeof bname, "%s", name); }
    }
    free(ref);
    matmul_use_algo(mm, id, &algos[0]);
    dfree_all(g);
    if (best < 0 || default_us <= 0) return;
    TuneRecord rec;
    record(t, &rec, "best", "matmul", m->name, bname, "ok", best_us, default_us, &key);
    fprintf(t->rep, "matmul %-18s default %-40s %10.1f us  chosen %-40s %10.1f us  %5.2fx  (%d algorithms, %d rejected)\n%s",
            m->name, dname, default_us, bname, best_us, default_us / best_us, n_algos, rejected, rejects);
}

static void tune_matmuls(Tuner *t) {
    Matmuls mm;
    dptr ws = 0;
    Err err = {{0}};
    if (cuda_check(cu.cuMemAlloc(&ws, CUBLASLT_WORKSPACE_BYTES), "cuBLASLt workspace", &err) ||
        matmuls_init(&mm, t->plan.matmuls, MM_COUNT, t->cfg.precision, ws, CUBLASLT_WORKSPACE_BYTES, &err)) {
        fprintf(t->rep, "matmuls: %s; not tuned\n", err.msg);
        t->failed++;
        if (ws) cu.cuMemFree(ws);
        return;
    }
    for (int i = 0; i < MM_COUNT; i++)
        if (matches(t, t->plan.matmuls[i].name)) tune_matmul(t, &mm, i);
    matmuls_destroy(&mm);
    cu.cuMemFree(ws);
}

/* ---------------------------------------------------------------- the attention path */

static void tune_attention_path(Tuner *t, const Plan *tuned, char *const *img) {
    G *g = &t->g;
    TuneKey key;
    tune_key_attention(&key, &t->env, &t->plan);
    char why[1024] = "";
    CudnnAttention *cd = cudnn_attention_open(g->B, g->T, g->NH, g->HS, t->cfg.precision, t->a.env, why, sizeof why);
    if (!cd) {
        fprintf(t->rep, "attention path: the flash template (cuDNN: %s)\n", why);
        TuneRecord r;
        record(t, &r, "best", "attention", "path", "path=flash", "ok", 0, -1, &key);
        return;
    }
    Workload w;
    int max_tun[FAMILY_MAX_TUNABLES] = {0};
    Kernels ks;
    Err err = {{0}};
    double us[2] = {-1, -1};
    float *out[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    workload_setup(&w, g, "attention", max_tun, why, sizeof why);
    size_t wsb = cudnn_attention_workspace_bytes(cd);
    dptr ws = wsb ? dalloc(g, wsb) : 0;
    if (kernels_load_images(&ks, tuned, &g->dev, img, &err) == 0) {
        ks.sync_each = 0;
        for (int p = 0; p < 2; p++) {   /* 0: the template, 1: cuDNN */
            w.cudnn = p ? cd : NULL;
            w.cudnn_ws = p ? ws : 0;
            WlRun wr = {&w, g, &ks};
            if (workload_fill(&w, g, &err) || w.run(&w, g, &ks, &err) || gpu_wait(g, &err) ||
                !(out[p] = workload_sample(&w, g, &n[p], &err)) || time_median(g, &t->flush, wl_run, &wr, &us[p], &err))
                us[p] = -1;
            TuneRecord r;
            r.us = us[p];
            snprintf(r.status, sizeof r.status, "%s", us[p] < 0 ? "launch" : "ok");
            progress(t, "attention", p ? "path=cudnn" : "path=flash", &r, 0);
        }
        kernels_unload(&ks);
    }
    size_t bad = 0;
    double e = out[0] && out[1] && n[0] == n[1] ? rel_diff(out[1], out[0], n[0], &bad) : 1;
    double tol = g->xs == 4 ? 1e-4 : 3e-2;   /* the GPU tests' tolerance between the two paths */
    if (us[1] > 0 && (bad || !(e <= tol))) {
        fprintf(t->rep, "attention path: cuDNN rejected: max error %.3g against the template (tolerance %.1g)\n", e, tol);
        us[1] = -1;
    }
    int cudnn_wins = us[1] > 0 && (us[0] < 0 || us[1] < us[0]);
    TuneRecord r;
    if (us[0] > 0 || us[1] > 0) {
        record(t, &r, "best", "attention", "path", cudnn_wins ? "path=cudnn" : "path=flash", "ok", cudnn_wins ? us[1] : us[0],
               us[1] > 0 ? us[1] : us[0], &key);
        fprintf(t->rep, "attention path: cuDNN %.1f us, template (tuned tiles) %.1f us forward+backward: %s  (%s, default for "
                "attention = \"auto\": cuDNN)\n", us[1], us[0], cudnn_wins ? "cuDNN" : "the template", cudnn_attention_describe(cd));
    }
    free(out[0]);
    free(out[1]);
    cudnn_attention_close(cd);
    dfree_all(g);
}

/* ---------------------------------------------------------------- the command */

/* takes --kernels, --budget and --algos out of argv; 2 after a usage error */
static int tune_options(Tuner *t, int *argc, char **argv) {
    int k = 1;
    t->algos = 16;
    for (int i = 1; i < *argc; i++) {
        const char *s = argv[i];
        int is_opt = !strcmp(s, "--kernels") || !strcmp(s, "--budget") || !strcmp(s, "--algos");
        if (!is_opt) { argv[k++] = argv[i]; continue; }
        if (i + 1 == *argc) { fprintf(stderr, "gpt2gen tune: option '%s' needs a value\n", s); return EXIT_USAGE; }
        const char *v = argv[++i];
        char *end;
        if (!strcmp(s, "--kernels")) t->pattern = v;
        else if (!strcmp(s, "--budget")) {
            t->budget = strtod(v, &end);
            if (*end || end == v || !(t->budget > 0) || t->budget > 1e7) {
                fprintf(stderr, "gpt2gen tune: --budget: expected seconds (a positive number), got '%s'\n", v);
                return EXIT_USAGE;
            }
        } else {
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 1 || n > MATMUL_MAX_CANDIDATES) {
                fprintf(stderr, "gpt2gen tune: --algos: expected 1 to %d, got '%s'\n", MATMUL_MAX_CANDIDATES, v);
                return EXIT_USAGE;
            }
            t->algos = (int)n;
        }
    }
    *argc = k;
    return 0;
}

/* the step before and after; 0 when the tuned step's losses match the untuned ones */
static int compare_steps(Tuner *t, double before, const float *lb, double after, const float *la, int twice) {
    double tol = t->cfg.precision == PREC_FP32 ? 1e-4 : 2e-2, worst = 0;
    for (int i = 0; i < 3; i++) {
        double d = fabs((double)la[i] - lb[i]) / fmax(fabs((double)lb[i]), 1e-30);
        if (!(d <= worst)) worst = d;
    }
    fprintf(t->rep, "step           untuned %.2f ms -> tuned %.2f ms  %.3fx  (B=%d T=%d, %s, mean of 10 steps after 2 warm-up%s)\n",
            before, after, before / after, t->cfg.train.batch_size, t->cfg.train.seq_len, precision_name(t->cfg.precision),
            twice ? "; each the faster of two timings" : "");
    int ok = worst <= tol;
    fprintf(t->rep, "%s tuned step matches the untuned one: losses of 3 steps differ by at most %.2e (tolerance %.0e)\n",
            ok ? "ok" : "FAIL", worst, tol);
    return ok ? 0 : -1;
}

static int run(Tuner *t) {
    Err err;
    double before = 0, after = 0;
    float lb[3] = {0}, la[3] = {0};
    BuildStats st;
    if (build_run(&t->plan, t->a.jobs, 1, t->a.env, &st, &err)) { fprintf(stderr, "gpt2gen tune: %s\n", err.msg); return EXIT_FAIL; }
    fprintf(stderr, "tune: timing the untuned step\n");
    AttentionPath asked = t->cfg.attention;
    if (step_time(&t->plan, 10, &before, lb, &err)) { fprintf(stderr, "gpt2gen tune: untuned step: %s\n", err.msg); return EXIT_FAIL; }
    static FamilyVariants fv[PLAN_MAX_MODULES];
    for (int i = 0; i < t->plan.n_modules; i++) {
        fv[i].n = matches(t, t->plan.modules[i].decl->family)
                      ? tune_variants(&t->plan, i, fv[i].v, TUNE_MAX_VARIANTS, &fv[i].refused) : 1;
        if (fv[i].n == 1) tune_variants(&t->plan, i, fv[i].v, 1, &fv[i].refused);
        t->total += fv[i].n;
    }
    for (int i = 0; i < MM_COUNT; i++) t->total += matches(t, t->plan.matmuls[i].name) ? t->algos : 0;
    if (compile_all(t, fv)) return EXIT_FAIL;
    /* the matmuls first (most of the step's time), then the families, those with fewer variants first: a budget
       that runs out leaves the longest sweeps short, not the cheap ones */
    tune_matmuls(t);
    int order[PLAN_MAX_MODULES];
    for (int i = 0; i < t->plan.n_modules; i++) {
        int j = i;
        for (; j > 0 && fv[order[j - 1]].n > fv[i].n; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int k = 0; k < t->plan.n_modules; k++) {
        int i = order[k];
        if (!matches(t, t->plan.modules[i].decl->family)) continue;
        tune_family(t, i, &fv[i]);
        fflush(t->rep);
    }
    /* the tuned plan, as a build will see it: the database's best records applied */
    Plan *tuned = xmalloc(sizeof *tuned);
    *tuned = t->plan;
    TuneApplied ap;
    tune_db_apply(&t->db, &t->env, tuned, t->cublaslt, &ap, stderr);
    if (matches(t, "attention-path") && t->cfg.precision != PREC_FP32 && asked == ATTN_AUTO) {
        CompileJob job;   /* the tuned attention module's CUBIN */
        memset(&job, 0, sizeof job);
        char *img[PLAN_MAX_MODULES];
        memcpy(img, t->img, sizeof img);
        int ai = -1;
        for (int i = 0; i < tuned->n_modules; i++)
            if (!strcmp(tuned->modules[i].decl->family, "attention")) ai = i;
        for (int j = 0; ai >= 0 && j < fv[ai].n; j++)
            if (!memcmp(fv[ai].v[j].v, tuned->modules[ai].env.tun, sizeof fv[ai].v[j].v) && fv[ai].jobs[j].cubin)
                img[ai] = fv[ai].jobs[j].cubin;
        *t->scratch = t->plan;   /* the default kernels, with the tuned attention module */
        if (ai >= 0 && plan_set_tunables(t->scratch, ai, tuned->modules[ai].env.tun, "tune-db", &err) == 0)
            tune_attention_path(t, t->scratch, img);
        tune_db_apply(&t->db, &t->env, tuned, t->cublaslt, &ap, stderr);
    }
    if (tune_db_rewrite(&t->db, &err)) fprintf(stderr, "gpt2gen tune: %s\n", err.msg);
    if (ap.attention) t->cfg.attention = ap.attention_path;
    int rc = build_run(tuned, t->a.jobs, 1, t->a.env, &st, &err);
    if (rc) fprintf(stderr, "gpt2gen tune: building the tuned kernels: %s\n", err.msg);
    fprintf(stderr, "tune: timing the tuned step\n");
    if (!rc && (rc = step_time(tuned, 10, &after, la, &err))) fprintf(stderr, "gpt2gen tune: tuned step: %s\n", err.msg);
    int twice = !rc && after > before * 1.03;
    if (twice) {
        /* A step of a few ms is noisy (host work and launches, not the kernels): time both once more, from the
           cache, and keep each one's faster time. */
        double before2 = 0, after2 = 0;
        float l2[3];
        fprintf(stderr, "tune: the tuned step was slower (%.2f against %.2f ms): timing both again\n", after, before);
        AttentionPath chosen = t->cfg.attention;
        t->cfg.attention = asked;                        /* the untuned step as at first */
        rc = build_run(&t->plan, t->a.jobs, 1, t->a.env, &st, &err) || step_time(&t->plan, 10, &before2, l2, &err);
        t->cfg.attention = chosen;
        rc = rc || build_run(tuned, t->a.jobs, 1, t->a.env, &st, &err) || step_time(tuned, 10, &after2, l2, &err);
        if (rc) fprintf(stderr, "gpt2gen tune: timing the steps again: %s\n", err.msg);
        before = fmin(before, before2);
        after = fmin(after, after2);
        if (!rc && after > before * 1.03)
            fprintf(t->rep, "note           the tuned step is slower than the untuned one here: the kernels' own times above did "
                    "not carry over to the whole step (at this size it is bound by launches and host work); "
                    "`--no-tune-db` builds the defaults\n");
    }
    if (!rc && compare_steps(t, before, lb, after, la, twice)) t->failed++;
    t->cfg.attention = asked;
    for (int i = 0; i < t->plan.n_modules; i++) {
        for (int j = 0; j < fv[i].n; j++) { free(fv[i].jobs[j].cubin); free(fv[i].sources[j]); }
        free(fv[i].sources);
    }
    free(fv[0].jobs);
    free(tuned);
    return rc ? EXIT_FAIL : 0;
}

int cmd_tune(int argc, char **argv) {
    static Tuner t;
    memset(&t, 0, sizeof t);
    int rc = tune_options(&t, &argc, argv);
    if (rc) return rc;
    if ((rc = args_parse(argc, argv, &t.a, "tune"))) return rc;
    if (t.a.help) { fputs(TUNE_USAGE, stdout); return 0; }
    t.a.untuned = 1;
    if ((rc = args_load_and_plan(&t.a, &t.cfg, &t.plan))) return rc;
    Err err;
    if (tune_env_probe(&t.env, t.cublaslt, sizeof t.cublaslt, t.a.env, &err) || t.a.env->tune_env) {
        fprintf(stderr, "gpt2gen tune: needs a GPU: %s\n", t.a.env->tune_env ? "GPT2GEN_TUNE_ENV is a test hook for builds" : err.msg);
        return EXIT_FAIL;
    }
    if (harness_open(&t.g, &t.cfg, &t.plan)) return EXIT_FAIL;
    if (flush_open(&t.flush, &t.g, &err)) { fprintf(stderr, "gpt2gen tune: %s\n", err.msg); return EXIT_FAIL; }
    t.t0 = now_seconds();
    tune_db_load(&t.db, tune_db_path(t.a.env), stderr);
    t.scratch = xmalloc(sizeof *t.scratch);
    t.rep = open_memstream(&t.rep_text, &t.rep_len);
    fprintf(t.rep, "# gpt2gen tune %s on %s (%s), %s, B=%d T=%d; database %s\n", t.cfg.path, t.env.gpu, t.env.arch,
            precision_name(t.cfg.precision), t.cfg.train.batch_size, t.cfg.train.seq_len, tune_db_path(t.a.env));
    rc = run(&t);
    fprintf(t.rep, "tune took %.0f s%s\n", now_seconds() - t.t0, t.over_budget ? " (budget reached: some variants not measured)" : "");
    fclose(t.rep);
    fputs(t.rep_text, stdout);
    char path[1200];
    snprintf(path, sizeof path, "%s/tune_report.txt", t.plan.build_dir);
    if (write_file_atomic(path, t.rep_text, t.rep_len, &err)) fprintf(stderr, "gpt2gen tune: %s\n", err.msg);
    else printf("report: %s\n", path);
    free(t.rep_text);
    free(t.scratch);
    tune_db_free(&t.db);
    flush_close(&t.flush);
    cuda_device_close(&t.g.dev);
    return rc ? rc : t.failed ? EXIT_FAIL : 0;
}
