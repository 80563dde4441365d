/* gpt2gen train: build, then train on the CUDA backend (or the CPU one). */
#include "cli/commands.h"
#include "gen/build.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/train.h"
#include <stdio.h>
#include <string.h>

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
    "  --resume          continue from the newest complete, valid checkpoint in checkpoint.dir\n"
    "                    (= --set checkpoint.resume=true); without it, a checkpoint.dir that holds\n"
    "                    checkpoints is refused, and so is one another run is using\n"
    "  --arch sm_XX      target arch for the kernels\n"
    "  --no-tune-db      ignore the tuning database (build/tune-db.txt, made by `gpt2gen tune`)\n"
    "  -q                no per-step progress lines\n"
    "\n"
    "Ctrl-C stops after the current step and saves a checkpoint first.\n";

int cmd_train(int argc, char **argv) {
    Args a;
    int rc = args_parse(argc, argv, &a, "train");
    if (rc) return rc;
    if (a.help) { fputs(TRAIN_USAGE, stdout); return 0; }
    const char *backend = a.backend ? a.backend : "auto";
    if (strcmp(backend, "auto") && strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
        fprintf(stderr, "gpt2gen train: --backend: expected auto, cpu or cuda, got '%s'\n", backend);
        return EXIT_USAGE;
    }
    static Config cfg;
    static Plan plan;
    if ((rc = args_load_and_plan(&a, &cfg, &plan))) return rc;
    Err err;
    char arch[16];
    /* several ranks run only as the CPU emulation, asked for by name (on a GPU machine auto would be CUDA) */
    if (train_check_ranks(&cfg, backend, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    if (!strcmp(backend, "auto")) {
        if (cuda_device_arch(0, arch, &err) == 0) backend = "cuda";
        else if (cfg.attention == ATTN_CUDNN) {   /* asked for by name: no quiet fallback to the CPU */
            fprintf(stderr, "gpt2gen: %s: attention = \"cudnn\" needs the CUDA backend: %s\n", cfg.path, err.msg);
            return EXIT_FAIL;
        } else { printf("%s: training on the CPU backend (fp32)\n", err.msg); backend = "cpu"; }
    }
    if (!strcmp(backend, "cuda")) {
        /* the kernels must be for this GPU: a config's or --arch's other target is rebuilt for it */
        if (cuda_device_arch(0, arch, &err) == 0 && strcmp(arch, plan.arch)) {
            printf("note: building for GPU 0's %s instead of %s\n", arch, plan.arch);
            if (plan_make(&plan, &cfg, arch, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
            args_tune_db(&a, &cfg, &plan);
        }
        if (build_run(&plan, a.jobs, a.quiet, NULL, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    }
    TrainOptions opt = {backend, a.quiet};
    return train_run(&cfg, &plan, &opt);
}

