/* model: what the commands that take a checkpoint share (gpt2gen sample, eval, export): the model config made from
   a checkpoint's header, and the tokenizer that goes with it. */
#include "cli/commands.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "runtime/gpu.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The config of the checkpoint's model: a generated Lua file through the same checks as any config. */
int cli_checkpoint_config(Config *cfg, const GPT2Shape *s, const char *precision, const char *checkpoint, Err *err) {
    char path[] = "/tmp/gpt2gen-model-XXXXXX.lua";
    int fd = mkstemps(path, 4);
    if (fd < 0) return err_set(err, "%s: cannot create a temporary file: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) { close(fd); unlink(path); return err_set(err, "%s: cannot write", path); }
    fprintf(f, "name = \"sample\"\nprecision = \"%s\"\n", precision);
    fprintf(f, "model = { n_layer = %d, n_head = %d, n_embd = %d, max_seq_len = %d, vocab_size = %d }\n", s->n_layer,
            s->n_head, s->n_embd, s->max_seq_len, s->vocab_size);
    fprintf(f, "train = { batch_size = 1, seq_len = %d }\neval = { sample_every = 0, sample_tokens = 1 }\n", s->max_seq_len);
    int bad = fclose(f) != 0;
    int rc = bad ? err_set(err, "%s: cannot write", path) : config_load(cfg, path, NULL, 0, err);
    unlink(path);
    if (rc && !bad) {   /* the message names the generated file: name the checkpoint whose header it holds */
        Err why = *err;
        const char *at = strstr(why.msg, path);
        err_set(err, "%s: its model cannot run here: %s", checkpoint, at ? at + strlen(path) + 2 : why.msg);
    }
    return rc;
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
    int rc = checkpoint_load(checkpoint, &be->plan->model, params, err) || be->set_params(be, params, err) ? -1 : 0;
    free(params);
    return rc;
}
