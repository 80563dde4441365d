/* tune: the GPU self-test module as the command line sees it (cli/tune.c, cli/test.c): the tuning engine of
   `gpt2gen tune` and the per-kernel tests of `gpt2gen test`. The rest of tune/ is internal to it (the harness, the
   families' workloads and tests, the timing); only this header is for cli/. */
#ifndef GPT2GEN_TUNE_H
#define GPT2GEN_TUNE_H
#include "gen/plan.h"
#include "common/env.h"
#include "common/err.h"
#include <stddef.h>

#define TUNE_DEFAULT_ALGOS 16
#define TUNE_MAX_ALGOS 32        /* cuBLASLt candidates a matmul may try (runtime/cuda/matmul.h) */

/* what `gpt2gen tune`'s options ask for */
typedef struct {
    const char *pattern;   /* --kernels: comma-separated globs on family names, matmul names, "attention-path" or "gelu-path";
                              NULL: everything */
    double budget;         /* --budget: seconds after which no new variant is measured; 0: no limit */
    int algos;             /* --algos: cuBLASLt heuristic algorithms per matmul, 1 to TUNE_MAX_ALGOS */
    int jobs;              /* -j: parallel compiles; 0: one per core */
    const Env *env;        /* the GPT2GEN_* settings (common/env.h; NULL: the defaults): the kernel cache, the
                              tuning database, the test hook GPT2GEN_TUNE_ENV, cuDNN */
} TuneOptions;

/* the report of a tune: per kernel family and matmul the default and the chosen variant, the attention path, the
   step before and after */
typedef struct {
    char *text;            /* NULL when the tune did not start (no GPU) */
    size_t len;
    int failed;            /* checks in it that failed: a default variant that does not run, a tuned step whose
                              losses do not match the untuned one's */
} TuneReport;

/* Tunes plan (made from cfg without the tuning database: plan->cfg is cfg) on this GPU: every variant, matmul
   algorithm and attention path timed and checked, every measurement appended to the tuning database, the best
   written back as its "best" records, build/<name>/ rebuilt with them and the step timed before and after.
   Progress goes to stderr. The config is never changed: the database's choices go into copies of plan, whose
   attention path is decided again with this GPU's facts (gen/plan_attention.c). Returns 0, or -1 and err
   when the tune could not run or stopped (no GPU, a build or a step that fails); rep holds what was reported
   either way (free it with tune_report_free). */
int  tune_run(const Config *cfg, const Plan *plan, const TuneOptions *opt, TuneReport *rep, Err *err);
void tune_report_free(TuneReport *rep);

/* `gpt2gen test`: every generated kernel of plan (its CUBINs built) against the CPU reference on the GPU, then a
   whole training step against the CPU backend; then, where decode is not NULL, every kernel of that decode plan
   (the decode family's); one line per test, then "RESULT <passed> <failed> <skipped>". Without a GPU, a skip line.
   env: the GPT2GEN_* settings (NULL: the defaults). Returns 0, or -1 when a test failed. */
int  tune_test(const Config *cfg, const Plan *plan, const Plan *decode, const Env *env);
#endif
