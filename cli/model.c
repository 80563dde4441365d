/* model: what the commands that take a checkpoint share (gpt2gen sample, eval, export): the model config made from
   a checkpoint's header, and the tokenizer that goes with it. */
#include "cli/commands.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "runtime/gpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the tokenizer file: --tokenizer, else one beside the checkpoint, else the default data set's */
const char *cli_pick_tokenizer(const char *given, const char *checkpoint, char *buf, size_t n) {
    if (given) return given;
    static const char *const beside[] = {"tokenizer.bin", "gpt2_tokenizer.bin"};
    const char *slash = strrchr(checkpoint, '/');
    int dir = slash ? (int)(slash - checkpoint + 1) : 0;
    for (int i = 0; i < 2; i++) {
        snprintf(buf, n, "%.*s%s", dir, checkpoint, beside[i]);
        if (file_exists(buf)) return buf;
    }
    return "data/fortunes/tokenizer.bin";
}

/* The config of the checkpoint's model: its header's ModelSpec, run with the defaults, one row of the model's
   context and no samples during training (a command that takes a checkpoint trains nothing). */
int cli_checkpoint_config(Config *cfg, const GPT2Shape *s, const char *precision, const char *checkpoint, Err *err) {
    Precision p;
    if (precision_parse(precision, &p))
        return err_set(err, "%s: precision: expected one of fp32, bf16, fp16, got \"%s\"", checkpoint, err_show(precision));
    char where[CONFIG_PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: its model cannot run here", err_show(checkpoint));
    ModelSpec m;
    if (model_spec_from_header(&m, s, p, where, err)) return -1;
    RunSpec run;
    run_spec_defaults(&run);
    run.train.batch_size = 1;
    run.train.seq_len = m.max_seq_len;
    run.eval.sample_every = 0;
    run.eval.sample_tokens = 1;
    return config_from_specs(cfg, "sample", checkpoint, &m, &run, err);
}

void cli_pick_arch(const char *backend, const char *given, char arch[16]) {
    snprintf(arch, 16, "sm_90");
    if (strcmp(backend, "cpu")) {
        const char *note;
        cuda_pick_arch(given, "", arch, &note);
    }
}

int cli_load_weights(Backend *be, const char *checkpoint, Err *err) {
    float *params = xmalloc(be->num_params * sizeof *params);
    int rc = checkpoint_load(checkpoint, &be->plan->model, params, err) || be->write(be, BACKEND_PARAMS, params, err)
             ? -1 : 0;
    free(params);
    return rc;
}
