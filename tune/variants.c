/* variants: which variants of a plan's kernel family `gpt2gen tune` sweeps (families.h): every combination of its
   tunables' candidates that the declarations allow (gen/tune_db.h, tune_variants), narrowed by what the family's
   entry says of its kernels: a plan without a backward varies only the tunables of the kernels it runs, and a
   family of independent kernels one group of tunables at a time, then the groups' best together. */
#include "tune/families.h"
#include <stdlib.h>
#include <string.h>

/* the index of the group of list (groups ';'-separated, names ',' within one) that names name; -1: none */
static int group_of(const char *list, const char *name) {
    size_t len = strlen(name);
    int g = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",;");
        if (n == len && !strncmp(p, name, len)) return g;
        p += n;
        if (*p == ';') g++;
        if (*p) p++;
    }
    return -1;
}

static int n_groups(const char *groups) {
    int n = 1;
    for (const char *p = groups; *p; p++) n += *p == ';';
    return n;
}

/* 1 when the sweep of plan's family m varies tunable t in group g (g -1: no groups) */
static int varies(const Plan *plan, const PlanFamily *m, const FamilyEntry *f, int t, int g) {
    const char *name = m->decl->tunables[t].name;
    if (plan->step.kind != STEP_TRAIN && f && f->forward && group_of(f->forward, name) < 0) return 0;
    return g < 0 || group_of(f->groups, name) == g;
}

int tune_sweep_variants(const Plan *plan, int fam, TuneVariant *out, int max, int *refused) {
    const PlanFamily *m = &plan->families[fam];
    const FamilyEntry *f = tune_family(m->decl->family);
    int groups = f && f->groups ? n_groups(f->groups) : 0, n = 0;
    Plan *p = xmalloc(sizeof *p);
    TuneVariant *some = xmalloc(sizeof *some * (size_t)(max > 0 ? max : 1));
    *refused = 0;
    for (int g = groups ? 0 : -1; g < groups; g++) {
        *p = *plan;   /* the tunables this group does not vary are fixed at the plan's values */
        for (int t = 0; t < m->n_tunables; t++)
            if (!varies(plan, m, f, t, g)) p->families[fam].tunables[t].fixed = 1;
        int r, k = tune_variants(p, fam, some, max, &r);
        *refused += r;
        for (int j = 0; j < k; j++) {   /* each once: every group's sweep starts with the plan's own values */
            int seen = 0;
            for (int i = 0; i < n && !seen; i++) seen = !memcmp(&out[i], &some[j], sizeof out[i]);
            if (!seen && n < max) out[n++] = some[j];
        }
    }
    free(some);
    free(p);
    return n;
}

int tune_group_best(const Plan *plan, int fam, const TuneVariant *v, const double *us, int n, TuneVariant *best) {
    const PlanFamily *m = &plan->families[fam];
    const FamilyEntry *f = tune_family(m->decl->family);
    if (!f || !f->groups || n < 1 || !(us[0] > 0)) return 0;
    int groups = n_groups(f->groups), fastest[64];
    for (int g = 0; g < groups && g < 64; g++) fastest[g] = 0;   /* the plan's own values, in every group */
    for (int j = 1; j < n; j++) {
        int t = 0;
        while (t < m->n_tunables && v[j].v[t] == v[0].v[t]) t++;
        int g = t < m->n_tunables ? group_of(f->groups, m->decl->tunables[t].name) : -1;
        if (g >= 0 && g < 64 && us[j] > 0 && us[j] < us[fastest[g]]) fastest[g] = j;
    }
    *best = v[0];
    int changed = 0;
    for (int g = 0; g < groups && g < 64; g++) {
        if (!fastest[g]) continue;
        changed++;
        for (int t = 0; t < m->n_tunables; t++)
            if (group_of(f->groups, m->decl->tunables[t].name) == g) best->v[t] = v[fastest[g]].v[t];
    }
    for (int j = 0; j < n; j++)   /* one group's best alone was swept already */
        if (!memcmp(&v[j], best, sizeof *best)) return 0;
    return changed >= 2;
}
