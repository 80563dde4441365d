/* kernel_tests: the per-variant GPU regression tests (see kernel_tests.h). Each family's test (tune/families.c
   lists them) calls its kernels through the typed launchers generated from their declarations
   (build/gen/kernel_launch.h), matmuls through the plan's entries; after them, every declared kernel must have been
   launched at least once. The whole training step is tune/step_test.c; buffers and comparisons are tune/harness.c. */
#include "tune/kernel_tests.h"
#include "tune/families.h"
#include "tune/report.h"
#include "runtime/cuda/tune_api.h"
#include <stdio.h>
#include <string.h>

/* Every kernel of the plan's families must have run in the tests above (or in a test skipped at this size): a
   kernel added without a test fails here. */
static void check_coverage(Harness *g) {
    char missing[1024] = "";
    int skipped = 0, n = 0;
    for (int id = 0; id < g->plan->n_kernels; id++) skipped += g->skipped[id];
    for (int id = 0; id < g->plan->n_kernels; id++) {
        if (g->plan->kernels[id].family < 0) continue;   /* not this plan's */
        n++;
        if (!g->ks.launches[id] && !g->skipped[id]) {
            size_t len = strlen(missing);
            snprintf(missing + len, sizeof missing - len, "%s%s", len ? ", " : "", g->plan->kernels[id].decl->name);
        }
    }
    if (missing[0]) harness_fail(g, "coverage", "declared kernels no test launched: %s", missing);
    else harness_ok(g, "coverage", "all %d kernels of the plan's families tested%s", n, skipped ? ", some in skipped tests" : "");
}

static int plan_has(const Plan *plan, const char *family) {
    for (int i = 0; i < plan->n_families; i++)
        if (!strcmp(plan->families[i].decl->family, family)) return 1;
    return 0;
}

static int setup(Harness *g, Err *err) {
    if (kernels_load(&g->ks, g->plan, &g->dev, g->env, err)) return -1;
    g->ks.sync_each = 1;
    if (cuda_check(cu.cuMemAlloc(&g->workspace, CUBLASLT_WORKSPACE_BYTES), "cuBLASLt workspace", err)) return -1;
    return matmuls_init(&g->mm, g->plan->matmuls, MM_COUNT, g->prec, g->workspace, CUBLASLT_WORKSPACE_BYTES, err);
}

int kernel_tests_attention_run(const Config *cfg, const struct Plan *plan, const Env *env) {
    static Harness g;
    if (harness_open(&g, cfg, plan, env)) return -1;
    int failed0 = report_failed_count();
    Err err = {{0}};
    if (kernels_load(&g.ks, plan, &g.dev, env, &err)) harness_fail(&g, "setup", "%s", err.msg);
    else {
        g.ks.sync_each = 1;
        kernel_test_attention_paths(&g, 1);
    }
    kernels_unload(&g.ks);
    cuda_device_close(&g.dev);
    return report_failed_count() - failed0;
}

int kernel_tests_run(const Config *cfg, const struct Plan *plan, const Env *env) {
    static Harness g;   /* large; one test run at a time */
    if (harness_open(&g, cfg, plan, env)) return -1;
    Err err = {{0}};
    int failed0 = report_failed_count();
    if (setup(&g, &err)) harness_fail(&g, "setup", "%s", err.msg);
    else {
        printf("== %s, plan %s: %s, B=%d T=%d C=%d NH=%d L=%d on %s (sm_%d%d)\n", cfg->name, plan->name,
               precision_name(plan->step.precision), g.B, g.T, g.C, g.NH, g.L, g.dev.name, g.dev.cc_major, g.dev.cc_minor);
        fflush(stdout);
        for (const FamilyEntry *f = tune_families; f->family; f++)
            if (plan_has(plan, f->family)) f->test(&g);
        check_coverage(&g);
        if (plan->step.kind == STEP_TRAIN) {
            step_test_train(&g);
            step_test_two_streams(&g);
            step_test_graph(&g);
        }
    }
    matmuls_destroy(&g.mm);
    if (g.workspace) cu.cuMemFree(g.workspace);
    kernels_unload(&g.ks);
    cuda_device_close(&g.dev);
    int failed = report_failed_count() - failed0;
    printf("== %s: %d failed\n", cfg->name, failed);
    fflush(stdout);
    return failed;
}

int tune_test(const Config *cfg, const struct Plan *plan, const struct Plan *decode, const Env *env) {
    int failed = kernel_tests_run(cfg, plan, env);
    if (failed >= 0 && decode) {
        int f2 = kernel_tests_run(cfg, decode, env);
        failed = f2 < 0 ? failed : failed + f2;
    }
    return report_summary() || failed > 0 ? -1 : 0;   /* "RESULT p f s", as every test program ends */
}

