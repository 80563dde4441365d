/* gpt2gen build: generate and compile a config's kernels into build/<name>/. */
#include "cli/commands.h"
#include <stdio.h>

static const char *BUILD_USAGE =
    "usage: gpt2gen build CONFIG.lua [--arch sm_XX] [--set KEY=VALUE]... [-j N] [-q]\n"
    "\n"
    "Generates the kernel sources for CONFIG.lua, compiles them with NVRTC, and writes build/<name>/:\n"
    "  config.lua        the config with every default filled in\n"
    "  plan.txt          a section per plan (the training step; the one-row decode step that samples): kernels,\n"
    "                    launch geometry, tunables, matmuls, attention path and the GPU memory of its step\n"
    "  kernels/*.cu      the generated sources of the training plan (readable; the constants are baked in);\n"
    "                    kernels/decode/ the decode plan's\n"
    "  kernels/*.cubin   the compiled kernels\n"
    "CUBINs are cached under build/cache (or $GPT2GEN_CACHE) by a hash of source, options, arch and NVRTC\n"
    "version; a build with nothing changed compiles nothing. Without NVRTC (or the CUDA headers at CUDA_HOME) it\n"
    "writes the sources, plan.txt and config.lua and says it cannot compile them: an error where this gpt2gen has\n"
    "the CUDA backend, a note (exit code 0) where it was built without the CUDA toolkit.\n"
    "\n"
    "options:\n"
    "  --arch sm_XX      target arch (default: config's arch, else the GPU's, else sm_90)\n"
    "  --set KEY=VALUE   override a config value (repeatable)\n"
    "  -j N              compile N kernel families in parallel, 1 to 1024 (default: one per core)\n"
    "  --no-tune-db      the default variants, whatever the tuning database holds (build/tune-db.txt, or\n"
    "                    $GPT2GEN_TUNE_DB; `gpt2gen tune` makes it); without it, the build uses what the database\n"
    "                    chose for this config on this GPU, and says so in one line\n"
    "  -q                print nothing on success\n";

int cmd_build(int argc, char **argv, const Env *env) {
    static Config cfg;
    PlanSet ps = {0};   /* planset_free frees what was made, also after a failed build */
    PlanRequest req = {1, 1, 0, 0, 0};   /* the training step and the decode plan its samples run */
    int done;
    int rc = args_build(argc, argv, env, "build", BUILD_USAGE, &cfg, &req, &ps, &done);
    planset_free(&ps);
    return rc;
}
