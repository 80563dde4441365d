/* test_config: the resolved config that `gpt2gen build` writes (build/<name>/config.lua, config_write_lua) is a
   fixed point: loading it gives the same Config (every field but the path it came from), and writing that again
   gives the same bytes, with each number in the shortest text that reads back as it. For every ready config, for several tunables of one family and candidate lists, and
   for strings that need escapes or try to break out of their literal. And the limits of what loads: every int
   key of the schema against values beyond its range (beyond int, beyond int64, not finite, not integral), the
   sizes derived from them, and the length of the config's path. Runs from the repository root (tests/run.sh does). */
#include "tests/check.h"
#include "gen/config.h"
#include "gen/config_schema.h"
#include <limits.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CHECK copies Err messages (4 KiB) and config texts into its reason buffer: cutting them is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static char tmpdir[256], written_path[300], odd_path[300];   /* the config.lua written, the odd config */
static char long_path[1100];

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
    clear_tail(c->name, sizeof c->name); clear_tail(c->run.arch, sizeof c->run.arch);
    clear_tail(c->run.data.train, sizeof c->run.data.train); clear_tail(c->run.data.val, sizeof c->run.data.val);
    clear_tail(c->run.data.tokenizer, sizeof c->run.data.tokenizer);
    clear_tail(c->run.checkpoint.dir, sizeof c->run.checkpoint.dir); clear_tail(c->run.checkpoint.init, sizeof c->run.checkpoint.init);
    for (int i = 0; i < c->run.n_tunables; i++) {
        clear_tail(c->run.tunables[i].family, sizeof c->run.tunables[i].family);
        clear_tail(c->run.tunables[i].name, sizeof c->run.tunables[i].name);
    }
}

/* a and b agree on every field but path (the tunables as a set: their order in a Config means nothing). */
static void same_config(const char *what, const Config *a, const Config *b) {
#define SAME_STR(f) CHECK(strcmp(a->f, b->f) == 0, "%s: " #f " \"%s\" came back as \"%s\"", what, a->f, b->f)
#define SAME_INT(f) CHECK(a->f == b->f, "%s: " #f " %ld came back as %ld", what, (long)a->f, (long)b->f)
#define SAME_NUM(f) CHECK(memcmp(&a->f, &b->f, sizeof(double)) == 0, "%s: " #f " %.17g came back as %.17g", what, a->f, b->f)
    SAME_STR(name); SAME_STR(run.arch);
    SAME_INT(model.n_layer); SAME_INT(model.n_head); SAME_INT(model.n_embd); SAME_INT(model.max_seq_len);
    SAME_INT(model.vocab_size); SAME_INT(model.padded_vocab_size);
    SAME_INT(model.precision); SAME_INT(run.attention);
    SAME_INT(run.train.batch_size); SAME_INT(run.train.seq_len); SAME_INT(run.train.total_batch_size); SAME_INT(run.train.steps);
    SAME_NUM(run.train.lr); SAME_INT(run.train.schedule); SAME_INT(run.train.warmup); SAME_NUM(run.train.final_lr_frac);
    SAME_NUM(run.train.weight_decay); SAME_NUM(run.train.grad_clip); SAME_NUM(run.train.beta1); SAME_NUM(run.train.beta2);
    SAME_NUM(run.train.eps); SAME_INT(run.train.seed); SAME_INT(run.train.recompute); SAME_INT(run.train.deterministic); SAME_INT(run.train.master_weights);
    SAME_INT(run.train.overfit_batch); SAME_INT(run.train.grad_accum); SAME_INT(run.train.num_gpus); SAME_INT(run.train.zero_stage);
    SAME_INT(run.train.streams);
    SAME_INT(run.train.cuda_graph);
    SAME_STR(run.data.train); SAME_STR(run.data.val); SAME_STR(run.data.tokenizer);
    SAME_INT(run.eval.val_every); SAME_INT(run.eval.val_batches); SAME_INT(run.eval.sample_every); SAME_INT(run.eval.sample_tokens);
    SAME_NUM(run.eval.temperature);
    SAME_STR(run.checkpoint.dir); SAME_INT(run.checkpoint.every); SAME_STR(run.checkpoint.init); SAME_INT(run.checkpoint.resume);
    SAME_INT(run.n_tunables);
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
    int n = x.run.n_tunables < y.run.n_tunables ? x.run.n_tunables : y.run.n_tunables;
    qsort(x.run.tunables, (size_t)x.run.n_tunables, sizeof x.run.tunables[0], tunable_cmp);
    qsort(y.run.tunables, (size_t)y.run.n_tunables, sizeof y.run.tunables[0], tunable_cmp);
    for (int i = 0; i < n; i++) {
        const ConfigTunable *s = &x.run.tunables[i], *t = &y.run.tunables[i];
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

/* Numbers are written as the shortest text that reads back as the same double: lr = 6e-4 is "0.0006", not
   "0.00059999999999999995"; values that need all 17 digits keep them, and every one reads back exactly. */
static void test_short_numbers(void) {
    static const char *const sets[] = {"train.lr=6e-4", "train.weight_decay=0.1", "train.beta2=0.1 + 0.2",
                                       "train.eps=1/3", "train.final_lr_frac=2^-30", "eval.temperature=0.7"};
    static Config c;
    char *text = NULL;
    round_trip("tiny, lr 6e-4", "configs/tiny.lua", sets, (int)(sizeof sets / sizeof sets[0]), &c, &text);
    if (!text) return;
    const char *want[] = {"\n  lr = 0.0006,\n", "\n  weight_decay = 0.1,\n", "\n  beta2 = 0.30000000000000004,\n",
                          "\n  eps = 0.3333333333333333,\n", "\n  final_lr_frac = 9.313225746154785e-10,\n",
                          "\n  temperature = 0.7,\n", "\n  grad_clip = 1,\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(text, want[i]), "the written config lacks '%.*s': %s", (int)strlen(want[i]) - 2, want[i] + 1, text);
    CHECK(c.run.train.lr == 6e-4 && c.run.train.weight_decay == 0.1, "lr %.17g, weight_decay %.17g", c.run.train.lr, c.run.train.weight_decay);
    free(text);
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
    "tune.layernorm.BLOCK_SIZE=512", "tune.layernorm.BWD_BLOCK_SIZE=256", "tune.bias.ROW_SPLITS={16, 32, 64}",
    "tune.bias.BLOCK_SIZE=128", "tune.attention.SOFTMAX_BLOCK_SIZE={64, 128}", "tune.attention.BLOCK_SIZE=256",
    "tune.grad_norm.GRID_SIZE={256, 512, 1024, 2048}", "tune.gelu.BLOCK_SIZE={512}",
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
    CHECK(c.run.n_tunables == N_TUNE_SETS, "%d tunables read, expected %d", c.run.n_tunables, N_TUNE_SETS);
    CHECK(count_of(text, "layernorm = {") == 1 && count_of(text, "bias = {") == 1 && count_of(text, "attention = {") == 1,
          "a family's tunables are not in one table (the text is on stderr)");
    CHECK(strstr(text, "  layernorm = { BLOCK_SIZE = 512, BWD_BLOCK_SIZE = 256 },\n")
          && strstr(text, "  bias = { BLOCK_SIZE = 128, ROW_SPLITS = {16, 32, 64} },\n")
          && strstr(text, "  grad_norm = { GRID_SIZE = {256, 512, 1024, 2048} },\n")
          && strstr(text, "  gelu = { BLOCK_SIZE = 512 },\n"), "the tune entries are not as expected (the text is on stderr)");
    if (check_cur_failed) fprintf(stderr, "%s", text);
    /* and what the rebuilt config holds */
    static Config back;
    Err err;
    if (config_load(&back, written_path, NULL, 0, &err)) { CHECK(0, "%s", err.msg); free(text); return; }
    CHECK(config_tunable(&back, "layernorm", "BLOCK_SIZE", 0) == 512 && config_tunable(&back, "layernorm", "BWD_BLOCK_SIZE", 0) == 256
          && config_tunable(&back, "bias", "BLOCK_SIZE", 0) == 128 && config_tunable(&back, "bias", "ROW_SPLITS", 0) == 16,
          "tunables after the round trip: layernorm %d/%d bias %d/%d", config_tunable(&back, "layernorm", "BLOCK_SIZE", 0),
          config_tunable(&back, "layernorm", "BWD_BLOCK_SIZE", 0), config_tunable(&back, "bias", "BLOCK_SIZE", 0),
          config_tunable(&back, "bias", "ROW_SPLITS", 0));
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

/* Writes config (a C string) to odd_path and round-trips it into *c; the written text (malloc'd), or NULL. */
static char *round_trip_text(const char *what, const char *config, Config *c) {
    char *text = NULL;
    if (write_text_file(odd_path, config, strlen(config))) CHECK(0, "cannot write %s", odd_path);
    else round_trip(what, odd_path, NULL, 0, c, &text);
    return text;
}

static void test_strings_round_trip(void) {
    static Config c;
    char *text = round_trip_text("strings with quotes and backslashes", ODD_CONFIG, &c);
    if (!text) return;
    /* the config read what it says (so the round trip above had something to carry) */
    CHECK(!strcmp(c.run.data.train, "data/\"quoted\" dir\\with\\backslashes\\train_*.bin"), "data.train read as %s", c.run.data.train);
    CHECK(!strcmp(c.run.data.val, "it's\\\".bin"), "data.val read as %s", c.run.data.val);
    CHECK(!strcmp(c.run.data.tokenizer, "tok\tab\nnewline\001" "2digit\177del \xc3\xbc"), "data.tokenizer read as %s", c.run.data.tokenizer);
    CHECK(!strcmp(c.run.checkpoint.dir, "runs/\"x\"\\") && !strcmp(c.run.checkpoint.init, "a]]b[[c\\\\d"), "checkpoint %s %s",
          c.run.checkpoint.dir, c.run.checkpoint.init);
    CHECK(c.run.train.final_lr_frac == 0 && signbit(c.run.train.final_lr_frac), "final_lr_frac read as %g", c.run.train.final_lr_frac);
    CHECK(config_tunable(&c, "odd family", "end", 0) == 3 && config_tunable(&c, "odd family", "_x9", 0) == 4, "odd tunable keys");
    CHECK(strstr(text, "\n  [\"odd family\"] = { [\"A-B\"] = {1, 2}, _x9 = 4, [\"end\"] = 3 },\n"), "keys that are not Lua names, "
          "written otherwise (the text is on stderr)");
    if (check_cur_failed) fprintf(stderr, "%s", text);
    free(text);
}

/* Strings that try to end their literal and run code (or assign other keys): written escaped, they read back
   as the same bytes, and the written file assigns nothing else (an extra key would not load). */
static const char INJECT_CONFIG[] =
    "model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 64, vocab_size = 512 }\n"
    "eval = { sample_tokens = 8 }\n"
    "data = { train = 'x\" os = 1 --', val = ']] name = \"evil\" --[[', tokenizer = '\\n name = \"evil\"\\n--' }\n"
    "checkpoint = { dir = '\\\\\" .. error(1) .. \"', init = '%s%n\\r\\0270' }\n"
    "tune = { ['a\"] = 1 } os = { [\"'] = { ['\\n name = 1 --'] = 8 } }\n";

static void test_strings_cannot_break_out(void) {
    static Config c;
    char *text = round_trip_text("strings that try to break out", INJECT_CONFIG, &c);
    if (!text) return;
    CHECK(!strcmp(c.run.data.train, "x\" os = 1 --") && !strcmp(c.run.data.val, "]] name = \"evil\" --[[")
          && !strcmp(c.run.data.tokenizer, "\n name = \"evil\"\n--") && !strcmp(c.run.checkpoint.dir, "\\\" .. error(1) .. \"")
          && !strcmp(c.run.checkpoint.init, "%s%n\r\x1b" "0"), "the strings were read as %s | %s | %s | %s | %s", c.run.data.train, c.run.data.val,
          c.run.data.tokenizer, c.run.checkpoint.dir, c.run.checkpoint.init);
    CHECK(config_tunable(&c, "a\"] = 1 } os = { [\"", "\n name = 1 --", 0) == 8, "the tunable with the odd names was not read back");
    CHECK(!strstr(text, "\nos =") && !strstr(text, "\n name = \"evil\""), "the written text breaks out (it is on stderr)");
    if (check_cur_failed) fprintf(stderr, "%s", text);
    free(text);
}

/* Loads text as a config (written to odd_path). */
static int load_text(const char *text, Config *c, Err *err) {
    if (write_text_file(odd_path, text, strlen(text))) return err_set(err, "cannot write %s", odd_path);
    return config_load(c, odd_path, NULL, 0, err);
}

#define SMALL_MODEL "model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 64, vocab_size = 512 }\ntrain = { batch_size = 2 }\n"

/* Every int key of the schema, against values it cannot hold: above its range (as a float beyond int, an
   integer beyond int, beyond int64, math.maxinteger), below (-2^63, math.mininteger), and no integer at all
   (nan, inf, 2.5, a string, a boolean). Each gives an error naming the key and the range. */
static void test_every_int_key_range(void) {
    enum { ABOVE, BELOW, NOT_INT };
    static const struct { const char *lua; int kind; int only_int; } VALUES[] = {
        {"3e9", ABOVE, 1}, {"2147483648", ABOVE, 1}, {"math.maxinteger", ABOVE, 1}, {"2^63", ABOVE, 0}, {"1e300", ABOVE, 0},
        {"-2^63", BELOW, 0}, {"math.mininteger", BELOW, 0}, {"-1", BELOW, 0},
        {"0/0", NOT_INT, 0}, {"1/0", NOT_INT, 0}, {"-1/0", NOT_INT, 0}, {"2.5", NOT_INT, 0}, {"'7'", NOT_INT, 0}, {"true", NOT_INT, 0}};
    static Config c;
    int n = 0;
    for (const Section *sec = SECTIONS; sec->name; sec++)
        for (const Field *f = sec->fields; f->key; f++) {
            if (f->kind != VAL_INT) continue;
            for (size_t v = 0; v < sizeof VALUES / sizeof VALUES[0]; v++) {
                if (VALUES[v].only_int && f->size != sizeof(int)) continue;   /* in range for a long */
                if (VALUES[v].kind == BELOW && !strcmp(VALUES[v].lua, "-1") && f->min > 0) continue;   /* -1 tested once per non-negative key */
                char text[512], key[64], want[128];
                snprintf(text, sizeof text, SMALL_MODEL "%s = { %s = %s }\n", sec->name, f->key, VALUES[v].lua);
                snprintf(key, sizeof key, ": %s.%s: ", sec->name, f->key);
                if (VALUES[v].kind == ABOVE) snprintf(want, sizeof want, "is out of range: at most %lld", f->max);
                else if (VALUES[v].kind == NOT_INT) snprintf(want, sizeof want, "expected an integer, got");
                else if (f->min == 1) snprintf(want, sizeof want, "expected a positive integer, got");
                else if (f->min == 0) snprintf(want, sizeof want, "expected a non-negative integer, got");
                else snprintf(want, sizeof want, "is out of range: at least %.0f", f->min);
                Err err;
                int rc = load_text(text, &c, &err);
                CHECK(rc == -1 && strstr(err.msg, key) && strstr(err.msg, want), "%s.%s = %s: %s (expected '%s')",
                      sec->name, f->key, VALUES[v].lua, rc ? err.msg : "loaded", want);
                n++;
            }
        }
    printf("  %d bad values rejected\n", n);
}

/* Each config text (after SMALL_MODEL) is refused, with a message that holds want. */
typedef struct { const char *text, *want; } Refusal;
static void expect_refused(const Refusal *bad, size_t n) {
    static Config c;
    Err err;
    for (size_t i = 0; i < n; i++) {
        char text[512];
        snprintf(text, sizeof text, SMALL_MODEL "%s\n", bad[i].text);
        int rc = load_text(text, &c, &err);
        CHECK(rc == -1 && strstr(err.msg, bad[i].want), "%s: %s (expected '%s')", bad[i].text, rc ? err.msg : "loaded", bad[i].want);
    }
}

/* Values at the edge of their range load; one past it does not. */
static void test_range_edges(void) {
    static Config c;
    Err err;
    int rc = load_text(SMALL_MODEL "train = { steps = 2147483646, seed = math.maxinteger, total_batch_size = 128 * 2147483647 }\n"
                       "eval = { val_every = 2147483647 }\n", &c, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc == 0) CHECK(c.run.train.steps == INT_MAX - 1 && c.run.train.seed == LONG_MAX && c.run.train.grad_accum == INT_MAX
                       && c.run.train.total_batch_size == 128L * INT_MAX && c.run.eval.val_every == INT_MAX,
                       "steps %d seed %ld grad_accum %d", c.run.train.steps, c.run.train.seed, c.run.train.grad_accum);
    static const Refusal BAD[] = {
        {"train = { steps = 2147483647 }", "train.steps: 2147483647 is out of range: at most 2147483646"},
        {"train = { total_batch_size = 128 * 2147483648 }", "train.total_batch_size: 274877906944 is out of range: at most 274877906816"},
        {"train = { total_batch_size = 128 * 4294967296 }", "train.total_batch_size: 549755813888 is out of range"},
        {"train = { batch_size = 2^24, num_gpus = 2^7 }", "train.batch_size: batch_size*seq_len*num_gpus = 16777216*64*128 is out of range"},
        {"model = { max_seq_len = 2^31 - 1 } train = { batch_size = 2^31 - 1, num_gpus = 2^31 - 1 }", "train.batch_size: batch_size*seq_len*num_gpus"},
        {"model = { n_head = 2^24, n_embd = 2^30 }", "model: n_layer=2, n_embd=1073741824, vocab_size=512, max_seq_len=64 give"},
        {"model = { n_layer = 2^31 - 1 }", "parameters: out of range"},
        {"model = { n_layer = 1024, n_head = 8, n_embd = 512, max_seq_len = 2^20 } train = { batch_size = 1024, seq_len = 2^20 }",
         "of activations per micro-step: out of range"},
        /* the MLP's width counts: SwiGLU's hidden size alone takes a micro-step past the bound */
        {"model = { mlp = \"swiglu\", n_ffn = 2^20, bias = false } train = { batch_size = 2^24 }", "of activations per micro-step: out of range"},
    };
    expect_refused(BAD, sizeof BAD / sizeof BAD[0]);
}

/* The loss scaler's keys (fp16): their defaults, the edges of train.loss_scale (a power of two in [1, 2^24]),
   and fp16 without master weights, each refused with the key and what was expected. */
static void test_loss_scale_keys(void) {
    static Config c;
    Err err;
    int rc = load_text(SMALL_MODEL "precision = 'fp16'\n", &c, &err);
    CHECK(rc == 0 && c.run.train.loss_scale == 65536 && c.run.train.loss_scale_interval == 1000 && c.run.train.master_weights,
          "defaults: %s loss_scale %g interval %d", rc ? err.msg : "", c.run.train.loss_scale, c.run.train.loss_scale_interval);
    rc = load_text(SMALL_MODEL "train = { loss_scale = 2^24, loss_scale_interval = 1 }\n", &c, &err);
    CHECK(rc == 0 && c.run.train.loss_scale == 16777216 && c.run.train.loss_scale_interval == 1, "2^24: %s", rc ? err.msg : "");
    rc = load_text(SMALL_MODEL "train = { loss_scale = 1 }\n", &c, &err);
    CHECK(rc == 0 && c.run.train.loss_scale == 1, "1: %s", rc ? err.msg : "");
    static const Refusal BAD[] = {
        {"train = { loss_scale = 3 }", "train.loss_scale: expected a power of two from 1 to 2^24 = 16777216, got 3"},
        {"train = { loss_scale = 2^24 + 2 }", "train.loss_scale: expected a power of two from 1 to 2^24 = 16777216, got 1.67772e+07"},
        {"train = { loss_scale = 2^25 }", "train.loss_scale: expected a power of two from 1 to 2^24"},
        {"train = { loss_scale = 0.5 }", "train.loss_scale: expected a finite number >= 1, got 0.5"},
        {"train = { loss_scale = 1/0 }", "train.loss_scale: expected a finite number >= 1"},
        {"train = { loss_scale_interval = 0 }", "train.loss_scale_interval: expected a positive integer, got 0"},
        {"precision = 'fp16' train = { master_weights = false }", "train.master_weights: precision fp16 needs true"},
    };
    expect_refused(BAD, sizeof BAD / sizeof BAD[0]);
    /* bf16 without master weights stays allowed */
    rc = load_text(SMALL_MODEL "precision = 'bf16' train = { master_weights = false }\n", &c, &err);
    CHECK(rc == 0, "bf16 without master weights: %s", err.msg);
}

/* attention: auto by default, cudnn and flash by name; anything else is refused with the key and the choices. */
static void test_attention_key(void) {
    static Config c;
    Err err;
    int rc = load_text(SMALL_MODEL, &c, &err);
    CHECK(rc == 0 && c.run.attention == ATTN_AUTO, "default: %s %d", rc ? err.msg : "", (int)c.run.attention);
    rc = load_text(SMALL_MODEL "attention = 'cudnn'\n", &c, &err);
    CHECK(rc == 0 && c.run.attention == ATTN_CUDNN, "cudnn: %s", rc ? err.msg : "");
    rc = load_text(SMALL_MODEL "attention = 'flash'\n", &c, &err);
    CHECK(rc == 0 && c.run.attention == ATTN_FLASH, "flash: %s", rc ? err.msg : "");
    static const Refusal BAD[] = {
        {"attention = 'fast'", "attention: expected one of auto, cudnn, flash, got \"fast\""},
        {"attention = 1", "attention: expected one of auto, cudnn, flash, got 1"},
        {"attention = { 'cudnn' }", "attention: expected one of auto, cudnn, flash"},
    };
    expect_refused(BAD, sizeof BAD / sizeof BAD[0]);
}

/* A config path of CONFIG_PATH_MAX - 1 characters loads; one more is refused, not cut short. */
static void test_path_length(void) {
    static Config c;
    Err err;
    if (write_text_file(odd_path, SMALL_MODEL, strlen(SMALL_MODEL))) { CHECK(0, "cannot write %s", odd_path); return; }
    for (size_t len = CONFIG_PATH_MAX - 1; len <= CONFIG_PATH_MAX; len++) {
        /* tmpdir, then slashes ("a//b" is "a/b"), then "odd.lua": len characters */
        size_t head = strlen(tmpdir), slashes = len - head - strlen("odd.lua");
        memcpy(long_path, tmpdir, head);
        memset(long_path + head, '/', slashes);
        strcpy(long_path + head + slashes, "odd.lua");
        int rc = config_load(&c, long_path, NULL, 0, &err);
        if (len < CONFIG_PATH_MAX) CHECK(rc == 0 && !strcmp(c.path, long_path), "a path of %zu characters: %s", len, rc ? err.msg : "cut short");
        else CHECK(rc == -1 && strstr(err.msg, "characters long: at most 1023"), "a path of %zu characters: %s", len, rc ? err.msg : "loaded");
    }
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_config.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    snprintf(written_path, sizeof written_path, "%s/config.lua", tmpdir);
    snprintf(odd_path, sizeof odd_path, "%s/odd.lua", tmpdir);
    RUN(test_ready_configs);
    RUN(test_short_numbers);
    RUN(test_tunables_of_one_family);
    RUN(test_tunable_order_does_not_matter);
    RUN(test_strings_round_trip);
    RUN(test_strings_cannot_break_out);
    RUN(test_every_int_key_range);
    RUN(test_range_edges);
    RUN(test_loss_scale_keys);
    RUN(test_attention_key);
    RUN(test_path_length);
    remove(written_path);
    remove(odd_path);
    rmdir(tmpdir);
    return check_summary();
}
