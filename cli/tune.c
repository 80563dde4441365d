/* gpt2gen tune: the command. Its options, the plans it tunes (the training step, the decode and eval plans the
   commands run by default: tune/targets.c, made here as every command makes its plans), then the tuning engine
   (tune/tune.h): every variant of every kernel family, every cuBLASLt candidate of every matmul, and cuDNN against
   the attention template, timed at each plan's shapes on this GPU; the fastest correct ones go into the tuning
   database (gen/tune_db.h), and build/<name>/ is rebuilt with them. The report goes to stdout and
   build/<name>/tune_report.txt. */
#include "cli/commands.h"
#include "tune/tune.h"
#include "common/files.h"
#include "runtime/gpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *TUNE_USAGE =
    "usage: gpt2gen tune CONFIG.lua [--only PLANS] [--decode-rows R,...] [--eval-rows N] [--eval-T T,...]\n"
    "                   [--kernels PATTERN] [--budget SECONDS] [--algos N] [--set KEY=VALUE]... [-j N]\n"
    "\n"
    "Times, on this GPU, every plan the commands run by default at CONFIG.lua's shapes: the training step, then the\n"
    "decode step of `gpt2gen sample` (and of training's samples), then the forwards of `gpt2gen eval` (and of\n"
    "training's eval.hellaswag). For each: every variant of every kernel family (each combination of its tunables'\n"
    "candidates that the declarations allow; the config's tune table narrows or widens them; a plan without a\n"
    "backward varies only its kernels' tunables, and the decode family one group of independent kernels at a time,\n"
    "then their best together) and cuBLASLt's first N heuristic algorithms for every matmul it runs; for the\n"
    "training step also cuDNN's attention against the template and the GELU's paths. Each variant's output is held\n"
    "against the default's (a mismatch, a compile or a launch failure is rejected and reported); times are medians\n"
    "of CUDA-event timings after an L2 flush. Every result is appended to the tuning database (build/tune-db.txt,\n"
    "or $GPT2GEN_TUNE_DB) as it is measured, so an interrupted tune resumes without measuring again; the fastest\n"
    "become its \"best\" records, keyed by each plan's shapes, which `gpt2gen build`, `train`, `sample` and `eval`\n"
    "then use. Rebuilds build/<name>/ with the training step's, times that step before and after (the other plans\n"
    "are not timed whole), and writes the report to stdout and build/<name>/tune_report.txt.\n"
    "\n"
    "options:\n"
    "  --only PLANS       which plans: train, decode, eval, comma-separated (default: all three)\n"
    "  --decode-rows R,.. the decode plans' rows: `gpt2gen sample --batch R` (default 1; at most 8 counts)\n"
    "  --eval-rows N      the eval plans' rows: `gpt2gen eval --rows N` (default 32)\n"
    "  --eval-T T,...     the eval plans' positions, each rounded up to its bucket (a power of two from 64 to the\n"
    "                     model's context): the bucket of a set's longest row is the one `gpt2gen eval` runs\n"
    "                     (default 64,128,256: HellaSwag's lengths)\n"
    "  --kernels PATTERN  only what matches these globs (comma-separated) on family names, matmul names,\n"
    "                     \"attention-path\" or \"gelu-path\", e.g. --kernels 'layernorm,gelu' (default: everything)\n"
    "  --budget SECONDS   stop measuring new variants after this long; the best so far are kept\n"
    "  --algos N          cuBLASLt heuristic algorithms per matmul, 1 to 32 (default 16)\n"
    "  --set KEY=VALUE    override a config value (repeatable)\n"
    "  -j N               parallel compiles (default: one per core)\n";

/* one of --kernels, --budget and --algos with its value into o: 0, else a usage error's exit code */
static int engine_option(TuneOptions *o, const char *s, const char *v) {
    char *end;
    if (!strcmp(s, "--kernels")) o->pattern = v;
    else if (!strcmp(s, "--budget")) {
        o->budget = strtod(v, &end);
        if (*end || end == v || !(o->budget > 0) || o->budget > 1e7) {
            fprintf(stderr, "gpt2gen tune: --budget: expected seconds (a positive number), got '%s'\n", err_show(v));
            return EXIT_USAGE;
        }
    } else {
        long n = strtol(v, &end, 10);
        if (*end || end == v || n < 1 || n > TUNE_MAX_ALGOS) {
            fprintf(stderr, "gpt2gen tune: --algos: expected 1 to %d, got '%s'\n", TUNE_MAX_ALGOS, err_show(v));
            return EXIT_USAGE;
        }
        o->algos = (int)n;
    }
    return 0;
}

/* takes tune's own options out of argv (the rest are the config commands'); 2 after a usage error */
static int tune_options(TuneOptions *o, int *argc, char **argv) {
    static const char *const own[] = {"--kernels", "--budget", "--algos", "--only", "--decode-rows", "--eval-rows",
                                      "--eval-T", NULL};
    int k = 1;
    tune_options_defaults(o);
    for (int i = 1; i < *argc; i++) {
        const char *s = argv[i];
        int is_opt = 0;
        for (int j = 0; own[j]; j++) is_opt |= !strcmp(s, own[j]);
        if (!is_opt) { argv[k++] = argv[i]; continue; }
        if (i + 1 == *argc) { fprintf(stderr, "gpt2gen tune: option '%s' needs a value\n", err_show(s)); return EXIT_USAGE; }
        const char *v = argv[++i];
        char why[256];
        int rc = tune_plan_option(o, s, v, why, sizeof why);
        if (rc < 0) { fprintf(stderr, "gpt2gen tune: %s\n", err_show(why)); return EXIT_USAGE; }
        if (rc > 0 && engine_option(o, s, v)) return EXIT_USAGE;
    }
    *argc = k;
    return 0;
}

/* the report to stdout and build/<name>/tune_report.txt */
static void write_report(const TuneReport *rep, const Plan *plan) {
    fputs(rep->text, stdout);
    char path[1200];
    snprintf(path, sizeof path, "%s/tune_report.txt", plan->build_dir);
    Err err;
    if (write_file_atomic(path, rep->text, rep->len, &err)) fprintf(stderr, "gpt2gen tune: %s\n", err.msg);
    else printf("report: %s\n", path);
}

/* the plan sets o's plans are in, made as the commands make theirs (cli/plans.c), without the database (the
   untuned plans are the baseline): how many, or -(exit code) */
static int make_sets(Args *a, Config *cfg, const TuneOptions *o, PlanSet *ps) {
    PlanRequest req[TUNE_MAX_ROWS];
    int n = tune_plan_requests(o, req), rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        rc = i ? args_plan(a, cfg, &req[i], &ps[i]) : args_load_and_plan(a, cfg, &req[0], &ps[0]);
        a->no_arch_note = 1;   /* said once */
        if (rc) while (i-- > 0) planset_free(&ps[i]);
    }
    return rc ? -rc : n;
}

int cmd_tune(int argc, char **argv, const Env *env) {
    setvbuf(stdout, NULL, _IOLBF, 0);   /* the report and progress (stderr) in the order they come, in a log of both */
    static Config cfg;
    PlanSet ps[TUNE_MAX_ROWS];
    TuneOptions o;
    Args a;
    int rc = tune_options(&o, &argc, argv);
    if (rc) return rc;
    if ((rc = args_parse(argc, argv, env, &a, "tune"))) return rc;
    if (a.help) { fputs(TUNE_USAGE, stdout); return 0; }
    a.untuned = 1;
    char arch[16];
    Err err;
    a.no_arch_note = cuda_device_arch(0, arch, &err) != 0;   /* without a GPU the one line is tune_run's: needs a GPU */
    CudaFacts facts;
    a.facts = cuda_plan_facts(&facts, a.env, 0);
    int n_sets = make_sets(&a, &cfg, &o, ps);
    if (n_sets < 0) return -n_sets;
    o.jobs = a.jobs;
    o.env = a.env;
    TuneTargets targets;
    tune_targets(&o, ps, n_sets, &targets);
    TuneReport rep;
    rc = tune_run(&cfg, &targets, &o, &rep, &err);
    if (rc) fprintf(stderr, "gpt2gen tune: %s\n", err.msg);
    if (rep.text) write_report(&rep, targets.plan[0]);
    tune_report_free(&rep);
    for (int i = 0; i < n_sets; i++) planset_free(&ps[i]);
    return rc || rep.failed ? EXIT_FAIL : 0;
}
