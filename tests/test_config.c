/* test_config: the resolved config that `gpt2gen build` writes (build/<name>/config.lua, config_write_lua) is a
   fixed point: loading it gives the same Config (every field but the path it came from), and writing that again
   gives the same bytes. For every ready config, for several tunables of one family and candidate lists, and
   for strings that need escapes. Runs from the repository root (tests/run.sh does). */
#include "tests/check.h"
#include "gen/config.h"
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CHECK copies Err messages (4 KiB) and config texts into its reason buffer: cutting them is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static char tmpdir[256], written_path[300], odd_path[300];   /* the config.lua written, the odd config */

static int write_text_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(text, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* config_write_lua's text, malloc'd. */
static char *lua_text(const Config *c, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    config_write_lua(c, f);
    fclose(f);
    return buf;
}

static int tunable_cmp(const void *a, const void *b) {
    const ConfigTunable *x = a, *y = b;
    int d = strcmp(x->family, y->family);
    return d ? d : strcmp(x->name, y->name);
}

/* Zeroes a string buffer's bytes after its end (left over from an earlier, longer value). */
static void clear_tail(char *s, size_t size) {
    size_t n = strnlen(s, size);
    memset(s + n, 0, size - n);
}

static void clear_tails(Config *c) {
    clear_tail(c->name, sizeof c->name); clear_tail(c->arch, sizeof c->arch);
    clear_tail(c->data.train, sizeof c->data.train); clear_tail(c->data.val, sizeof c->data.val);
    clear_tail(c->data.tokenizer, sizeof c->data.tokenizer);
    clear_tail(c->checkpoint.dir, sizeof c->checkpoint.dir); clear_tail(c->checkpoint.init, sizeof c->checkpoint.init);
    for (int i = 0; i < c->n_tunables; i++) {
        clear_tail(c->tunables[i].family, sizeof c->tunables[i].family);
        clear_tail(c->tunables[i].name, sizeof c->tunables[i].name);
    }
}

/* a and b agree on every field but path (the tunables as a set: their order in a Config means nothing). */
static void same_config(const char *what, const Config *a, const Config *b) {
#define SAME_STR(f) CHECK(strcmp(a->f, b->f) == 0, "%s: " #f " \"%s\" came back as \"%s\"", what, a->f, b->f)
#define SAME_INT(f) CHECK(a->f == b->f, "%s: " #f " %ld came back as %ld", what, (long)a->f, (long)b->f)
#define SAME_NUM(f) CHECK(memcmp(&a->f, &b->f, sizeof(double)) == 0, "%s: " #f " %.17g came back as %.17g", what, a->f, b->f)
    SAME_STR(name); SAME_STR(arch);
    SAME_INT(model.n_layer); SAME_INT(model.n_head); SAME_INT(model.n_embd); SAME_INT(model.max_seq_len);
    SAME_INT(model.vocab_size); SAME_INT(model.padded_vocab_size);
    SAME_INT(precision);
    SAME_INT(train.batch_size); SAME_INT(train.seq_len); SAME_INT(train.total_batch_size); SAME_INT(train.steps);
    SAME_NUM(train.lr); SAME_INT(train.schedule); SAME_INT(train.warmup); SAME_NUM(train.final_lr_frac);
    SAME_NUM(train.weight_decay); SAME_NUM(train.grad_clip); SAME_NUM(train.beta1); SAME_NUM(train.beta2);
    SAME_NUM(train.eps); SAME_INT(train.seed); SAME_INT(train.recompute); SAME_INT(train.master_weights);
    SAME_INT(train.overfit_batch); SAME_INT(train.grad_accum); SAME_INT(train.num_gpus);
    SAME_STR(data.train); SAME_STR(data.val); SAME_STR(data.tokenizer);
    SAME_INT(eval.val_every); SAME_INT(eval.val_batches); SAME_INT(eval.sample_every); SAME_INT(eval.sample_tokens);
    SAME_NUM(eval.temperature);
    SAME_STR(checkpoint.dir); SAME_INT(checkpoint.every); SAME_STR(checkpoint.init); SAME_INT(checkpoint.resume);
    SAME_INT(n_tunables);
#undef SAME_STR
#undef SAME_INT
#undef SAME_NUM
    /* the tunables, sorted, one by one; then the whole struct, bytes and all, so a field this list misses
       (one added to Config later) still counts */
    static Config x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    memcpy(y.path, x.path, sizeof y.path);
    clear_tails(&x);
    clear_tails(&y);
    int n = x.n_tunables < y.n_tunables ? x.n_tunables : y.n_tunables;
    qsort(x.tunables, (size_t)x.n_tunables, sizeof x.tunables[0], tunable_cmp);
    qsort(y.tunables, (size_t)y.n_tunables, sizeof y.tunables[0], tunable_cmp);
    for (int i = 0; i < n; i++) {
        const ConfigTunable *s = &x.tunables[i], *t = &y.tunables[i];
        CHECK(memcmp(s, t, sizeof *s) == 0, "%s: tunable %s.%s (%d values, first %d) came back as %s.%s (%d values, first %d)",
              what, s->family, s->name, s->n_values, s->values[0], t->family, t->name, t->n_values, t->values[0]);
    }
    CHECK(memcmp(&x, &y, sizeof x) == 0, "%s: the Config differs after the round trip", what);
}

/* Where two texts part: "line N: 'a' became 'b'" into out. */
static void first_difference(const char *a, const char *b, char *out, size_t n) {
    int line = 1;
    const char *la = a, *lb = b;
    for (; *a && *a == *b; a++, b++)
        if (*a == '\n') { line++; la = a + 1; lb = b + 1; }
    snprintf(out, n, "line %d: '%.*s' became '%.*s'", line, (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
}

/* Loads path (with the overrides), writes it, loads what it wrote, writes that: the two texts are the same bytes
   and the two Configs the same. The first text goes to *text_out when asked for. */
static void round_trip(const char *what, const char *path, const char *const *sets, int n, Config *loaded, char **text_out) {
    static Config again;
    Err err;
    if (config_load(loaded, path, sets, n, &err)) { CHECK(0, "%s: %s", what, err.msg); return; }
    size_t n1 = 0, n2 = 0;
    char *t1 = lua_text(loaded, &n1), *t2 = NULL;
    if (!t1 || write_text_file(written_path, t1, n1)) { CHECK(0, "%s: cannot write %s", what, written_path); free(t1); return; }
    if (config_load(&again, written_path, NULL, 0, &err)) {
        CHECK(0, "%s: the written config does not load: %s", what, err.msg);
        fprintf(stderr, "%s", t1);
    } else {
        t2 = lua_text(&again, &n2);
        if (!t2 || n1 != n2 || memcmp(t1, t2, n1)) {
            char where[512];
            first_difference(t1, t2 ? t2 : "", where, sizeof where);
            CHECK(0, "%s: written again, the text changed at %s", what, where);
        }
        same_config(what, loaded, &again);
    }
    free(t2);
    if (text_out) *text_out = t1;
    else free(t1);
}

static void test_ready_configs(void) {
    glob_t g;
    int rc = glob("configs/*.lua", 0, NULL, &g), n = 0;
    CHECK(rc == 0, "no configs/*.lua here (run from the repository root)");
    if (rc) return;
    static Config c;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *p = g.gl_pathv[i];
        if (!strcmp(p, "configs/defaults.lua")) continue;
        round_trip(p, p, NULL, 0, &c, NULL);
        n++;
    }
    globfree(&g);
    printf("  %d configs round-trip\n", n);
    CHECK(n >= 6, "only %d ready configs found", n);
}

/* Several tunables of one family, and candidate lists: one table per family, nothing dropped. */
static const char *const TUNE_SETS[] = {
    "tune.layernorm.BLOCK_SIZE=512", "tune.layernorm.BWD_BLOCK_SIZE=256", "tune.matmul.ROW_SPLITS={16, 32, 64}",
    "tune.matmul.BLOCK_SIZE=128", "tune.attention.SOFTMAX_BLOCK_SIZE={64, 128}", "tune.attention.BLOCK_SIZE=256",
    "tune.norm.GRID_SIZE={256, 512, 1024, 2048}", "tune.gelu.BLOCK_SIZE={512}",
};
#define N_TUNE_SETS ((int)(sizeof TUNE_SETS / sizeof TUNE_SETS[0]))

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void test_tunables_of_one_family(void) {
    static Config c;
    char *text = NULL;
    round_trip("tiny + 8 tunables", "configs/tiny.lua", TUNE_SETS, N_TUNE_SETS, &c, &text);
    if (!text) return;
    CHECK(c.n_tunables == N_TUNE_SETS, "%d tunables read, expected %d", c.n_tunables, N_TUNE_SETS);
    CHECK(count_of(text, "layernorm = {") == 1 && count_of(text, "matmul = {") == 1 && count_of(text, "attention = {") == 1,
          "a family's tunables are not in one table (the text is on stderr)");
    CHECK(strstr(text, "  layernorm = { BLOCK_SIZE = 512, BWD_BLOCK_SIZE = 256 },\n")
          && strstr(text, "  matmul = { BLOCK_SIZE = 128, ROW_SPLITS = {16, 32, 64} },\n")
          && strstr(text, "  norm = { GRID_SIZE = {256, 512, 1024, 2048} },\n")
          && strstr(text, "  gelu = { BLOCK_SIZE = 512 },\n"), "the tune entries are not as expected (the text is on stderr)");
    if (check_cur_failed) fprintf(stderr, "%s", text);
    /* and what the rebuilt config holds */
    static Config back;
    Err err;
    if (config_load(&back, written_path, NULL, 0, &err)) { CHECK(0, "%s", err.msg); free(text); return; }
    CHECK(config_tunable(&back, "layernorm", "BLOCK_SIZE", 0) == 512 && config_tunable(&back, "layernorm", "BWD_BLOCK_SIZE", 0) == 256
          && config_tunable(&back, "matmul", "BLOCK_SIZE", 0) == 128 && config_tunable(&back, "matmul", "ROW_SPLITS", 0) == 16,
          "tunables after the round trip: layernorm %d/%d matmul %d/%d", config_tunable(&back, "layernorm", "BLOCK_SIZE", 0),
          config_tunable(&back, "layernorm", "BWD_BLOCK_SIZE", 0), config_tunable(&back, "matmul", "BLOCK_SIZE", 0),
          config_tunable(&back, "matmul", "ROW_SPLITS", 0));
    free(text);
}

/* The same tunables set in another order give the same text. */
static void test_tunable_order_does_not_matter(void) {
    const char *reversed[N_TUNE_SETS];
    for (int i = 0; i < N_TUNE_SETS; i++) reversed[i] = TUNE_SETS[N_TUNE_SETS - 1 - i];
    static Config a, b;
    char *ta = NULL, *tb = NULL;
    round_trip("tiny + 8 tunables", "configs/tiny.lua", TUNE_SETS, N_TUNE_SETS, &a, &ta);
    round_trip("tiny + 8 tunables, reversed", "configs/tiny.lua", reversed, N_TUNE_SETS, &b, &tb);
    if (ta && tb && strcmp(ta, tb)) {
        char where[512];
        first_difference(ta, tb, where, sizeof where);
        CHECK(0, "the text depends on the order the tunables were set in: %s", where);
    }
    CHECK(ta && tb, "no text");
    free(ta); free(tb);
}

/* Strings holding quotes, backslashes, control bytes and UTF-8; table keys that are not Lua names; -0.0. */
static const char ODD_CONFIG[] =
    "model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 64, vocab_size = 512 }\n"
    "name = 'odd'\n"
    "arch = 'sm_80'\n"
    "eval = { sample_tokens = 8 }\n"
    "train = { batch_size = 2, seq_len = 32, final_lr_frac = -0.0 }\n"
    "data = { train = [[data/\"quoted\" dir\\with\\backslashes\\train_*.bin]], val = \"it's\" .. '\\\\\"' .. '.bin',\n"
    "         tokenizer = 'tok\\tab\\nnewline\\0012digit\\127del \\195\\188' }\n"
    "checkpoint = { dir = 'runs/\"x\"\\\\', init = 'a]]b[[c\\\\\\\\d' }\n"
    "tune = { ['odd family'] = { ['end'] = 3, ['A-B'] = {1, 2}, _x9 = 4 }, layernorm = { BLOCK_SIZE = 512 } }\n";

static void test_strings_round_trip(void) {
    if (write_text_file(odd_path, ODD_CONFIG, sizeof ODD_CONFIG - 1)) { CHECK(0, "cannot write %s", odd_path); return; }
    static Config c;
    char *text = NULL;
    round_trip("strings with quotes and backslashes", odd_path, NULL, 0, &c, &text);
    if (!text) return;
    /* the config read what it says (so the round trip above had something to carry) */
    CHECK(!strcmp(c.data.train, "data/\"quoted\" dir\\with\\backslashes\\train_*.bin"), "data.train read as %s", c.data.train);
    CHECK(!strcmp(c.data.val, "it's\\\".bin"), "data.val read as %s", c.data.val);
    CHECK(!strcmp(c.data.tokenizer, "tok\tab\nnewline\001" "2digit\177del \xc3\xbc"), "data.tokenizer read as %s", c.data.tokenizer);
    CHECK(!strcmp(c.checkpoint.dir, "runs/\"x\"\\") && !strcmp(c.checkpoint.init, "a]]b[[c\\\\d"), "checkpoint %s %s",
          c.checkpoint.dir, c.checkpoint.init);
    CHECK(c.train.final_lr_frac == 0 && signbit(c.train.final_lr_frac), "final_lr_frac read as %g", c.train.final_lr_frac);
    CHECK(config_tunable(&c, "odd family", "end", 0) == 3 && config_tunable(&c, "odd family", "_x9", 0) == 4, "odd tunable keys");
    CHECK(strstr(text, "\n  [\"odd family\"] = { [\"A-B\"] = {1, 2}, _x9 = 4, [\"end\"] = 3 },\n"), "keys that are not Lua names, "
          "written otherwise (the text is on stderr)");
    if (check_cur_failed) fprintf(stderr, "%s", text);
    free(text);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_config.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    snprintf(written_path, sizeof written_path, "%s/config.lua", tmpdir);
    snprintf(odd_path, sizeof odd_path, "%s/odd.lua", tmpdir);
    RUN(test_ready_configs);
    RUN(test_tunables_of_one_family);
    RUN(test_tunable_order_does_not_matter);
    RUN(test_strings_round_trip);
    remove(written_path);
    remove(odd_path);
    rmdir(tmpdir);
    return check_summary();
}
