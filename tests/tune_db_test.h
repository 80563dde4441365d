/* tune_db_test: what the tests of the tuning database share (tests/test_tune.c, tests/test_tune_limits.c): the
   tiny config's training plan, a machine to key records by, best records for the plan's families, and the
   database applied with its messages captured. Runs from the repository root. */
#ifndef GPT2GEN_TEST_TUNE_DB_H
#define GPT2GEN_TEST_TUNE_DB_H
#include "gen/config.h"
#include "gen/tune_db.h"
#include "common/files.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static Config cfg;
static Plan plan;
static char dir[64], path[128];
static const TuneEnv ENV = {"NVIDIA_H200", "sm_90", "13000", "13000", "13.0", "91400", NULL};

/* the tiny config with sets (NULL-terminated, or NULL) and its training plan */
static inline int make(const char *const *sets, Err *err) {
    int n = 0;
    while (sets && sets[n]) n++;
    if (config_load(&cfg, "configs/tiny.lua", sets, n, err)) return -1;
    return plan_make_train(&plan, &cfg, "sm_90", NULL, err);
}

static inline int module_of(const char *family) {
    for (int i = 0; i < plan.n_families; i++)
        if (!strcmp(plan.families[i].decl->family, family)) return i;
    return -1;
}

/* a record (best or measure) of what and name with variant and status ok, times set, the key left empty */
static inline TuneRecord tune_record(const char *record, const char *what, const char *name, const char *variant) {
    TuneRecord r;
    memset(&r, 0, sizeof r);
    snprintf(r.record, sizeof r.record, "%s", record);
    snprintf(r.what, sizeof r.what, "%s", what);
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.variant, sizeof r.variant, "%s", variant);
    snprintf(r.status, sizeof r.status, "ok");
    r.us = 10.5;
    r.default_us = 12.25;
    return r;
}

/* a best record for family with variant, keyed for this plan and env */
static inline TuneRecord best_kernel(const char *family, const char *variant, const TuneEnv *env) {
    TuneRecord r = tune_record("best", "kernel", family, variant);
    tune_key_kernel(&r.key, env, &plan, module_of(family));
    return r;
}

/* what a stdio stream f (a tmpfile) holds, into text */
static inline void stream_text(FILE *f, char *text, size_t n) {
    rewind(f);
    size_t got = fread(text, 1, n - 1, f);
    text[got] = 0;
}

/* applies db to plan with the cuBLASLt version "130100"; the messages it printed into text */
static inline void apply_capture(const TuneDb *db, TuneApplied *ap, char *text, size_t n) {
    FILE *msgs = tmpfile();
    tune_db_apply(db, &ENV, &plan, "130100", NULL, ap, msgs);
    stream_text(msgs, text, n);
    fclose(msgs);
}

static inline void write_text(const char *text) {
    Err err;
    if (write_file_atomic(path, text, strlen(text), &err)) fprintf(stderr, "%s\n", err.msg);
}

/* the scratch folder build/test-tune-PID holding the database file path */
static inline void scratch_db(const char *name) {
    snprintf(dir, sizeof dir, "build/%s-%d", name, (int)getpid());
    Err err;
    mkdir_p(dir, &err);
    snprintf(path, sizeof path, "%s/tune-db.txt", dir);
}
#endif
