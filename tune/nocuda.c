/* nocuda: tune/'s entry points (tune/tune.h, tune/kernel_tests.h) in a gpt2gen built without the CUDA toolkit's
   headers (the Makefile builds this file instead of tune/'s GPU code, as runtime/nocuda.c stands in for
   runtime/cuda/): `gpt2gen tune` fails saying so, `gpt2gen test` and the GPU tests skip saying so. */
#include "tune/tune.h"
#include "tune/kernel_tests.h"
#include "tune/report.h"
#include "runtime/gpu.h"
#include <stdio.h>
#include <string.h>

int tune_run(const Config *cfg, const TuneTargets *targets, const TuneOptions *opt, TuneReport *rep, Err *err) {
    (void)cfg; (void)targets; (void)opt;
    memset(rep, 0, sizeof *rep);
    Err why;
    cuda_backend_built(&why);
    return err_set(err, "needs a GPU: %s", why.msg);
}

void tune_report_free(TuneReport *rep) { rep->text = NULL; }

/* the skip line the GPU tests print without a GPU ("<config>/gpu"); -1 */
int kernel_tests_run(const Config *cfg, const struct Plan *plan, const Env *env) {
    (void)plan; (void)env;
    Err why;
    cuda_backend_built(&why);
    char name[300];
    snprintf(name, sizeof name, "%s/gpu", cfg->name);
    report_skip(name, "%s", why.msg);
    return -1;
}

int kernel_tests_attention_run(const Config *cfg, const struct Plan *plan, const Env *env) {
    return kernel_tests_run(cfg, plan, env);
}

int tune_test(const Config *cfg, const Plan *plan, const Plan *decode, const Env *env) {
    (void)decode;
    kernel_tests_run(cfg, plan, env);
    return report_summary() ? -1 : 0;
}
