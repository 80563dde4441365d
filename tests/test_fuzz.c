/* test_fuzz: the file readers under mutated input. For each reader (config, token shard, model checkpoint,
 * resume state, tokenizer, tuning database, the ranks' id file, a run's metrics.jsonl) a valid file is written first (and must be
 * accepted), then thousands of mutations of it (flipped bits, overwritten bytes, header fields set to extreme values,
 * truncation, appended garbage, repeated chunks, and for the config, replaced tokens) are fed to the reader. Each
 * must either load or give an error message: a crash, a hang or (under `make sanitize`) a memory error fails the
 * run, and so does a changed resume state that is accepted (it carries a checksum), and a tuning database record
 * that does not format back to a line that parses to it, or whose choice the plan cannot take. Deterministic (seeded), and
 * well under a minute. Issue 42's borders too: a metrics log opened for appending only where it is ours and
 * never changed but for a cut last line, the temporary names of killed writes, a prompt file's size bound. FUZZ_CASES=N changes the number of cases per reader. */
#include "tests/check.h"
#include "gen/config.h"
#include "gen/tune_db.h"
#include "runtime/checkpoint.h"
#include "runtime/data/shard.h"
#include "runtime/train/state.h"
#include "runtime/data/tokenizer.h"
#include "runtime/ranks/launch.h"
#include "runtime/train/metrics.h"
#include "runtime/train/plot.h"
#include "common/files.h"
#include "common/rng.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

static char dir[] = "/tmp/gpt2gen-fuzz-XXXXXX";
static uint64_t rng = 0x5eed;
static int n_cases = 2000;

static char *path_of(const char *name) {
    static char buf[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

typedef struct { unsigned char *p; size_t n; } Bytes;

static unsigned pick(unsigned n) { return n ? (unsigned)(rng_next(&rng) % n) : 0; }

/* For a text (header_ints < 0): a token (a run of letters, digits, '.', '_') replaced by a value a config
   might hold by mistake or on purpose. */
static void replace_token(Bytes *m, size_t cap) {
    static const char *const values[] = {"1e308", "-1", "0", "2^63", "-2^63", "3e9", "nil", "{}", "\"x\"", "true",
        "-0.0", "0/0", "math.huge", "{1, 2, 3}", "\"../x\"", "setmetatable({}, {__index = function() return 1 end})"};
    if (!m->n) return;
    size_t at = pick((unsigned)m->n), end = at;
    #define TOKEN_CHAR(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || ((c) >= '0' && (c) <= '9') || (c) == '.' || (c) == '_')
    while (at > 0 && TOKEN_CHAR(m->p[at - 1])) at--;
    while (end < m->n && TOKEN_CHAR(m->p[end])) end++;
    #undef TOKEN_CHAR
    const char *v = values[pick(sizeof values / sizeof values[0])];
    size_t len = strlen(v);
    if (m->n - (end - at) + len > cap) return;
    memmove(m->p + at + len, m->p + end, m->n - end);
    memcpy(m->p + at, v, len);
    m->n = m->n - (end - at) + len;
}

/* One mutation of seed (malloc'd). header_ints: how many leading int32 are a header (0: none; < 0: text). */
static Bytes mutate(const Bytes *seed, int header_ints) {
    static const int32_t extreme[] = {0, -1, 1, INT_MAX, INT_MIN, 1 << 30, 65535, 65536, 256, -256};
    size_t cap = seed->n * 2 + 256;
    Bytes m = {xmalloc(cap), seed->n};
    memcpy(m.p, seed->p, seed->n);
    int rounds = 1 + (int)pick(3);
    for (int r = 0; r < rounds; r++) {
        if (header_ints < 0 && pick(2)) { replace_token(&m, cap); continue; }
        switch (pick(6)) {
        case 0:   /* flip a bit */
            if (m.n) m.p[pick((unsigned)m.n)] ^= (unsigned char)(1u << pick(8));
            break;
        case 1:   /* overwrite a byte */
            if (m.n) m.p[pick((unsigned)m.n)] = (unsigned char)pick(256);
            break;
        case 2: { /* a header field to an extreme value, or its own value +-1 */
            if (header_ints <= 0 || m.n < (size_t)header_ints * 4) break;
            unsigned i = pick(header_ints < 32 ? (unsigned)header_ints : 32);
            int32_t v;
            memcpy(&v, m.p + 4 * i, 4);
            v = pick(3) ? extreme[pick(sizeof extreme / sizeof extreme[0])] : v + (pick(2) ? 1 : -1);
            memcpy(m.p + 4 * i, &v, 4);
            break;
        }
        case 3:   /* truncate */
            m.n = pick((unsigned)m.n + 1);
            break;
        case 4: { /* append garbage */
            size_t add = 1 + pick(64);
            if (m.n + add > cap) break;
            for (size_t i = 0; i < add; i++) m.p[m.n + i] = (unsigned char)pick(256);
            m.n += add;
            break;
        }
        default: { /* repeat a chunk */
            if (!m.n) break;
            size_t at = pick((unsigned)m.n), len = 1 + pick(64);
            if (at + len > m.n) len = m.n - at;
            if (m.n + len > cap) break;
            memmove(m.p + at + len, m.p + at, m.n - at);
            m.n += len;
            break;
        }
        }
    }
    return m;
}

static int put(const char *path, const Bytes *b) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = b->n ? fwrite(b->p, 1, b->n, f) : 0;
    return fclose(f) == 0 && w == b->n ? 0 : -1;
}

static Bytes get(const char *path) {
    Err err;
    Bytes b = {0, 0};
    b.p = (unsigned char *)read_file(path, &b.n, &err);
    return b;
}

/* Feeds n mutations of the file at path (already valid) to load; counts what was accepted. With checksummed,
   the format carries a checksum of the whole file: every mutant that differs from the seed must be refused. */
typedef int (*Loader)(const char *path, Err *err);
static void fuzz(const char *name, const char *path, int header_ints, Loader load, int checksummed) {
    Err err = {{0}};
    if (load(path, &err)) { CHECK(0, "%s: the valid seed was rejected: %s", name, err.msg); return; }
    Bytes seed = get(path);
    if (!seed.p) { CHECK(0, "%s: cannot read the seed back", name); return; }
    char *mpath = path_of("mutant");
    int accepted = 0, changed_accepted = 0;
    for (int i = 0; i < n_cases; i++) {
        Bytes m = mutate(&seed, header_ints);
        if (put(mpath, &m)) { CHECK(0, "%s: cannot write %s", name, mpath); free(m.p); break; }
        int ok = load(mpath, &err) == 0;
        accepted += ok;
        changed_accepted += ok && (m.n != seed.n || memcmp(m.p, seed.p, m.n));
        free(m.p);
    }
    if (checksummed) CHECK(changed_accepted == 0, "%s: %d changed files were accepted despite the checksum", name, changed_accepted);
    printf("     %s: %d mutations, %d accepted, %d rejected with a message\n", name, n_cases, accepted, n_cases - accepted);
    unlink(mpath);
    free(seed.p);
}

/* ---- the readers, each as a Loader ---- */
static GPT2Shape shape = GPT2_SHAPE(16, 64, 128, 1, 2, 16);   /* maxT, V, Vp, L, NH, C */

static int load_config(const char *path, Err *err) {
    static Config cfg;
    return config_load(&cfg, path, NULL, 0, err);
}
static int load_shard(const char *path, Err *err) {
    uint16_t *toks = NULL;
    size_t n = 0;
    int rc = shard_read(path, &toks, &n, 64, err);
    free(toks);
    return rc;
}
static int load_checkpoint(const char *path, Err *err) {
    GPT2Shape s;
    int bf16;
    if (checkpoint_read_header(path, &s, &bf16, err)) return -1;
    size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&s, sz, NULL);
    if (np > ((size_t)1 << 24)) return err_set(err, "%s: too large for the fuzz test (%zu parameters)", path, np);
    float *p = xmalloc((np ? np : 1) * sizeof(float));
    int rc = checkpoint_load(path, &s, p, err);
    free(p);
    return rc;
}
static int load_state(const char *path, Err *err) {
    TrainState st;
    memset(&st, 0, sizeof st);
    int rc = state_load(path, &st, err);
    state_free(&st);
    return rc;
}
static int load_tokenizer(const char *path, Err *err) {
    Tokenizer t;
    memset(&t, 0, sizeof t);
    int rc = tokenizer_load(&t, path, err);
    if (rc == 0) tokenizer_free(&t);
    return rc;
}

/* The tuning database, loaded and applied to the tiny config's plan: never fails, so a mutant is "rejected" when a
   line was corrupt or the file refused; every record it kept formats back to a line that parses to the same. */
static Plan tune_base;
static const TuneEnv tune_env = {"NVIDIA_H200", "sm_90", "13000", "13000", "13.0", "91400", NULL};
static int load_tune_db(const char *path, Err *err) {
    TuneDb db;
    tune_db_load(&db, path, NULL);
    for (int i = 0; i < db.n; i++) {
        char line[2048], why[256];
        TuneRecord back;
        tune_record_format(&db.r[i], line, sizeof line);
        int ok = tune_record_parse(line, &back, why, sizeof why) == 0;
        CHECK(ok && !strcmp(back.variant, db.r[i].variant) && !memcmp(&back.key, &db.r[i].key, sizeof back.key),
              "tune db line %d came back as '%s': %s", db.r[i].line, line, ok ? "another record" : why);
    }
    static Plan p;
    p = tune_base;
    TuneApplied ap;
    tune_db_apply(&db, &tune_env, &p, "130100", NULL, &ap, NULL);
    for (int f = 0; f < p.n_families; f++)
        for (int t = 0; t < p.families[f].n_tunables; t++)
            CHECK(tunable_allowed(&p.families[f].decl->tunables[t], p.families[f].tunables[t].value),
                  "%s: %s=%d taken from the database", p.families[f].decl->family, p.families[f].decl->tunables[t].name,
                  p.families[f].tunables[t].value);
    for (int i = 0; i < MM_COUNT; i++)
        CHECK(!p.matmuls[i].algo.set || (p.matmuls[i].algo.index >= 0 && p.matmuls[i].algo.index < MATMUL_ALGO_MAX),
              "a matmul took the algorithm index %d", p.matmuls[i].algo.index);
    int rejected = db.corrupt || db.oversized || db.missing;
    tune_db_free(&db);
    return rejected ? err_set(err, "%s: corrupt lines", path) : 0;
}

/* the id file as rank 1 of the seed's world and job reads it, looking once (runtime/ranks/launch.h) */
static LaunchEnv id_rank = {.rank = 1, .world = 2, .local_rank = 1, .how = "srun", .job = "7.0"};
static int load_id_file(const char *path, Err *err) {
    unsigned char id[128];
    return launch_share_id_file(path, &id_rank, id, sizeof id, 0, err);
}

/* ---- the seeds ---- */
static void test_fuzz_config(void) {
    static const char text[] =
        "-- a valid config\nname = \"fuzz\"\nprecision = \"fp32\"\n"
        "model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 32, vocab_size = 512 }\n"
        "train = { batch_size = 2, seq_len = 32, total_batch_size = 128, steps = 10, lr = 3e-4, schedule = \"wsd\" }\n"
        "eval = { val_every = 5, sample_every = 0, sample_tokens = 8 }\n"
        "tune = { layernorm = { BLOCK_SIZE = 128, BWD_BLOCK_SIZE = { 128, 256 } } }\n";
    char *p = path_of("fuzz.lua");
    Bytes b = {(unsigned char *)text, sizeof text - 1};
    if (put(p, &b)) { CHECK(0, "cannot write %s", p); return; }
    int saved = n_cases;
    n_cases = n_cases / 4 > 0 ? n_cases / 4 : 1;   /* a Lua state per case: fewer, each costlier */
    fuzz("config", p, -1, load_config, 0);
    n_cases = saved;
}

static void test_fuzz_shard(void) {
    uint16_t toks[300];
    for (int i = 0; i < 300; i++) toks[i] = (uint16_t)(i * 7 % 64);
    Err err = {{0}};
    char *p = path_of("shard.bin");
    if (shard_write(p, toks, 300, &err)) { CHECK(0, "%s", err.msg); return; }
    fuzz("shard", p, 256, load_shard, 0);
}

static void test_fuzz_checkpoint(void) {
    size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&shape, sz, NULL);
    float *params = xmalloc(np * sizeof(float));
    gpt2_init_params(&shape, params, 7);
    Err err = {{0}};
    char *p32 = path_of("model32.bin"), *p16 = path_of("model16.bin");
    if (checkpoint_save(p32, &shape, params, 0, &err) || checkpoint_save(p16, &shape, params, 1, &err)) CHECK(0, "%s", err.msg);
    else {
        fuzz("checkpoint fp32", p32, 256, load_checkpoint, 0);
        fuzz("checkpoint bf16", p16, 256, load_checkpoint, 0);
    }
    free(params);
}

static void test_fuzz_state(void) {
    size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&shape, sz, NULL);
    TrainState st;
    memset(&st, 0, sizeof st);
    st.ranks = 1; st.shuffle = 1; st.step = 5; st.epoch = 1; st.shard_pos = 1; st.row_pos = 3;
    st.sample_rng = 0x1234; st.num_params = np; st.n_shards = 3; st.shape = shape; st.B = 2; st.T = 8; st.seed = 1337;
    st.loss_scale = 1024; st.loss_scale_clean = 3; st.skipped = 1;
    st.m = xcalloc(np, sizeof(float)); st.v = xcalloc(np, sizeof(float)); st.params = xcalloc(np, sizeof(float));
    int32_t order[3] = {2, 0, 1};
    st.shard_order = order;
    for (size_t i = 0; i < np; i++) { st.m[i] = 0.01f * (float)i; st.v[i] = 1e-4f; st.params[i] = 0.5f; }
    Err err = {{0}};
    char *p = path_of("state.bin");
    if (state_save(p, &st, &err)) CHECK(0, "%s", err.msg);
    else fuzz("state", p, 256, load_state, 1);
    free(st.m); free(st.v); free(st.params);
}

static void test_fuzz_tokenizer(void) {
    /* llm.c's tokenizer file, version 2: every single byte, a few merges, end-of-text last */
    char *p = path_of("tokenizer.bin");
    FILE *f = fopen(p, "wb");
    if (!f) { CHECK(0, "cannot write %s", p); return; }
    int32_t h[256] = {20240328, 2, 256 + 8 + 1, 256 + 8};
    fwrite(h, 4, 256, f);
    for (int i = 0; i < 256; i++) { unsigned char e[2] = {1, (unsigned char)i}; fwrite(e, 1, 2, f); }
    static const char *const merges[8] = {"th", "he", "in", "er", "an", " t", "the", " the"};
    for (int i = 0; i < 8; i++) { unsigned char n = (unsigned char)strlen(merges[i]); fwrite(&n, 1, 1, f); fwrite(merges[i], 1, n, f); }
    unsigned char eot[] = {13};
    fwrite(eot, 1, 1, f);
    fwrite("<|endoftext|>", 1, 13, f);
    fclose(f);
    fuzz("tokenizer", p, 256, load_tokenizer, 0);
}

static void test_fuzz_tune_db(void) {
    static Config cfg;
    Err err = {{0}};
    if (config_load(&cfg, "configs/tiny.lua", NULL, 0, &err) || plan_make_train(&tune_base, &cfg, "sm_90", NULL, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    static const char *const recs[][3] = {
        {"best kernel gelu", "BLOCK_SIZE=512", "status=ok default_us=12.000"},
        {"measure kernel gelu", "BLOCK_SIZE=1024", "status=mismatch"},
        {"best matmul qkv", "algo=2,id=31,tile=20,stages=8,splitk=-1,reduction=2,swizzle=0,custom=0,cluster=0", "status=ok"},
        {"best attention path", "path=flash", "status=ok"},
    };
    char text[8192] = "# a tuning database\n";
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) {
        TuneKey key;
        if (i < 2) tune_key_kernel(&key, &tune_env, &tune_base, 2);
        else if (i == 2) tune_key_matmul(&key, &tune_env, &tune_base, MM_QKV, "130100");
        else tune_key_attention(&key, &tune_env, &tune_base);
        size_t len = strlen(text);
        len += (size_t)snprintf(text + len, sizeof text - len, "%s %s us=10.500 %s", recs[i][0], recs[i][1], recs[i][2]);
        for (int f = 0; f < TUNE_KEY_FIELDS; f++)
            len += (size_t)snprintf(text + len, sizeof text - len, " %s=%s", tune_key_names[f], key.f[f]);
        snprintf(text + len, sizeof text - len, "\n");
    }
    char *p = path_of("tune-db.txt");
    Bytes b = {(unsigned char *)text, strlen(text)};
    if (put(p, &b)) { CHECK(0, "cannot write %s", p); return; }
    int saved = n_cases;
    n_cases = n_cases / 4 > 0 ? n_cases / 4 : 1;   /* each case hashes the plan's templates: fewer */
    fuzz("tuning database", p, -1, load_tune_db, 0);
    n_cases = saved;
}

static void test_fuzz_id_file(void) {
    char *p = path_of("id");
    unsigned char id[128];
    for (int i = 0; i < 128; i++) id[i] = (unsigned char)(i * 7);
    LaunchEnv r0 = id_rank;
    r0.rank = 0;
    Err err = {{0}};
    if (launch_share_id_file(p, &r0, id, sizeof id, 1, &err)) CHECK(0, "%s", err.msg);
    else fuzz("id file", p, -1, load_id_file, 0);
}

/* ---- issue 42's recognizers and bounds ---- */

/* A run folder's metrics.jsonl: whether it is ours (its first record) and opening it for appending. A mutant that
   metrics_open accepts must be one metrics_is_ours recognizes, and opening (then closing, writing nothing) may only
   cut it back to its last whole line: what stays is a prefix of the mutant. plot_read reads it or says why. */
static int load_metrics(const char *path, Err *err) {
    Bytes m = get(path);
    if (!m.p) return err_set(err, "cannot read %s", path);
    char *run = path_of("run"), *log = path_of("run/metrics.jsonl");
    mkdir(run, 0755);
    if (put(log, &m)) { free(m.p); return err_set(err, "cannot write %s", log); }
    int ours = metrics_is_ours(log);
    Metrics mt;
    int rc = metrics_open(&mt, run, err);
    if (rc == 0) {
        metrics_close(&mt);
        Bytes after = get(log);
        CHECK(ours, "metrics: a log that is not ours was opened for appending");
        CHECK(after.p && after.n <= m.n && !memcmp(after.p, m.p, after.n) && (after.n == m.n || after.n == 0
              || m.p[after.n - 1] == '\n'), "metrics: opening changed the log other than cutting its last line (%zu -> %zu bytes)",
              m.n, after.n);
        free(after.p);
    }
    PlotRun pr;
    Err perr;
    if (plot_read(&pr, log, "run", &perr) == 0) plot_run_free(&pr);
    else CHECK(perr.msg[0], "metrics: plot_read refused without a message");
    free(m.p);
    return rc;
}

static void test_fuzz_metrics(void) {
    char *run = path_of("run");
    mkdir(run, 0755);
    Metrics mt;
    Err err = {{0}};
    if (metrics_open(&mt, run, &err)) { CHECK(0, "%s", err.msg); return; }
    metrics_event(&mt, "start", "config", json_string("micro"), NULL);
    for (int i = 1; i <= 4; i++)
        metrics_event(&mt, "step", "step", json_integer(i), "loss", json_real(5.0 / i), "lr", json_real(1e-3), NULL);
    metrics_event(&mt, "val", "step", json_integer(4), "val_loss", json_real(2.5), NULL);
    metrics_close(&mt);
    Bytes b = get(path_of("run/metrics.jsonl"));
    char *seed = path_of("metrics.jsonl");
    if (!b.p || put(seed, &b)) { CHECK(0, "cannot copy the metrics log"); free(b.p); return; }
    free(b.p);
    fuzz("metrics.jsonl", seed, -1, load_metrics, 0);
}

/* The name of a killed write's temporary file, NAME.tmp.<pid>.<16 hex>, against mutated names: atomic_tmp_base
   finds NAME exactly where the rest has that form (checked here by a separate reading), and atomic_leftover never
   takes a file whose name is not one, nor one whose process lives (this one's). */
static int tmp_form(const char *rest) {   /* ".tmp.<digits>.<16 hex>" and nothing after */
    if (strncmp(rest, ".tmp.", 5)) return 0;
    size_t d = strspn(rest + 5, "0123456789");
    const char *h = rest + 5 + d;
    return d > 0 && h[0] == '.' && strspn(h + 1, "0123456789abcdef") == 16 && !h[17];
}

static void test_fuzz_leftover_names(void) {
    char live[64], dead[64];
    snprintf(live, sizeof live, "model.bin.tmp.%d.0123456789abcdef", (int)getpid());
    snprintf(dead, sizeof dead, "model.bin.tmp.999999999.fedcba9876543210");
    CHECK(atomic_tmp_base(live) == 9 && atomic_tmp_base(dead) == 9, "the seeds' base is not model.bin");
    int found = 0, taken = 0;
    for (int i = 0; i < n_cases * 5; i++) {
        Bytes seed = {(unsigned char *)(i % 2 ? live : dead), strlen(i % 2 ? live : dead)};
        Bytes m = mutate(&seed, -1);
        char name[600];
        size_t n = m.n < sizeof name - 1 ? m.n : sizeof name - 1;
        for (size_t k = 0; k < n; k++) name[k] = m.p[k] == 0 || m.p[k] == '/' ? 'x' : (char)m.p[k];
        name[n] = 0;
        free(m.p);
        size_t base = atomic_tmp_base(name), ref = 0;
        for (size_t k = 1; k < n && !ref; k++) ref = tmp_form(name + k) ? k : 0;   /* NAME is never empty */
        CHECK(base == ref, "atomic_tmp_base(\"%s\") = %zu, expected %zu", name, base, ref);
        found += base > 0;
        if (!base || !strcmp(name, ".") || !strcmp(name, "..")) continue;
        char *p = path_of(name);
        FILE *f = fopen(p, "w");
        if (!f) continue;
        fclose(f);
        long pid = strtol(name + base + 5, NULL, 10);
        int left = atomic_leftover(dir, name);
        CHECK(!left || pid != (long)getpid(), "atomic_leftover took \"%s\", whose process (this one) lives", name);
        taken += left;
        unlink(p);
    }
    printf("     leftover names: %d mutations, %d read as temporary names, %d as leftovers\n", n_cases * 5, found, taken);
}

/* A prompt file's bound (cli/sample.c reads it with read_file_max): over the limit is refused with the file and
   the limit named, before anything is read; at or under it, the whole file comes back */
static void test_fuzz_prompt_bounds(void) {
    char *p = path_of("prompt.txt");
    for (int i = 0; i < 400; i++) {
        size_t size = pick(4096), max = size + pick(9) - 4;
        if (max > size + 4) max = 0;   /* wrapped below 0 */
        Bytes b = {xmalloc(size + 1), size};
        for (size_t k = 0; k < size; k++) b.p[k] = (unsigned char)pick(256);
        if (put(p, &b)) { CHECK(0, "cannot write %s", p); free(b.p); return; }
        Err err = {{0}};
        size_t len = 12345;
        char *got = read_file_max(p, max, &len, &err);
        if (size > max) CHECK(!got && strstr(err.msg, "prompt.txt"), "%zu bytes under a limit of %zu: %s", size, max,
                              got ? "accepted" : err.msg);
        else CHECK(got && len == size && !memcmp(got, b.p, size) && got[size] == 0, "%zu bytes under a limit of %zu: %s",
                   size, max, got ? "changed" : err.msg);
        free(got);
        free(b.p);
    }
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    const char *n = getenv("FUZZ_CASES");
    if (n && atoi(n) > 0) n_cases = atoi(n);
    if (!mkdtemp(dir)) { printf("FAIL fuzz: cannot make a scratch folder\n"); return 1; }
    RUN(test_fuzz_config);
    RUN(test_fuzz_shard);
    RUN(test_fuzz_checkpoint);
    RUN(test_fuzz_state);
    RUN(test_fuzz_tokenizer);
    RUN(test_fuzz_tune_db);
    RUN(test_fuzz_id_file);
    RUN(test_fuzz_metrics);
    RUN(test_fuzz_leftover_names);
    RUN(test_fuzz_prompt_bounds);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
    return check_summary();
}
