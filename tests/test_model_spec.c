/* test_model_spec: a checkpoint header's model (model_spec_from_header) goes through the same checks as a config's,
 * with the same messages, and a Config made in C from a ModelSpec and the default RunSpec (config_from_specs, what
 * the commands that take a checkpoint use) equals the one a config file saying the same gives. */
#include "tests/check.h"
/* CHECK copies Err messages into its reason buffer: cutting them is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "gen/config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64] = "/tmp/test_model_spec.XXXXXX", path[128];

static int load_text(const char *text, Config *c, Err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return err_set(err, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return config_load(c, path, NULL, 0, err);
}

typedef struct { int L, NH, C, maxT, V; const char *says; } BadModel;

/* Each model refused by both, with the same message after the prefix naming the file or checkpoint. */
static void test_same_checks(void) {
    static const BadModel bad[] = {
        {2, 3, 64, 64, 512, "model.n_embd: 64 is not divisible by model.n_head 3"},
        {2, 1, 528, 64, 512, "head size n_embd/n_head = 528"},
        {2, 6, 48, 64, 512, "model.n_embd: 48 is not supported"},
        {2, 2, 64, 64, 70000, "does not fit the uint16 token shards"},
        {100000, 64, 8192, 64, 512, "parameters: out of range"},
    };
    static Config c;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const BadModel *b = &bad[i];
        char text[256];
        snprintf(text, sizeof text, "model = { n_layer = %d, n_head = %d, n_embd = %d, max_seq_len = %d, vocab_size = %d }\n",
                 b->L, b->NH, b->C, b->maxT, b->V);
        Err e1 = {{0}}, e2 = {{0}};
        int rc1 = load_text(text, &c, &e1);
        GPT2Shape s = gpt2_shape(b->maxT, b->V, (b->V + 127) / 128 * 128, b->L, b->NH, b->C);
        ModelSpec m;
        int rc2 = model_spec_from_header(&m, &s, PREC_BF16, "ckpt.bin", &e2);
        CHECK(rc1 && rc2, "model %zu: refused by the config %d, by the header %d", i, rc1, rc2);
        if (!rc1 || !rc2) continue;
        size_t p1 = strlen(path) + 2, p2 = strlen("ckpt.bin") + 2;
        CHECK(!strncmp(e2.msg, "ckpt.bin: ", p2), "model %zu: the header's message names the checkpoint: %s", i, e2.msg);
        CHECK(!strcmp(e1.msg + p1, e2.msg + p2), "model %zu: config says \"%s\", header says \"%s\"", i, e1.msg, e2.msg);
        CHECK(strstr(e2.msg, b->says) != NULL, "model %zu: \"%s\" lacks \"%s\"", i, e2.msg, b->says);
    }
    GPT2Shape zero = gpt2_shape(64, 512, 512, 0, 2, 64);
    ModelSpec m;
    Err e = {{0}};
    CHECK(model_spec_from_header(&m, &zero, PREC_FP32, "ckpt.bin", &e) && strstr(e.msg, "ckpt.bin: model.n_layer: 0 is out of range"),
          "a header with no layers: %s", e.msg);
}

/* The C path equals the Lua path, byte for byte in the model and the run. */
static void test_specs_equal_config(void) {
    static Config from_lua, from_c;
    Err err = {{0}};
    const char *text = "name = \"sample\"\nprecision = \"fp32\"\n"
                       "model = { n_layer = 2, n_head = 4, n_embd = 64, max_seq_len = 96, vocab_size = 300 }\n"
                       "train = { batch_size = 1, seq_len = 96 }\neval = { sample_every = 0, sample_tokens = 1 }\n";
    CHECK_OK(load_text(text, &from_lua, &err), &err);
    GPT2Shape s = gpt2_shape(96, 300, 384, 2, 4, 64);
    ModelSpec m;
    RunSpec run;
    CHECK_OK(model_spec_from_header(&m, &s, PREC_FP32, "ckpt.bin", &err), &err);
    run_spec_defaults(&run);
    run.train.batch_size = 1;
    run.train.seq_len = 96;
    run.eval.sample_every = 0;
    run.eval.sample_tokens = 1;
    CHECK_OK(config_from_specs(&from_c, "sample", "ckpt.bin", &m, &run, &err), &err);
    CHECK(m.padded_vocab_size == 384 && m.architecture == MODEL_GPT2, "padded %d, architecture %d", m.padded_vocab_size, m.architecture);
    CHECK(!memcmp(&from_lua.model, &from_c.model, sizeof m), "the ModelSpecs differ");
    CHECK(!memcmp(&from_lua.run, &from_c.run, sizeof run), "the RunSpecs differ (train.lr %g/%g, checkpoint.dir %s/%s)",
          from_lua.run.train.lr, from_c.run.train.lr, from_lua.run.checkpoint.dir, from_c.run.checkpoint.dir);
    CHECK(!strcmp(model_architecture_name(from_c.model.architecture), "gpt2"), "architecture name");
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(path, sizeof path, "%s/m.lua", dir);
    RUN(test_same_checks);
    RUN(test_specs_equal_config);
    remove(path);
    rmdir(dir);
    return check_summary();
}
