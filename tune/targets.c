/* targets: which plans `gpt2gen tune` sweeps (tune.h): its options for them, the plan requests that make them
   (through cli/plans.c, as every command's plans are made) and the plans picked from those sets. Needs no GPU: a
   gpt2gen built without CUDA has it too. */
#include "tune/tune.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tune_options_defaults(TuneOptions *o) {
    memset(o, 0, sizeof *o);
    o->algos = TUNE_DEFAULT_ALGOS;
    o->plans = TUNE_PLAN_TRAIN | TUNE_PLAN_DECODE | TUNE_PLAN_EVAL;
    o->n_decode_rows = 1;
    o->decode_rows[0] = 1;
    o->eval_rows = TUNE_DEFAULT_EVAL_ROWS;
    for (int T = 64; T <= TUNE_DEFAULT_EVAL_T; T *= 2) o->eval_T[o->n_eval_T++] = T;
}

/* a comma-separated list of integers from lo to hi, max of them at the most, each once: their count, else -1 */
static int int_list(const char *v, int lo, int hi, int *out, int max) {
    int n = 0;
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < lo || x > hi || n == max || (*end && *end != ',')) return -1;
        for (int i = 0; i < n; i++)
            if (out[i] == x) return -1;
        out[n++] = (int)x;
        if (!*end) return n;
        p = end + 1;
    }
}

/* --only's list: "train", "decode", "eval", comma-separated, each once */
static int plan_list(const char *v, unsigned *plans) {
    static const char *const names[3] = {"train", "decode", "eval"};
    char buf[64];
    if (strlen(v) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%s", v);
    *plans = 0;
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        int k = 0;
        while (k < 3 && strcmp(tok, names[k])) k++;
        if (k == 3 || (*plans & 1u << k)) return -1;
        *plans |= 1u << k;
    }
    /* strtok_r skips empty fields: "train,,eval" and ",train" are not lists of names */
    return n && !strstr(v, ",,") && v[0] != ',' && v[strlen(v) - 1] != ',' ? 0 : -1;
}

int tune_plan_option(TuneOptions *o, const char *opt, const char *value, char *why, size_t n) {
    const char *expect;
    if (!strcmp(opt, "--only")) {
        if (!plan_list(value, &o->plans)) return 0;
        expect = "a comma-separated list of train, decode and eval";
    } else if (!strcmp(opt, "--decode-rows")) {
        if ((o->n_decode_rows = int_list(value, 1, 4096, o->decode_rows, TUNE_MAX_ROWS)) > 0) return 0;
        expect = "rows from 1 to 4096, comma-separated, at most 8 counts, each once";
    } else if (!strcmp(opt, "--eval-rows")) {
        if (int_list(value, 1, 4096, &o->eval_rows, 1) == 1) return 0;
        expect = "an integer from 1 to 4096";
    } else if (!strcmp(opt, "--eval-T")) {
        if ((o->n_eval_T = int_list(value, 1, 1 << 17, o->eval_T, PLANSET_MAX_BUCKETS)) > 0) return 0;
        expect = "positions from 1 to 131072, comma-separated, at most 12, each once";
    } else return 1;
    snprintf(why, n, "%s: expected %s, got '%.100s'", opt, expect, value);
    return -1;
}

int tune_plan_requests(const TuneOptions *o, PlanRequest *req) {
    int decode = o->plans & TUNE_PLAN_DECODE, n = 1;
    req[0] = (PlanRequest){(o->plans & TUNE_PLAN_TRAIN) != 0, decode ? o->decode_rows[0] : 0,
                           o->plans & TUNE_PLAN_EVAL ? o->eval_rows : 0, 0, 0};
    for (int i = 1; decode && i < o->n_decode_rows && n < TUNE_MAX_ROWS; i++) req[n++] = (PlanRequest){0, o->decode_rows[i], 0, 0, 0};
    return n;
}

int tune_targets(const TuneOptions *o, const PlanSet *sets, int n_sets, TuneTargets *out) {
    out->n = 0;
    if (n_sets < 1) return 0;
    if (sets[0].train) out->plan[out->n++] = sets[0].train;
    for (int i = 0; i < n_sets; i++)
        if (sets[i].decode) out->plan[out->n++] = sets[i].decode;
    unsigned taken = 0;   /* the buckets already picked */
    for (int i = 0; i < o->n_eval_T && sets[0].eval[0]; i++) {
        int b = planset_bucket(&sets[0], o->eval_T[i]);
        if (taken & 1u << b) continue;
        taken |= 1u << b;
        out->plan[out->n++] = sets[0].eval[b];
    }
    return out->n;
}

void tune_plan_label(const Plan *p, char *out, size_t n) {
    if (p->step.kind == STEP_TRAIN) snprintf(out, n, "%s (B=%d T=%d)", p->name, p->step.B, p->step.T);
    else if (p->step.kind == STEP_DECODE) snprintf(out, n, "%s (%d row%s)", p->name, p->step.B, p->step.B == 1 ? "" : "s");
    else snprintf(out, n, "%s (%d row%s, T=%d)", p->name, p->step.B, p->step.B == 1 ? "" : "s", p->step.T);
}
