/* gelu_path: for train.gelu = "auto", the training step's GELU in cuBLASLt's epilogues, in our kernels beside plain
   bias epilogues, split (our kernel forward, the DGELU epilogue backward), and fused into our own fc-shaped matmuls
   where they run (Hopper, 16 bits: gen/kernels.c, fc_gemm_fits) (gen/config.h, GeluPath), timed as whole
   steps of the tuned plan: what the choice changes (two matmuls' epilogues, two kernels, the fc bias gradient's pass)
   is spread over the step (see tuner.h). The matmul sweep tuned the plan's own path's fc and fcproj-dinp entries
   (their names say which epilogue); the other paths' run with the database's algorithms where an earlier tune left
   some, else cuBLASLt's first heuristic: a bias towards the plan's path, which the report's line makes visible by
   naming it. */
#include "tune/tuner.h"
#include "tune/measure.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gelu_path_sweep(Tuner *t, Plan *tuned, TuneApplied *ap) {
    enum { NPATHS = 4 };
    static const GeluPath paths[NPATHS] = {GELU_EPILOGUE, GELU_KERNEL, GELU_SPLIT, GELU_FUSED};
    static const char *const variants[NPATHS] = {"path=epilogue", "path=kernel", "path=split", "path=fused"};
    TuneKey key;
    tune_key_gelu(&key, &t->env, &t->plan);
    double ms[NPATHS] = {-1, -1, -1, -1};
    float losses[NPATHS][3] = {{0}};
    int fused_fits = fc_gemm_fits(&t->plan.model, &t->plan.step, atoi(t->plan.arch + 3));
    for (int p = 0; p < NPATHS; p++) {
        if (gelu_fused(paths[p]) && !fused_fits) continue;
        Plan *q = t->scratch;   /* the tuned plan with this path, and the database's algorithms for its matmuls */
        *q = t->plan;
        plan_set_gelu(q, paths[p], "tune");
        TuneApplied unused;
        tune_db_apply(&t->db, &t->env, q, t->cublaslt, &t->facts.facts, &unused, NULL);
        Err err;
        TuneRecord r = {0};
        if (measure_step_time(q, t->o.env, 10, &ms[p], losses[p], &err)) {
            fprintf(t->rep, "gelu path %s: %s\n", variants[p], err.msg);
            ms[p] = -1;
        }
        r.us = ms[p] * 1000.0;
        snprintf(r.status, sizeof r.status, "%s", ms[p] < 0 ? "launch" : "ok");
        tuner_progress(t, "gelu", variants[p], &r, 0);
    }
    /* the paths compute the same step: the others' first losses agree with the epilogues' as a tuned step's must
       (measure.h); without the epilogues' losses, with the kernels' */
    int ref = ms[0] > 0 ? 0 : 1;
    for (int p = 0; p < NPATHS; p++) {
        double worst, tol;
        if (p != ref && ms[p] > 0 && ms[ref] > 0 && !measure_steps_agree(t->cfg->model.precision, losses[ref], losses[p], &worst, &tol)) {
            fprintf(t->rep, "gelu path: %s rejected: its first 3 losses differ from %s's by %.2e (relative, tolerance "
                    "%.0e)\n", variants[p], variants[ref], worst, tol);
            ms[p] = -1;
        }
    }
    int best = -1, d = -1;   /* d: the path "auto" takes without the database */
    for (int p = 0; p < NPATHS; p++) {
        if (ms[p] > 0 && (best < 0 || ms[p] < ms[best])) best = p;
        if (paths[p] == t->plan.gelu) d = p;
    }
    if (best >= 0) {
        TuneRecord r;
        tuner_record(t, &r, "best", "gelu", "path", variants[best], "ok", ms[best] * 1000.0,
                     d >= 0 && ms[d] > 0 ? ms[d] * 1000.0 : -1, &key);
        fprintf(t->rep, "gelu path: epilogues %.2f ms/step, kernels %.2f, split (kernel forward, epilogue backward) "
                "%.2f, fused %.2f: %s (default for this shape: %s)\n", ms[0], ms[1], ms[2], ms[3],
                gelu_path_name(paths[best]), gelu_path_name(t->plan.gelu));
    }
    /* tuned again from the untuned plan, as a build will make it: the database's records, this choice with them */
    *tuned = t->plan;
    tune_db_apply(&t->db, &t->env, tuned, t->cublaslt, &t->facts.facts, ap, stderr);
}
