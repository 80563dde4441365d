/* attention_path: cuDNN's fused attention against the template with its tuned tiles, forward and backward on the
   attention workload, for attention = "auto" (see tuner.h). */
#include "tune/tuner.h"
#include "runtime/cuda/tune_api.h"
#include <stdlib.h>
#include <string.h>

/* times both paths on kernels img of plan (the default ones, with the tuned attention module); the faster correct one
   becomes the database's best record */
static void time_paths(Tuner *t, const Plan *plan, char *const *img) {
    Harness *g = &t->g;
    TuneKey key;
    tune_key_attention(&key, &t->env, &t->plan);
    char why[1024] = "";
    CudnnAttention *cd = cudnn_attention_open(g->B, g->T, g->NH, g->HS, t->cfg->model.precision, t->cfg->run.train.deterministic,
                                              t->o.env, why, sizeof why);
    if (!cd) {
        fprintf(t->rep, "attention path: the flash template (cuDNN: %s)\n", why);
        TuneRecord r;
        tuner_record(t, &r, "best", "attention", "path", "path=flash", "ok", 0, -1, &key);
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
    dptr ws = wsb ? harness_dalloc(g, wsb) : 0;
    if (kernels_load_images(&ks, plan, &g->dev, img, &err) == 0) {
        ks.sync_each = 0;
        for (int p = 0; p < 2; p++) {   /* 0: the template, 1: cuDNN */
            w.cudnn = p ? cd : NULL;
            w.cudnn_ws = p ? ws : 0;
            WlRun wr = {&w, g, &ks};
            if (workload_fill(&w, g, &err) || w.run(&w, g, &ks, &err) || harness_wait(g, &err) ||
                !(out[p] = workload_sample(&w, g, &n[p], &err)) ||
                measure_median(g, &t->flush, tuner_run_workload, &wr, &us[p], &err))
                us[p] = -1;
            TuneRecord r;
            r.us = us[p];
            snprintf(r.status, sizeof r.status, "%s", us[p] < 0 ? "launch" : "ok");
            tuner_progress(t, "attention", p ? "path=cudnn" : "path=flash", &r, 0);
        }
        kernels_unload(&ks);
    }
    size_t bad = 0;
    double e = out[0] && out[1] && n[0] == n[1] ? tuner_rel_diff(out[1], out[0], n[0], &bad) : 1;
    double tol = g->xs == 4 ? 1e-4 : 3e-2;   /* the GPU tests' tolerance between the two paths */
    if (us[1] > 0 && (bad || !(e <= tol))) {
        fprintf(t->rep, "attention path: cuDNN rejected: max error %.3g against the template (tolerance %.1g)\n", e, tol);
        us[1] = -1;
    }
    int cudnn_wins = us[1] > 0 && (us[0] < 0 || us[1] < us[0]);
    TuneRecord r;
    if (us[0] > 0 || us[1] > 0) {
        tuner_record(t, &r, "best", "attention", "path", cudnn_wins ? "path=cudnn" : "path=flash", "ok",
                     cudnn_wins ? us[1] : us[0], us[1] > 0 ? us[1] : us[0], &key);
        fprintf(t->rep, "attention path: cuDNN %.1f us, template (tuned tiles) %.1f us forward+backward: %s  (%s, default for "
                "attention = \"auto\": cuDNN)\n", us[1], us[0], cudnn_wins ? "cuDNN" : "the template", cudnn_attention_describe(cd));
    }
    free(out[0]);
    free(out[1]);
    cudnn_attention_close(cd);
    harness_dfree_all(g);
}

/* the plan's attention module, or -1 */
static int attention_module(const Plan *plan) {
    for (int i = 0; i < plan->n_families; i++)
        if (!strcmp(plan->families[i].decl->family, "attention")) return i;
    return -1;
}

void attention_path_sweep(Tuner *t, Plan *tuned, TuneApplied *ap) {
    char *img[PLAN_MAX_FAMILIES];   /* the default kernels' CUBINs, with the tuned attention module's */
    memcpy(img, t->img, sizeof img);
    int ai = attention_module(tuned);
    const FamilyVariants *fv = ai >= 0 ? &t->fv[ai] : NULL;
    for (int j = 0; fv && j < fv->n; j++)
        if (!memcmp(fv->v[j].v, tuned->families[ai].env.tun, sizeof fv->v[j].v) && fv->jobs[j].cubin)
            img[ai] = fv->jobs[j].cubin;
    Err err;
    *t->scratch = t->plan;
    if (ai >= 0 && plan_set_tunables(t->scratch, ai, tuned->families[ai].env.tun, "tune-db", &err) == 0)
        time_paths(t, t->scratch, img);
    tune_db_apply(&t->db, &t->env, tuned, t->cublaslt, &t->facts.facts, ap, stderr);
}
