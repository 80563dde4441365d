/* tune_apply: the variants `gpt2gen tune` sweeps, and what a build takes from the tuning database (tune_db.h). */
#include "gen/tune_db.h"
#include <stdlib.h>
#include <string.h>

void tune_variant_name(const PlanFamily *m, const int *values, char *out, size_t n) {
    out[0] = 0;
    for (int t = 0; t < m->n_tunables; t++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s=%d", t ? "," : "", m->decl->tunables[t].name, values[t]);
    }
    if (!m->n_tunables) snprintf(out, n, "none");
}

int tune_variant_parse(const PlanFamily *m, const char *name, int *values) {
    if (!m->n_tunables) return strcmp(name, "none") ? -1 : 0;
    int seen = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", name);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end;
        if (!eq) return -1;
        *eq = 0;
        long v = strtol(eq + 1, &end, 10);
        int t = 0;
        while (t < m->n_tunables && strcmp(m->decl->tunables[t].name, tok)) t++;
        if (t == m->n_tunables || *end || end == eq + 1 || v < -2147483647L || v > 2147483647L ||
            !tunable_allowed(&m->decl->tunables[t], (int)v) || (seen >> t & 1))
            return -1;
        values[t] = (int)v;
        seen |= 1 << t;
    }
    return seen == (1 << m->n_tunables) - 1 ? 0 : -1;
}

/* 1 when the declarations allow values for module m of plan */
static int variant_allowed(const Plan *plan, const PlanFamily *m, const int *values) {
    for (int t = 0; t < m->n_tunables; t++)
        if (!tunable_allowed(&m->decl->tunables[t], values[t])) return 0;
    KernelEnv env = kernel_env(&plan->model, &plan->step, m->decl, values);
    char why[512];
    if (m->decl->check && m->decl->check(&env, why, sizeof why)) return 0;
    for (const KernelDecl *k = m->decl->kernels; k < m->decl->kernels + FAMILY_MAX_KERNELS && k->name; k++) {
        LaunchDims d = k->geometry(&env, 1);
        if (k->size_param < 0 && kernel_dims_valid(&d)) return 0;
    }
    return 1;
}


int tune_variants(const Plan *plan, int fam, TuneVariant *out, int max, int *refused) {
    const PlanFamily *m = &plan->families[fam];
    int n = 0, idx[FAMILY_MAX_TUNABLES] = {0};
    *refused = 0;
    TuneVariant cur;
    memset(&cur, 0, sizeof cur);
    for (int t = 0; t < m->n_tunables; t++) cur.v[t] = m->tunables[t].value;
    if (max > 0) out[n++] = cur;   /* the plan's own values: the default the others are checked against */
    for (;;) {
        TuneVariant v;
        memset(&v, 0, sizeof v);
        for (int t = 0; t < m->n_tunables; t++) {
            const PlanTunable *pt = &m->tunables[t];
            v.v[t] = pt->n_candidates && !pt->fixed ? pt->candidates[idx[t]] : pt->value;
        }
        if (memcmp(&v, &cur, sizeof v)) {
            if (!variant_allowed(plan, m, v.v)) ++*refused;
            else if (n < max) out[n++] = v;
        }
        int t;   /* the next combination, the last tunable fastest */
        for (t = m->n_tunables - 1; t >= 0; t--) {
            int nc = m->tunables[t].n_candidates && !m->tunables[t].fixed ? m->tunables[t].n_candidates : 1;
            if (++idx[t] < nc) break;
            idx[t] = 0;
        }
        if (t < 0) break;
    }
    return n;
}

/* ---------------------------------------------------------------- matmul algorithms as variant strings */

#define ALGO_FIELDS 9
static const char *const algo_names[ALGO_FIELDS] = {"algo", "id", "tile", "stages", "splitk", "reduction", "swizzle",
                                                   "custom", "cluster"};
static int *algo_field(MatmulAlgoChoice *t, int i) {
    int *f[ALGO_FIELDS] = {&t->index, &t->id, &t->tile, &t->stages, &t->splitk, &t->reduction, &t->swizzle, &t->custom,
                           &t->cluster};
    return f[i];
}

void tune_algo_format(const MatmulAlgoChoice *t, char *out, size_t n) {
    MatmulAlgoChoice c = *t;
    out[0] = 0;
    for (int i = 0; i < ALGO_FIELDS; i++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s=%d", i ? "," : "", algo_names[i], *algo_field(&c, i));
    }
}

int tune_algo_parse(const char *variant, MatmulAlgoChoice *t) {
    memset(t, 0, sizeof *t);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", variant);
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), i++) {
        char *eq = strchr(tok, '='), *end;
        if (i >= ALGO_FIELDS || !eq) return -1;
        *eq = 0;
        long v = strtol(eq + 1, &end, 10);   /* cuBLASLt reports some fields as -1 (split-K: not set) */
        if (strcmp(tok, algo_names[i]) || *end || end == eq + 1 || v < -2147483647L || v > 2147483647L) return -1;
        if (i == 0 && (v < 0 || v >= MATMUL_ALGO_MAX)) return -1;   /* an index among cuBLASLt's results */
        *algo_field(t, i) = (int)v;
    }
    if (i != ALGO_FIELDS) return -1;
    t->set = 1;
    return 0;
}

/* ---------------------------------------------------------------- a build takes what the database chose */

/* shape and precision: the key fields that make a record another config's rather than an out-of-date one */
enum { KEY_SHAPE = 7, KEY_PRECISION = 8 };
static int same_config(const TuneKey *a, const TuneKey *b) {
    return !strcmp(a->f[KEY_SHAPE], b->f[KEY_SHAPE]) && !strcmp(a->f[KEY_PRECISION], b->f[KEY_PRECISION]);
}

/* A best record is a choice only when its variant passed (status=ok); one that says it was rejected is said and
   ignored. */
static int passed(const TuneDb *db, const TuneRecord *r, FILE *msgs) {
    if (!strcmp(r->status, "ok")) return 1;
    if (msgs) fprintf(msgs, "tune db %s:%d: %s %s: a best record of status=%s (a rejected variant, not a choice); "
                      "ignored\n", db->path, r->line, r->what, r->name, r->status);
    return 0;
}

/* A record of this config for another machine, library or template gets its own line; records of other shapes or
   precisions (other configs sharing the database) are counted, and said in one line at the end. */
static void say_stale(FILE *msgs, const TuneDb *db, const TuneRecord *r, const TuneKey *key, TuneApplied *out) {
    char diff[256];
    tune_key_diff(&r->key, key, diff, sizeof diff);
    out->stale++;
    if (!same_config(&r->key, key)) {
        if (!out->other_config++) snprintf(out->other_example, sizeof out->other_example, "line %d, %s %s: %s", r->line,
                                           r->what, r->name, diff);
        return;
    }
    if (msgs) fprintf(msgs, "tune db %s:%d: %s %s is for %s; ignored\n", db->path, r->line, r->what, r->name, diff);
}

static void apply_kernels(const TuneDb *db, const TuneEnv *env, Plan *plan, TuneApplied *out, FILE *msgs) {
    for (int i = 0; i < plan->n_families; i++) {
        PlanFamily *m = &plan->families[i];
        TuneKey key;
        tune_key_kernel(&key, env, plan, i);
        const TuneRecord *stale, *r = tune_db_find(db, "best", "kernel", m->decl->family, NULL, &key, &stale);
        if (!r) { if (stale) say_stale(msgs, db, stale, &key, out); continue; }
        if (!passed(db, r, msgs)) continue;
        int values[FAMILY_MAX_TUNABLES] = {0};
        if (tune_variant_parse(m, r->variant, values)) {
            if (msgs) fprintf(msgs, "tune db %s:%d: kernel %s: '%s' does not name every tunable of %s with an allowed "
                              "value; ignored\n", db->path, r->line, m->decl->family, r->variant, m->decl->template_path);
            continue;
        }
        int config_set = 0;   /* the config's own tune values win */
        for (int t = 0; t < m->n_tunables; t++)
            if (!strcmp(m->tunables[t].origin, "config")) { values[t] = m->tunables[t].value; config_set++; }
        Err err;
        if (plan_set_tunables(plan, i, values, "tune-db", &err)) {
            if (msgs) fprintf(msgs, "tune db %s:%d: kernel %s: %s; ignored\n", db->path, r->line, m->decl->family, err.msg);
            continue;
        }
        out->overridden += config_set;
        out->kernels++;
    }
}

static void apply_matmuls(const TuneDb *db, const TuneEnv *env, Plan *plan, const char *cublaslt, TuneApplied *out,
                          FILE *msgs) {
    for (int i = 0; i < MM_COUNT; i++) {
        PlanMatmul *m = &plan->matmuls[i];
        TuneKey key;
        tune_key_matmul(&key, env, plan, i, cublaslt);
        char name[64];
        tune_db_name(m->name, name, sizeof name);
        const TuneRecord *stale, *r = tune_db_find(db, "best", "matmul", name, NULL, &key, &stale);
        if (!r) { if (stale) say_stale(msgs, db, stale, &key, out); continue; }
        if (!passed(db, r, msgs)) continue;
        MatmulAlgoChoice a;
        if (tune_algo_parse(r->variant, &a)) {
            if (msgs) fprintf(msgs, "tune db %s:%d: matmul %s: '%s' is not a cuBLASLt algorithm (algo= is an index "
                              "from 0 to %d among its heuristics, then id= to cluster=); ignored\n", db->path, r->line,
                              m->name, r->variant, MATMUL_ALGO_MAX - 1);
            continue;
        }
        a.m = m->m; a.n = m->n; a.k = m->k; a.batch = m->batch;
        m->algo = a;
        out->matmuls++;
    }
}

/* The database's GELU path for a training plan whose config leaves it to the plan (train.gelu = "auto"); before the
   matmuls, whose names it changes */
static void apply_gelu(const TuneDb *db, const TuneEnv *env, Plan *plan, TuneApplied *out, FILE *msgs) {
    if (plan->step.kind != STEP_TRAIN || strcmp(plan->gelu_origin, "auto")) return;
    TuneKey key;
    tune_key_gelu(&key, env, plan);
    const TuneRecord *stale, *r = tune_db_find(db, "best", "gelu", "path", NULL, &key, &stale);
    if (!r) { if (stale) say_stale(msgs, db, stale, &key, out); return; }
    if (!passed(db, r, msgs)) return;
    out->gelu_path = GELU_AUTO;
    for (GeluPath g = GELU_EPILOGUE; g <= GELU_FUSED; g++) {
        char v[32];
        snprintf(v, sizeof v, "path=%s", gelu_path_name(g));
        if (!strcmp(r->variant, v)) out->gelu_path = g;
    }
    if (out->gelu_path == GELU_AUTO) {
        if (msgs) fprintf(msgs, "tune db %s:%d: gelu: '%s' is not path=epilogue, path=kernel, path=split or path=fused; "
                          "ignored\n", db->path, r->line, r->variant);
        return;
    }
    if (gelu_fused(out->gelu_path) && !fc_gemm_fits(&plan->model, &plan->step, atoi(plan->arch + 3))) {
        if (msgs) fprintf(msgs, "tune db %s:%d: gelu: path=fused does not run on %s in %s; ignored\n", db->path, r->line,
                          plan->arch, precision_name(plan->step.precision));
        out->gelu_path = GELU_AUTO;
        return;
    }
    out->gelu = 1;
    plan_set_gelu(plan, out->gelu_path, "tuning database");
}

/* The database's attention path for a plan whose config leaves it to the plan (attention = "auto"; again where an
   earlier application set it), decided with facts: where its cuDNN cannot serve, the template runs, and msgs says so.
   0 where the database names none for it. */
static int apply_attention(const TuneDb *db, const TuneEnv *env, Plan *plan, const PlanFacts *facts, TuneApplied *out,
                           FILE *msgs) {
    TuneKey key;
    tune_key_attention(&key, env, plan);
    const TuneRecord *stale, *r = tune_db_find(db, "best", "attention", "path", NULL, &key, &stale);
    if (!r && stale) say_stale(msgs, db, stale, &key, out);
    if (!r || (strcmp(plan->attention_origin, "auto") && strcmp(plan->attention_origin, "tuning database")) ||
        !passed(db, r, msgs))
        return 0;
    AttentionPath path = !strcmp(r->variant, "path=cudnn") ? ATTN_CUDNN : !strcmp(r->variant, "path=flash") ? ATTN_FLASH
                                                                                                            : ATTN_AUTO;
    if (path == ATTN_AUTO) {
        if (msgs) fprintf(msgs, "tune db %s:%d: attention: '%s' is not path=cudnn or path=flash; ignored\n", db->path,
                          r->line, r->variant);
        return 0;
    }
    plan->attention_asked = path;
    plan->attention_origin = "tuning database";
    Err never;   /* only the config's own "cudnn" is ever refused */
    plan_decide_attention(plan, facts, &never);
    if (plan->attention != path && msgs)
        fprintf(msgs, "tune db %s:%d: attention: the flash template runs, %s\n", db->path, r->line, plan->attention_why);
    out->attention = 1;
    out->attention_path = plan->attention;
    return 1;
}

/* the attention family's tunable values (zeros without it): attention = "auto" follows them (plan_attention.c) */
static void attention_tunables(const Plan *plan, int *tun) {
    memset(tun, 0, FAMILY_MAX_TUNABLES * sizeof *tun);
    for (int i = 0; i < plan->n_families; i++)
        if (!strcmp(plan->families[i].decl->family, "attention")) memcpy(tun, plan->families[i].env.tun, FAMILY_MAX_TUNABLES * sizeof *tun);
}

void tune_db_apply(const TuneDb *db, const TuneEnv *env, Plan *plan, const char *cublaslt, const PlanFacts *facts,
                   TuneApplied *out, FILE *msgs) {
    memset(out, 0, sizeof *out);
    int before[FAMILY_MAX_TUNABLES], after[FAMILY_MAX_TUNABLES];
    attention_tunables(plan, before);
    apply_kernels(db, env, plan, out, msgs);
    attention_tunables(plan, after);
    apply_gelu(db, env, plan, out, msgs);
    apply_matmuls(db, env, plan, cublaslt, out, msgs);
    Err never;   /* "auto" is never refused */
    if (!apply_attention(db, env, plan, facts, out, msgs) && !strcmp(plan->attention_origin, "auto") &&
        memcmp(before, after, sizeof before))
        plan_decide_attention(plan, facts, &never);   /* the database's attention tiles: wgmma's or not */
    if (out->other_config && msgs)
        fprintf(msgs, "tune db %s: %d record%s for other shapes or precisions ignored (e.g. %s)\n", db->path,
                out->other_config, out->other_config == 1 ? "" : "s", out->other_example);
}
