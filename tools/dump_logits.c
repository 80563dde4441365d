/* dump_logits: the logits our CPU backend computes for one row of tokens, from a model checkpoint, written as raw
   fp32 (T rows of V, position by position): the reference that tests/cli/hf.sh and tests/gpu/hf.py hold other
   implementations of GPT-2 (a numpy forward, transformers) against. Built as build/tests/dump_logits (make
   tests-bin); not part of gpt2gen.

   usage: dump_logits CHECKPOINT OUT.f32 TOKEN...      (T = the number of tokens, 1..maxT) */
#include "cli/commands.h"
#include "common/files.h"
#include "runtime/backend.h"
#include "runtime/checkpoint.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run(const char *checkpoint, const char *out, int T, char **tokens, Err *err) {
    GPT2Shape shape;
    int is_bf16;
    if (checkpoint_read_header(checkpoint, &shape, &is_bf16, err)) return -1;
    if (T > shape.max_seq_len)
        return err_set(err, "%d tokens, more than the model's maxT %d (%s)", T, shape.max_seq_len, checkpoint);
    int32_t *ids = xmalloc((size_t)T * sizeof *ids);
    for (int t = 0; t < T; t++) {
        char *end;
        errno = 0;
        long v = strtol(tokens[t], &end, 10);
        if (errno || end == tokens[t] || *end || v < 0 || v >= shape.vocab_size) {
            free(ids);
            return err_set(err, "token %d: expected an id from 0 to %d, got '%s'", t, shape.vocab_size - 1, err_show(tokens[t]));
        }
        ids[t] = (int32_t)v;
    }
    Config *cfg = xcalloc(1, sizeof *cfg);
    PlanSet ps = {0};
    Backend *be = NULL;
    float *logits = xmalloc((size_t)T * shape.vocab_size * sizeof *logits);
    int rc = -1;
    if (cli_checkpoint_config(cfg, &shape, "fp32", checkpoint, err)) goto done;
    /* one row of the eval plan of T's bucket: the padding after position T-1 does not reach positions before it */
    PlanRequest req = {0, 0, 1, 0, 0};
    CliTuning untuned = {env_or_defaults(NULL), 1, NULL, NULL, 0, NULL, NULL, NULL};
    if (cli_plans(cfg, &req, "sm_90", &untuned, &ps, err)) goto done;
    const Plan *plan = ps.eval[planset_bucket(&ps, T)];
    int32_t *row = xcalloc((size_t)plan->step.T, sizeof *row);
    memcpy(row, ids, (size_t)T * sizeof *row);
    BackendOptions o = {plan, 0, 0, 0, NULL, NULL, NULL};
    int failed = !(be = cpu_backend_create(&o, err)) || cli_load_weights(be, checkpoint, err) ||
                 be->run(be, &(BackendRun){.phase = BACKEND_FORWARD, .inputs = row}, err);
    free(row);
    if (failed) goto done;
    for (int t = 0; t < T; t++)
        if (be->read(be, BACKEND_LOGITS, (size_t)t, logits + (size_t)t * shape.vocab_size, err)) goto done;
    rc = write_file_atomic(out, logits, (size_t)T * shape.vocab_size * sizeof *logits, err);
done:
    if (be) be->destroy(be);
    planset_free(&ps);
    free(ids); free(cfg); free(logits);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: dump_logits CHECKPOINT OUT.f32 TOKEN...\n");
        return EXIT_USAGE;
    }
    Err err = {{0}};
    if (run(argv[1], argv[2], argc - 3, argv + 3, &err)) {
        fprintf(stderr, "dump_logits: %s\n", err.msg);
        return EXIT_FAIL;
    }
    return 0;
}
