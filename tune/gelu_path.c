/* gelu_path: for train.gelu = "auto", the training step's GELU in cuBLASLt's epilogues against our kernels beside
   plain bias epilogues (gen/config.h, GeluPath), timed as whole steps of the tuned plan: what the choice changes (two
   matmuls' epilogues, two kernels, the fc bias gradient's pass) is spread over the step (see tuner.h). The matmul sweep
   tuned the plan's own path's fc and fcproj-dinp entries (their names say which epilogue); the other path's run with
   the database's algorithms where an earlier tune left some, else cuBLASLt's first heuristic: a bias towards the
   plan's path, which the report's line makes visible by naming it. */
#include "tune/tuner.h"
#include "tune/measure.h"
#include <stdio.h>
#include <string.h>

void sweep_gelu_path(Tuner *t, Plan *tuned, TuneApplied *ap) {
    static const GeluPath paths[2] = {GELU_EPILOGUE, GELU_KERNEL};
    static const char *const variants[2] = {"path=epilogue", "path=kernel"};
    TuneKey key;
    tune_key_gelu(&key, &t->env, &t->plan);
    double ms[2] = {-1, -1};
    float losses[2][3] = {{0}};
    for (int p = 0; p < 2; p++) {
        Plan *q = t->scratch;   /* the tuned plan with this path, and the database's algorithms for its matmuls */
        *q = t->plan;
        q->gelu = paths[p];
        q->gelu_origin = "tune";
        matmuls_set_gelu(q->matmuls, &q->model, &q->step, paths[p] == GELU_KERNEL);
        TuneApplied unused;
        tune_db_apply(&t->db, &t->env, q, t->cublaslt, &unused, NULL);
        Err err;
        TuneRecord r = {0};
        if (step_time(q, t->o.env, 10, &ms[p], losses[p], &err)) {
            fprintf(t->rep, "gelu path %s: %s\n", variants[p], err.msg);
            ms[p] = -1;
        }
        r.us = ms[p] * 1000.0;
        snprintf(r.status, sizeof r.status, "%s", ms[p] < 0 ? "launch" : "ok");
        tuner_progress(t, "gelu", variants[p], &r, 0);
    }
    /* the two paths compute the same step: their first losses agree as a tuned step's must (measure.h) */
    double worst, tol;
    if (ms[0] > 0 && ms[1] > 0 && !steps_agree(t->cfg->precision, losses[0], losses[1], &worst, &tol)) {
        fprintf(t->rep, "gelu path: the kernel path rejected: its first 3 losses differ from the epilogue's by %.2e "
                "(relative, tolerance %.0e)\n", worst, tol);
        ms[1] = -1;
    }
    if (ms[0] > 0 || ms[1] > 0) {
        int k = ms[1] > 0 && (ms[0] < 0 || ms[1] < ms[0]);
        int d = t->plan.gelu == GELU_KERNEL;   /* the path "auto" takes without the database */
        TuneRecord r;
        tuner_record(t, &r, "best", "gelu", "path", variants[k], "ok", ms[k] * 1000.0, ms[d] > 0 ? ms[d] * 1000.0 : -1, &key);
        fprintf(t->rep, "gelu path: epilogues %.2f ms/step, kernels %.2f ms/step: %s (default for this shape: %s)\n", ms[0],
                ms[1], k ? "the kernels" : "the epilogues", gelu_path_name(t->plan.gelu));
    }
    /* tuned again from the untuned plan, as a build will make it: the database's records, this choice with them */
    *tuned = t->plan;
    tune_db_apply(&t->db, &t->env, tuned, t->cublaslt, ap, stderr);
}
