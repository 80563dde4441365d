/* gpt2gen test: every generated kernel of a config against the CPU reference, on the GPU. */
#include "cli/commands.h"
#include "tune/tune.h"
#include <stdio.h>

static const char *TEST_USAGE =
    "usage: gpt2gen test CONFIG.lua [--set KEY=VALUE]... [--arch sm_XX] [--no-tune-db]\n"
    "\n"
    "Builds the kernels of CONFIG.lua and holds each one, on the GPU, against the CPU reference op on random\n"
    "inputs (fp32 to ~1e-5, fp16 to ~5e-3, bf16 to ~1e-2 relative), then a full training step against the CPU backend,\n"
    "then the kernels of the decode plan that samples (the key/value cache, the split attention, the draw).\n"
    "Prints one line per test and ends with \"RESULT <passed> <failed> <skipped>\". Without a GPU it says so and skips\n"
    "(exit code 0); the compile step still runs. The kernels are the tuned ones where the tuning database has them\n"
    "(as `gpt2gen build`; --no-tune-db: the default variants).\n";

int cmd_test(int argc, char **argv, const Env *env) {
    static Config cfg;
    PlanSet ps = {0};   /* planset_free frees what was made, also after a failed build */
    PlanRequest req = {1, 1, 0, 0, 0};   /* the training step and the decode plan that samples */
    int done;
    int rc = args_build(argc, argv, env, "test", TEST_USAGE, &cfg, &req, &ps, &done);
    if (!rc && !done) rc = tune_test(&cfg, ps.train, ps.decode, env) ? EXIT_FAIL : 0;
    planset_free(&ps);
    return rc;
}
