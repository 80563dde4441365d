/* gpt2gen tune: the command. Its options, then the tuning engine (tune/tune.h): every variant of every kernel family,
   every cuBLASLt candidate of every matmul, and cuDNN against the attention template, timed at the config's shapes
   on this GPU; the fastest correct ones go into the tuning database (gen/tune_db.h), and build/<name>/ is rebuilt
   with them. The report goes to stdout and build/<name>/tune_report.txt. */
#include "cli/commands.h"
#include "tune/tune.h"
#include "common/files.h"
#include "runtime/gpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *TUNE_USAGE =
    "usage: gpt2gen tune CONFIG.lua [--kernels PATTERN] [--budget SECONDS] [--algos N] [--set KEY=VALUE]... [-j N]\n"
    "\n"
    "Times, on this GPU at CONFIG.lua's shapes, every variant of every kernel family (each combination of its\n"
    "tunables' candidates that the declarations allow; the config's tune table narrows or widens them), cuBLASLt's\n"
    "first N heuristic algorithms for every matmul of the plan, and cuDNN's attention against the template. Each\n"
    "variant's output is held against the default's (a mismatch, a compile or a launch failure is rejected and\n"
    "reported); times are medians of CUDA-event timings after an L2 flush. Every result is appended to the tuning\n"
    "database (build/tune-db.txt, or $GPT2GEN_TUNE_DB) as it is measured, so an interrupted tune resumes without\n"
    "measuring again; the fastest become its \"best\" records, which `gpt2gen build` and `train` then use.\n"
    "Rebuilds build/<name>/ with them, times a training step before and after, and writes the report to stdout and\n"
    "build/<name>/tune_report.txt.\n"
    "\n"
    "options:\n"
    "  --kernels PATTERN  only what matches these globs (comma-separated) on family names, matmul names,\n"
    "                     \"attention-path\" or \"gelu-path\", e.g. --kernels 'layernorm,gelu' (default: everything)\n"
    "  --budget SECONDS   stop measuring new variants after this long; the best so far are kept\n"
    "  --algos N          cuBLASLt heuristic algorithms per matmul, 1 to 32 (default 16)\n"
    "  --set KEY=VALUE    override a config value (repeatable)\n"
    "  -j N               parallel compiles (default: one per core)\n";

/* takes --kernels, --budget and --algos out of argv; 2 after a usage error */
static int tune_options(TuneOptions *o, int *argc, char **argv) {
    int k = 1;
    o->algos = TUNE_DEFAULT_ALGOS;
    for (int i = 1; i < *argc; i++) {
        const char *s = argv[i];
        int is_opt = !strcmp(s, "--kernels") || !strcmp(s, "--budget") || !strcmp(s, "--algos");
        if (!is_opt) { argv[k++] = argv[i]; continue; }
        if (i + 1 == *argc) { fprintf(stderr, "gpt2gen tune: option '%s' needs a value\n", err_show(s)); return EXIT_USAGE; }
        const char *v = argv[++i];
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

int cmd_tune(int argc, char **argv, const Env *env) {
    setvbuf(stdout, NULL, _IOLBF, 0);   /* the report and progress (stderr) in the order they come, in a log of both */
    static Config cfg;
    static Plan plan;
    TuneOptions o = {0};
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
    if ((rc = args_load_and_plan(&a, &cfg, &plan, NULL))) return rc;
    o.jobs = a.jobs;
    o.env = a.env;
    TuneReport rep;
    rc = tune_run(&cfg, &plan, &o, &rep, &err);
    if (rc) fprintf(stderr, "gpt2gen tune: %s\n", err.msg);
    if (rep.text) write_report(&rep, &plan);
    tune_report_free(&rep);
    return rc || rep.failed ? EXIT_FAIL : 0;
}
