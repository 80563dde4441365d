/* gpt2gen: the command line. Parses arguments, runs one command, turns errors into one message and an
   exit code (0 ok, 1 failure, 2 bad usage or bad config). */
#include "gen/build.h"
#include "gen/config.h"
#include "runtime/cuda/cuda_api.h"
#include "gen/plan.h"
#include "runtime/cuda/gputest.h"
#include "runtime/prepare.h"
#include "runtime/train.h"
#include <stdlib.h>
#include <string.h>

#define VERSION "0.1.0"

static const char *USAGE =
    "usage: gpt2gen <command> [options]\n"
    "       gpt2gen CONFIG.lua [options]       build and train (same as `gpt2gen train CONFIG.lua`)\n"
    "\n"
    "Generates CUDA kernels specialized for one GPT-2 config, compiles them with NVRTC, and trains.\n"
    "\n"
    "commands:\n"
    "  build CONFIG.lua     generate and compile the kernels into build/<name>/\n"
    "  train CONFIG.lua     build, then train (CUDA where there is a GPU, else the CPU backend)\n"
    "  test CONFIG.lua      run every generated kernel against the CPU reference on the GPU\n"
    "  prepare FILES -o DIR turn text files into token shards and a tokenizer file\n"
    "\n"
    "common options:\n"
    "  --set KEY=VALUE      override a config value, e.g. --set train.steps=100 (repeatable)\n"
    "  --arch sm_XX         the GPU arch to compile for (default: the GPU's, else sm_90)\n"
    "  -h, --help           show help (also `gpt2gen <command> --help`)\n"
    "  --version            show the version\n"
    "\n"
    "Run `make test` for the test suite. README.md documents the config contract.\n";

static const char *BUILD_USAGE =
    "usage: gpt2gen build CONFIG.lua [--arch sm_XX] [--set KEY=VALUE]... [-j N] [-q]\n"
    "\n"
    "Generates the kernel sources for CONFIG.lua, compiles them with NVRTC, and writes build/<name>/:\n"
    "  config.lua        the config with every default filled in\n"
    "  plan.txt          kernels, launch geometry, tunables and the GPU memory of one training step\n"
    "  kernels/*.cu      the generated sources (readable; the constants are baked in)\n"
    "  kernels/*.cubin   the compiled kernels\n"
    "CUBINs are cached under build/cache (or $GPT2GEN_CACHE) by a hash of source, options, arch and NVRTC\n"
    "version; a build with nothing changed compiles nothing.\n"
    "\n"
    "options:\n"
    "  --arch sm_XX      target arch (default: config's arch, else the GPU's, else sm_90)\n"
    "  --set KEY=VALUE   override a config value (repeatable)\n"
    "  -j N              compile N modules in parallel (default: one per core)\n"
    "  -q                print nothing on success\n";

static const char *TRAIN_USAGE =
    "usage: gpt2gen train CONFIG.lua [--backend auto|cpu|cuda] [--set KEY=VALUE]... [--arch sm_XX]\n"
    "       gpt2gen CONFIG.lua [options]\n"
    "\n"
    "Builds the kernels (as `gpt2gen build`) and trains the model the config describes: gradient accumulation\n"
    "to train.total_batch_size, the LR schedule, validation every eval.val_every steps, samples every\n"
    "eval.sample_every steps, checkpoints every checkpoint.every steps and at the end, into checkpoint.dir\n"
    "(default runs/<name>/), with metrics.jsonl (one JSON object per line) beside them.\n"
    "\n"
    "options:\n"
    "  --backend B       auto (default: CUDA where there is a GPU, else the CPU backend), cpu or cuda\n"
    "  --set KEY=VALUE   override a config value, e.g. --set train.steps=100 (repeatable)\n"
    "  --resume          continue from the newest checkpoint in checkpoint.dir (= --set checkpoint.resume=true)\n"
    "  --arch sm_XX      target arch for the kernels\n"
    "  -q                no per-step progress lines\n"
    "\n"
    "Ctrl-C stops after the current step and saves a checkpoint first.\n";

typedef struct {
    const char *backend;
    const char *config;
    const char *arch;
    const char *sets[64];
    int n_sets;
    int jobs;
    int quiet;
    int help;
} Args;

/* Parses the options shared by the config commands. Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, Args *a, const char *cmd) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int has_next = i + 1 < argc;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) a->help = 1;
        else if (!strcmp(s, "--set") && has_next) {
            if (a->n_sets == 64) { fprintf(stderr, "gpt2gen %s: more than 64 --set options\n", cmd); return EXIT_USAGE; }
            a->sets[a->n_sets++] = argv[++i];
        } else if (!strncmp(s, "--set=", 6)) a->sets[a->n_sets++] = s + 6;
        else if (!strcmp(s, "--arch") && has_next) a->arch = argv[++i];
        else if (!strcmp(s, "-j") && has_next) a->jobs = atoi(argv[++i]);
        else if (!strcmp(s, "-q")) a->quiet = 1;
        else if (!strcmp(s, "--backend") && has_next) a->backend = argv[++i];
        else if (!strcmp(s, "--resume") && a->n_sets < 64) a->sets[a->n_sets++] = "checkpoint.resume=true";
        else if (s[0] == '-') {
            fprintf(stderr, "gpt2gen %s: unknown option '%s' (see gpt2gen %s --help)\n", cmd, s, cmd);
            return EXIT_USAGE;
        } else if (!a->config) a->config = s;
        else { fprintf(stderr, "gpt2gen %s: unexpected argument '%s'\n", cmd, s); return EXIT_USAGE; }
    }
    if (!a->help && !a->config) { fprintf(stderr, "gpt2gen %s: missing CONFIG.lua (see gpt2gen %s --help)\n", cmd, cmd); return EXIT_USAGE; }
    return 0;
}

/* Loads the config and makes the plan. Errors here are the user's input: exit code 2. */
static int load_and_plan(const Args *a, Config *cfg, Plan *plan) {
    Err err;
    if (config_load(cfg, a->config, a->sets, a->n_sets, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
    char arch[16];
    const char *note;
    build_pick_arch(cfg, a->arch, arch, &note);
    int v = 0;
    if (sscanf(arch, "sm_%d", &v) != 1 || v < 70) { fprintf(stderr, "gpt2gen: --arch: expected sm_XX with XX >= 70, got '%s'\n", arch); return EXIT_USAGE; }
    if (plan_make(plan, cfg, arch, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
    if (!a->quiet && strcmp(note, "--arch") && strcmp(note, "config")) printf("arch %s (%s)\n", arch, note);
    return 0;
}

/* build, and for `test` what comes after: parse, load, plan, generate and compile, then after() if given */
static int build_command(int argc, char **argv, const char *cmd, const char *usage, int (*after)(const Config *, const Plan *)) {
    Args a;
    int rc = parse_args(argc, argv, &a, cmd);
    if (rc) return rc;
    if (a.help) { fputs(usage, stdout); return 0; }
    static Config cfg;
    static Plan plan;
    if ((rc = load_and_plan(&a, &cfg, &plan))) return rc;
    Err err;
    if (build_run(&plan, a.jobs, a.quiet, NULL, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    return after ? after(&cfg, &plan) : 0;
}

static const char *TEST_USAGE =
    "usage: gpt2gen test CONFIG.lua [--set KEY=VALUE]... [--arch sm_XX]\n"
    "\n"
    "Builds the kernels of CONFIG.lua and holds each one, on the GPU, against the CPU reference op on random\n"
    "inputs (fp32 to ~1e-5, bf16 to ~1e-2 relative), then a full training step against the CPU backend.\n"
    "Prints one line per test and ends with \"N passed, N failed\". Without a GPU it says so and skips\n"
    "(exit code 0); the compile step still runs.\n";

static int run_gpu_tests(const Config *cfg, const Plan *plan) {
    return gpu_test_run(cfg, plan) > 0 ? EXIT_FAIL : 0;
}

static int cmd_train(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, &a, "train");
    if (rc) return rc;
    if (a.help) { fputs(TRAIN_USAGE, stdout); return 0; }
    const char *backend = a.backend ? a.backend : "auto";
    if (strcmp(backend, "auto") && strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
        fprintf(stderr, "gpt2gen train: --backend: expected auto, cpu or cuda, got '%s'\n", backend);
        return EXIT_USAGE;
    }
    static Config cfg;
    static Plan plan;
    if ((rc = load_and_plan(&a, &cfg, &plan))) return rc;
    Err err;
    char arch[16];
    if (!strcmp(backend, "auto")) {
        if (cuda_device_arch(arch, &err) == 0) backend = "cuda";
        else { printf("%s: training on the CPU backend (fp32)\n", err.msg); backend = "cpu"; }
    }
    if (!strcmp(backend, "cuda")) {
        /* the kernels must be for this GPU: a config's or --arch's other target is rebuilt for it */
        if (cuda_device_arch(arch, &err) == 0 && strcmp(arch, plan.arch)) {
            printf("note: building for GPU 0's %s instead of %s\n", arch, plan.arch);
            if (plan_make(&plan, &cfg, arch, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
        }
        if (build_run(&plan, a.jobs, a.quiet, NULL, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    }
    TrainOptions opt = {backend, a.quiet};
    return train_run(&cfg, &plan, &opt);
}

int main(int argc, char **argv) {
    if (argc < 2) { fputs(USAGE, stderr); return EXIT_USAGE; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) { fputs(USAGE, stdout); return 0; }
    if (!strcmp(cmd, "--version")) { printf("gpt2gen %s\n", VERSION); return 0; }
    if (!strcmp(cmd, "build")) return build_command(argc - 1, argv + 1, "build", BUILD_USAGE, NULL);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "test")) return build_command(argc - 1, argv + 1, "test", TEST_USAGE, run_gpu_tests);
    if (!strcmp(cmd, "prepare")) return prepare_main(argc - 1, argv + 1);
    size_t n = strlen(cmd);
    if (n > 4 && !strcmp(cmd + n - 4, ".lua")) return cmd_train(argc, argv);   /* gpt2gen CONFIG.lua */
    fprintf(stderr, "gpt2gen: unknown command '%s' (see gpt2gen --help)\n", cmd);
    return EXIT_USAGE;
}
