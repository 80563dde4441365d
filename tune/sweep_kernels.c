/* sweep_kernels: every variant of every kernel family compiled (in parallel, through the kernel cache), run on its
   family's workload, held against the default variant's outputs and timed (see tuner.h). */
#include "tune/tuner.h"
#include "tune/families.h"
#include "gen/emit.h"
#include "common/clock.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the variants of family i of plan to sweep (those of a family the globs match, else the default alone) */
static int family_variants(Tuner *t, const Plan *plan, int i, TuneVariant *v, int *refused) {
    int n = tuner_matches(t, plan->families[i].decl->family) ? tune_sweep_variants(plan, i, v, TUNE_MAX_VARIANTS, refused) : 1;
    if (n == 1) tune_variants(plan, i, v, 1, refused);
    return n;
}

int sweep_kernels_count(Tuner *t, const Plan *plan) {
    TuneVariant *v = xmalloc(sizeof *v * TUNE_MAX_VARIANTS);
    int n = 0, refused;
    for (int i = 0; i < plan->n_families; i++) n += family_variants(t, plan, i, v, &refused);
    free(v);
    return n;
}

void sweep_kernels_list(Tuner *t) {
    memset(t->fv, 0, sizeof t->fv);
    for (int i = 0; i < t->plan.n_families; i++) t->fv[i].n = family_variants(t, &t->plan, i, t->fv[i].v, &t->fv[i].refused);
}

int sweep_kernels_compile(Tuner *t, Err *err) {
    FamilyVariants *fv = t->fv;
    int total = 0;
    for (int i = 0; i < t->plan.n_families; i++) total += fv[i].n;
    CompileJob *flat = xcalloc((size_t)total, sizeof *flat);
    int k = 0;
    for (int i = 0; i < t->plan.n_families; i++) {
        fv[i].jobs = flat + k;
        fv[i].sources = xcalloc((size_t)fv[i].n, sizeof(char *));
        for (int j = 0; j < fv[i].n; j++, k++) {
            Err e;
            *t->scratch = t->plan;
            flat[k].name = t->plan.families[i].decl->family;
            if (plan_set_tunables(t->scratch, i, fv[i].v[j].v, "tune-db", &e) == 0)
                fv[i].sources[j] = emit_family(t->scratch, &t->scratch->families[i], env_or_defaults(t->o.env)->templates, &e);
            flat[k].source = fv[i].sources[j] ? fv[i].sources[j] : "#error the variant could not be emitted\n";
            flat[k].source_path = t->plan.families[i].source_path;
            flat[k].arch = t->plan.arch;
        }
    }
    double t0 = now_seconds();
    fprintf(stderr, "tune: compiling %d variants of %d kernel families (through the cache %s)\n", total,
            t->plan.n_families, nvrtc_cache_dir(t->o.env));
    Err e;
    nvrtc_compile_all(flat, total, t->o.env, t->o.jobs > 0 ? t->o.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN), &e);
    int cached = 0;
    for (int i = 0; i < total; i++) cached += flat[i].from_cache;
    fprintf(stderr, "tune: compiled in %.1f s (%d from the cache)\n", now_seconds() - t0, cached);
    for (int i = 0; i < t->plan.n_families; i++) {
        if (!fv[i].jobs[0].cubin)
            return err_set(err, "the default %s kernels do not compile: %s", t->plan.families[i].decl->family,
                           fv[i].jobs[0].err.msg);
        t->img[i] = fv[i].jobs[0].cubin;
    }
    return 0;
}

void sweep_kernels_free(Tuner *t) {
    for (int i = 0; i < t->plan.n_families; i++) {
        for (int j = 0; t->fv[i].sources && j < t->fv[i].n; j++) { free(t->fv[i].jobs[j].cubin); free(t->fv[i].sources[j]); }
        free(t->fv[i].sources);
    }
    free(t->fv[0].jobs);
    memset(t->fv, 0, sizeof t->fv);
    memset(t->img, 0, sizeof t->img);
}

/* loads the variant's kernels (the other families' defaults), runs the workload once from its fill, samples its
   outputs; NULL and err when something failed */
static float *run_variant(Tuner *t, int fam, const TuneVariant *v, const char *cubin, Workload *w, Kernels *ks,
                          size_t *n, Err *err) {
    memset(ks, 0, sizeof *ks);
    *t->scratch = t->plan;
    if (plan_set_tunables(t->scratch, fam, v->v, "tune-db", err)) return NULL;
    char *img[PLAN_MAX_FAMILIES];
    memcpy(img, t->img, sizeof img);
    img[fam] = (char *)cubin;
    if (kernels_load_images(ks, t->scratch, &t->g.dev, img, err)) return NULL;
    ks->sync_each = 0;
    if (workload_fill(w, &t->g, err) || w->run(w, &t->g, ks, err) || harness_wait(&t->g, err)) return NULL;
    return workload_sample(w, &t->g, n, err);
}

/* measures variant v (compiled by job) against the default's outputs ref: its status, and its time in *us when "ok" */
static const char *measure_variant(Tuner *t, int i, const TuneVariant *v, const CompileJob *job, Workload *w,
                                   const float *ref, size_t nref, double *us, Err *err) {
    if (!job->cubin) {
        snprintf(err->msg, sizeof err->msg, "%.300s", job->err.msg);
        return "compile";
    }
    Kernels ks;
    size_t n = 0, bad = 0;
    const char *status = "ok";
    float *got = run_variant(t, i, v, job->cubin, w, &ks, &n, err);
    double e = got && n == nref ? tuner_rel_diff(got, ref, n, &bad) : 0;
    if (!got) status = "launch";
    else if (n != nref || bad || !(e <= t->g.tol)) {
        status = "mismatch";
        snprintf(err->msg, sizeof err->msg, "max error %.3g against the default (tolerance %.1g), %zu not finite", e,
                 t->g.tol, bad);
    } else {
        WlRun wr = {w, &t->g, &ks};
        if (measure_median(&t->g, &t->flush, tuner_run_workload, &wr, us, err)) status = "launch";
    }
    free(got);
    kernels_unload(&ks);
    return status;
}

/* a family's sweep: its workload, the default's outputs, its key; so far the best and the default variant's
   times, each variant's (us, <= 0: rejected or not timed), the counts, the rejected variants' lines */
typedef struct {
    Workload w;
    float *ref;
    size_t nref;
    TuneKey key;
    double best_us, default_us, *us;
    TuneVariant best_v;
    int best, ok, rejected, reused_n, combined;   /* combined: the groups' best together was swept too */
    char rejects[2048];
} Sweep;

/* measures variant v (named name) that no earlier tune measured, into *r; a rejected one gets its line, and a
   launch that faulted the GPU's context sets t->lost */
static void measure_new(Tuner *t, int i, const TuneVariant *v, const CompileJob *job, const char *name, Sweep *s,
                        TuneRecord *r) {
    const char *fam = t->plan.families[i].decl->family;
    double us = 0;
    Err err = {{0}};
    const char *status = measure_variant(t, i, v, job, &s->w, s->ref, s->nref, &us, &err);
    tuner_record(t, r, "measure", "kernel", fam, name, status, us, -1, &s->key);
    if (strcmp(status, "ok")) {
        size_t len = strlen(s->rejects);
        snprintf(s->rejects + len, sizeof s->rejects - len, "  rejected %s %s: %s: %.200s\n", fam, name, status, err.msg);
    }
    Err probe;
    if (!strcmp(status, "launch") && harness_wait(&t->g, &probe))   /* a fault: every later call would fail too */
        snprintf(t->lost, sizeof t->lost, "%s variant %.200s: %.300s", fam, name, err.msg);
}

/* variant j (v, compiled by job; j 0 the default) measured, or taken from the database where an earlier tune did,
   into the sweep */
static void sweep_variant(Tuner *t, int i, int j, const TuneVariant *v, const CompileJob *job, Sweep *s) {
    const PlanFamily *m = &t->plan.families[i];
    char name[256];
    tune_variant_name(m, v->v, name, sizeof name);
    const TuneRecord *old = tuner_measured(t, "kernel", m->decl->family, name, &s->key);
    TuneRecord r;
    if (old) { r = *old; s->reused_n++; }
    else {
        if (j > 0 && !tuner_budget_left(t)) return;
        measure_new(t, i, v, job, name, s, &r);
    }
    tuner_progress(t, m->decl->family, name, &r, old != NULL);
    if (t->lost[0]) return;
    if (strcmp(r.status, "ok")) { s->rejected++; return; }
    s->ok++;
    if (j < t->fv[i].n) s->us[j] = r.us;
    if (j == 0) s->default_us = r.us;
    if (s->best < 0 || r.us < s->best_us) { s->best = j; s->best_us = r.us; s->best_v = *v; }
}

/* a family swept by groups (families.h): every group's fastest variant together, compiled and timed too where
   that is none of the variants swept */
static void sweep_group_best(Tuner *t, int i, Sweep *s) {
    FamilyVariants *fv = &t->fv[i];
    TuneVariant v;
    if (!tune_group_best(&t->plan, i, fv->v, s->us, fv->n, &v)) return;
    CompileJob job;
    memset(&job, 0, sizeof job);
    char *source = NULL, name[256];
    tune_variant_name(&t->plan.families[i], v.v, name, sizeof name);
    Err e = {{0}};
    *t->scratch = t->plan;
    if (tuner_measured(t, "kernel", t->plan.families[i].decl->family, name, &s->key)) {
        /* an earlier tune timed it: sweep_variant takes its record */
    } else if (plan_set_tunables(t->scratch, i, v.v, "tune-db", &e) == 0 &&
               (source = emit_family(t->scratch, &t->scratch->families[i], env_or_defaults(t->o.env)->templates, &e))) {
        job = (CompileJob){.name = t->plan.families[i].decl->family, .source = source,
                           .source_path = t->plan.families[i].source_path, .arch = t->plan.arch};
        nvrtc_compile_all(&job, 1, t->o.env, 1, &e);
    } else snprintf(job.err.msg, sizeof job.err.msg, "the groups' best together: %.400s", e.msg);
    t->total++;
    s->combined = 1;
    sweep_variant(t, i, fv->n, &v, &job, s);
    free(job.cubin);
    free(source);
}

/* the family's report line, and its best variant recorded where one could be timed */
static void report_family(Tuner *t, int i, const char *dname, const Sweep *s) {
    const PlanFamily *m = &t->plan.families[i];
    FamilyVariants *fv = &t->fv[i];
    const char *fam = m->decl->family;
    char name[256];
    if (t->lost[0]) {
        fprintf(t->rep, "kernel %-12s stopped: %s broke the GPU's context\n%s", fam, t->lost, s->rejects);
        return;
    }
    if (s->best < 0 || s->default_us <= 0) {
        fprintf(t->rep, "kernel %-12s no variant could be timed; default kept\n%s", fam, s->rejects);
        return;
    }
    tune_variant_name(m, s->best_v.v, name, sizeof name);
    TuneRecord r;
    tuner_record(t, &r, "best", "kernel", fam, name, "ok", s->best_us, s->default_us, &s->key);
    fprintf(t->rep, "kernel %-12s default %-40s %10.1f us  chosen %-40s %10.1f us  %5.2fx  (%d variants: %d ok, %d rejected, "
            "%d refused by the constraints%s)\n%s", fam, dname, s->default_us, name, s->best_us, s->default_us / s->best_us,
            fv->n + s->combined, s->ok, s->rejected, fv->refused, s->reused_n ? ", some measured by an earlier tune" : "", s->rejects);
}

/* the workload of family i and the default variant's outputs on it into s; -1 (reported) when there is none */
static int sweep_start(Tuner *t, int i, Sweep *s, const char *dname) {
    const PlanFamily *m = &t->plan.families[i];
    FamilyVariants *fv = &t->fv[i];
    const char *fam = m->decl->family;
    tune_key_kernel(&s->key, &t->env, &t->plan, i);
    int max_tun[FAMILY_MAX_TUNABLES] = {0};
    for (int j = 0; j < fv->n; j++)
        for (int k = 0; k < m->n_tunables; k++)
            if (fv->v[j].v[k] > max_tun[k]) max_tun[k] = fv->v[j].v[k];
    char why[256];
    if (workload_setup(&s->w, &t->g, fam, max_tun, why, sizeof why)) {
        fprintf(t->rep, "kernel %-12s %s: %s; default kept\n", fam, dname, why);
        t->done += fv->n;
        return -1;
    }
    Kernels ks;
    Err err = {{0}};
    s->ref = run_variant(t, i, &fv->v[0], t->img[i], &s->w, &ks, &s->nref, &err);
    kernels_unload(&ks);
    if (!s->ref) {
        fprintf(t->rep, "kernel %-12s the default variant %s fails: %s; not tuned\n", fam, dname, err.msg);
        t->failed++;
        harness_dfree_all(&t->g);
        return -1;
    }
    return 0;
}

static void sweep_family(Tuner *t, int i) {
    FamilyVariants *fv = &t->fv[i];
    Sweep *s = xcalloc(1, sizeof *s);
    char dname[256];
    tune_variant_name(&t->plan.families[i], fv->v[0].v, dname, sizeof dname);
    if (sweep_start(t, i, s, dname) == 0) {
        s->best = -1;
        s->default_us = -1;
        s->us = xcalloc((size_t)fv->n, sizeof *s->us);
        for (int j = 0; j < fv->n && !t->lost[0]; j++) sweep_variant(t, i, j, &fv->v[j], &fv->jobs[j], s);
        if (!t->lost[0]) sweep_group_best(t, i, s);
        free(s->ref);
        free(s->us);
        harness_dfree_all(&t->g);
        report_family(t, i, dname, s);
    }
    free(s);
}

/* those with fewer variants first: a budget that runs out leaves the longest sweeps short, not the cheap ones */
void sweep_kernels(Tuner *t) {
    int order[PLAN_MAX_FAMILIES];
    for (int i = 0; i < t->plan.n_families; i++) {
        int j = i;
        for (; j > 0 && t->fv[order[j - 1]].n > t->fv[i].n; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int k = 0; k < t->plan.n_families; k++) {
        int i = order[k];
        if (!tuner_matches(t, t->plan.families[i].decl->family)) continue;
        if (t->lost[0]) break;
        sweep_family(t, i);
        fflush(t->rep);
    }
}
