/* args: what the config commands (build, train, test, tune) share: their options, the config and its plans. */
#include "cli/commands.h"
#include "gen/build.h"
#include "runtime/gpu.h"
#include "common/files.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adds one --set (or --resume's) override; 2 after printing a usage error when there are ARGS_MAX_SETS already. */
static int add_set(Args *a, const char *set, const char *cmd) {
    if (a->n_sets == ARGS_MAX_SETS) {
        fprintf(stderr, "gpt2gen %s: more than %d --set options (--resume counts as one)\n", cmd, ARGS_MAX_SETS);
        return EXIT_USAGE;
    }
    a->sets[a->n_sets++] = set;
    return 0;
}

/* An option's integer value from 1 to max (-j, --gpus); 2 after printing a usage error naming what it counts. */
static int int_option(const char *cmd, const char *opt, const char *arg, int max, const char *what, int *out) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 1 || v > max) {
        fprintf(stderr, "gpt2gen %s: %s: expected %s from 1 to %d, got '%s'\n", cmd, opt, what, max, err_show(arg));
        return EXIT_USAGE;
    }
    *out = (int)v;
    return 0;
}

/* Parses the options shared by the config commands. Returns 0, or 2 after printing a usage error. */
int args_parse(int argc, char **argv, const Env *env, Args *a, const char *cmd) {
    memset(a, 0, sizeof *a);
    a->env = env_or_defaults(env);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int takes_value = !strcmp(s, "--set") || !strcmp(s, "--arch") || !strcmp(s, "-j") || !strcmp(s, "--backend") ||
                          !strcmp(s, "--gpus");
        if (takes_value && i + 1 == argc) {
            fprintf(stderr, "gpt2gen %s: option '%s' needs a value (see gpt2gen %s --help)\n", cmd, err_show(s), cmd);
            return EXIT_USAGE;
        }
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) a->help = 1;
        else if (!strcmp(s, "--set")) { if (add_set(a, argv[++i], cmd)) return EXIT_USAGE; }
        else if (!strncmp(s, "--set=", 6)) { if (add_set(a, s + 6, cmd)) return EXIT_USAGE; }
        else if (!strcmp(s, "--resume")) { if (add_set(a, "checkpoint.resume=true", cmd)) return EXIT_USAGE; }
        else if (!strcmp(s, "--arch")) {
            a->arch = argv[++i];
            if (!config_arch_valid(a->arch)) {
                fprintf(stderr, "gpt2gen %s: --arch: expected sm_XX with XX >= 70 (e.g. sm_90), got '%s'\n", cmd, err_show(a->arch));
                return EXIT_USAGE;
            }
        } else if (!strcmp(s, "-j")) {
            if (int_option(cmd, s, argv[++i], ARGS_MAX_JOBS, "a number of parallel compiles", &a->jobs)) return EXIT_USAGE;
        } else if (!strcmp(s, "--gpus") && strcmp(cmd, "train")) {
            fprintf(stderr, "gpt2gen %s: --gpus is an option of gpt2gen train\n", cmd);
            return EXIT_USAGE;
        } else if (!strcmp(s, "--gpus")) {
            if (int_option(cmd, s, argv[++i], ARGS_MAX_GPUS, "a number of GPUs", &a->gpus)) return EXIT_USAGE;
            snprintf(a->gpus_set, sizeof a->gpus_set, "train.num_gpus=%d", a->gpus);
            if (add_set(a, a->gpus_set, cmd)) return EXIT_USAGE;
        }
        else if (!strcmp(s, "-q")) a->quiet = 1;
        else if (!strcmp(s, "--no-tune-db")) a->no_tune_db = 1;
        else if (!strcmp(s, "--backend")) a->backend = argv[++i];
        else if (s[0] == '-') {
            fprintf(stderr, "gpt2gen %s: unknown option '%s' (see gpt2gen %s --help)\n", cmd, err_show(s), cmd);
            return EXIT_USAGE;
        } else if (!a->config) a->config = s;
        else { fprintf(stderr, "gpt2gen %s: unexpected argument '%s'\n", cmd, err_show(s)); return EXIT_USAGE; }
    }
    if (!a->help && !a->config) { fprintf(stderr, "gpt2gen %s: missing CONFIG.lua (see gpt2gen %s --help)\n", cmd, cmd); return EXIT_USAGE; }
    /* test and tune run one GPU's kernels and step: the plan of one rank with the whole optimizer state */
    if ((!strcmp(cmd, "test") || !strcmp(cmd, "tune")) && add_set(a, "train.num_gpus=1", cmd)) return EXIT_USAGE;
    return 0;
}

int args_make_plans(const Args *a, const Config *cfg, const char *arch, const PlanRequest *req, PlanSet *ps) {
    CliTuning t = {a->env, a->untuned || a->no_tune_db, a->untuned ? NULL : "not used (--no-tune-db); default variants",
                   a->quiet ? NULL : stdout, 0, a->machine, a->machine_cublaslt, a->facts};
    Err err;
    if (cli_plans(cfg, req, arch, &t, ps, &err)) {
        fprintf(stderr, "gpt2gen: %s\n", err.msg);
        return EXIT_USAGE;
    }
    return 0;
}

/* Loads the config and makes the plans. Errors here are the user's input: exit code 2. */
int args_load_and_plan(const Args *a, Config *cfg, const PlanRequest *req, PlanSet *ps) {
    Err err;
    if (config_load(cfg, a->config, a->sets, a->n_sets, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
    return args_plan(a, cfg, req, ps);
}

int args_plan(const Args *a, const Config *cfg, const PlanRequest *req, PlanSet *ps) {
    char arch[16];
    const char *note;
    cuda_pick_arch(a->arch, cfg->run.arch, arch, &note);
    if (!config_arch_valid(arch)) { fprintf(stderr, "gpt2gen: arch: expected sm_XX with XX >= 70, got '%s'\n", err_show(arch)); return EXIT_USAGE; }
    if (!a->quiet && !a->no_arch_note && strcmp(note, "--arch") && strcmp(note, "config")) printf("arch %s (%s)\n", arch, note);
    return args_make_plans(a, cfg, arch, req, ps);
}

int args_build_plans(const Args *a, const PlanSet *ps, int quiet, Err *err) {
    const Plan *plans[2];
    int n = planset_ahead(ps, plans);
    return build_plans(plans, n, a->jobs, quiet, a->env, NULL, err);
}

int args_build(int argc, char **argv, const Env *env, const char *cmd, const char *usage, Config *cfg,
               const PlanRequest *req, PlanSet *ps, int *done) {
    Args a;
    *done = 0;
    int rc = args_parse(argc, argv, env, &a, cmd);
    if (rc) return rc;
    if (a.help) { fputs(usage, stdout); *done = 1; return 0; }
    CudaFacts facts;
    a.facts = cuda_plan_facts(&facts, a.env, 0);
    if ((rc = args_load_and_plan(&a, cfg, req, ps))) return rc;
    Err err, why;
    rc = args_build_plans(&a, ps, a.quiet, &err);
    if (rc == BUILD_NO_NVRTC && cuda_backend_built(&why)) {   /* CPU only: CUBINs are of no use to this binary */
        fprintf(stderr, "gpt2gen %s: %s\ngpt2gen %s: note: %s; the CPU backend needs no CUBINs\n", cmd, err.msg, cmd, why.msg);
        return 0;
    }
    if (rc == BUILD_NO_NVRTC) { fprintf(stderr, "gpt2gen %s: %s\n", cmd, err.msg); return EXIT_FAIL; }
    if (rc) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    return 0;
}
