/* plans: a command's plan set (gen/planset.h), made with what this machine adds to the config: the arch, the
   tuning database (gen/tune_db.h) and the GPU's facts. Every command that runs a model makes its plans here. */
#include "cli/commands.h"
#include "common/files.h"
#include "runtime/gpu.h"
#include <stdio.h>
#include <string.h>

/* "3 kernel families, 15 matmuls, the GELU (kernel) and the attention path" */
static void applied_list(const TuneApplied *ap, char *out, size_t n) {
    char parts[4][64];
    int k = 0;
    if (ap->kernels) snprintf(parts[k++], sizeof parts[0], "%d kernel famil%s", ap->kernels, ap->kernels == 1 ? "y" : "ies");
    if (ap->matmuls) snprintf(parts[k++], sizeof parts[0], "%d matmul%s", ap->matmuls, ap->matmuls == 1 ? "" : "s");
    if (ap->gelu) snprintf(parts[k++], sizeof parts[0], "the GELU (%s)", gelu_path_name(ap->gelu_path));
    if (ap->attention) snprintf(parts[k++], sizeof parts[0], "the attention path (%s)", attention_name(ap->attention_path));
    out[0] = 0;
    for (int i = 0; i < k; i++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s", i == 0 ? "" : i == k - 1 ? " and " : ", ", parts[i]);
    }
}

/* What the database gave the first plan, in one line on t->say (only where it gave something, with
   t->only_applied). */
static void say_applied(const CliTuning *t, const char *path, const TuneDb *db, const TuneApplied *ap, const char *gpu) {
    char what[256], extra[128] = "";
    applied_list(ap, what, sizeof what);
    if (!t->say || (t->only_applied && !what[0])) return;
    if (ap->overridden)
        snprintf(extra, sizeof extra, "; %d tunable%s set by the config kept", ap->overridden, ap->overridden == 1 ? "" : "s");
    if (what[0]) fprintf(t->say, "tune db %s: %s from the database, for %s%s\n", path, what, gpu, extra);
    else fprintf(t->say, "tune db %s: nothing for this config on %s%s; default variants\n", path, gpu,
                 ap->stale || db->corrupt ? " (stale or corrupt entries ignored)" : "");
}

/* The plans without the database, saying why on t->say (not with only_applied). */
static int untuned(const Config *cfg, const PlanRequest *req, PlanInputs *in, const CliTuning *t, const char *note,
                   PlanSet *ps, Err *err) {
    if (note && t->say && !t->only_applied) fprintf(t->say, "tune db %s: %s\n", tune_db_path(t->env), note);
    return planset_make(ps, cfg, req, in, NULL, err);
}

int cli_plans(const Config *cfg, const PlanRequest *req, const char *arch, const CliTuning *t, PlanSet *ps, Err *err) {
    PlanInputs in = {{0}, t->facts, NULL, NULL, NULL};
    snprintf(in.arch, sizeof in.arch, "%s", arch);
    const char *path = tune_db_path(t->env);
    if (t->off) return untuned(cfg, req, &in, t, t->off_note, ps, err);
    TuneEnv env;
    Err why;
    char cublaslt[32], note[sizeof why.msg + 64];
    if (t->machine) { env = *t->machine; snprintf(cublaslt, sizeof cublaslt, "%s", t->machine_cublaslt); }
    else if (tune_env_probe(&env, cublaslt, sizeof cublaslt, t->env, &why)) {   /* no GPU: a missing database goes unsaid */
        snprintf(note, sizeof note, "not used (its entries are per GPU: %s); default variants", why.msg);
        return untuned(cfg, req, &in, t, file_exists(path) ? note : NULL, ps, err);
    }
    if (!file_exists(path))
        return untuned(cfg, req, &in, t, "not found; default variants (`gpt2gen tune` makes it)", ps, err);
    TuneDb db;
    tune_db_load(&db, path, stderr);   /* unreadable file, corrupt lines: one message each */
    in.db = &db;
    in.env = &env;
    in.cublaslt = cublaslt;
    int rc = planset_make(ps, cfg, req, &in, stderr, err);
    if (!rc) say_applied(t, path, &db, &ps->applied, env.gpu);
    tune_db_free(&db);
    return rc;
}
