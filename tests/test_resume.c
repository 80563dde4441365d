/* test_resume: what keeps a run's files safe. The resume state (round trip, checksum, every field checked,
   a state that does not fit the run), the run directory (lock, stale lock, refusing to overwrite, leftovers,
   an unusable directory, the steps it holds), resume's choice of the newest valid pair, JSON strings, and a torn
   last line of metrics.jsonl. */
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "runtime/train/metrics.h"
#include "runtime/train/resume.h"
#include "runtime/train/rundir.h"
#include "runtime/train/state.h"
#include "tests/check.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* CHECK_OK copies an Err message (4 KiB) into the harness's reason: truncation is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static const GPT2Shape SHAPE = GPT2_SHAPE(8, 10, 16, 1, 2, 8);     /* maxT, V, Vp, L, NH, C: a few hundred parameters */
static int32_t ORDER[3] = {2, 0, 1};

static size_t nparams(void) { size_t sz[NUM_PARAM_TENSORS]; return gpt2_param_sizes(&SHAPE, sz, NULL); }

/* A state with every field away from its zero and from the others' values; free it with state_free. */
static TrainState sample_state(void) {
    size_t n = nparams();
    TrainState s = {.ranks = 4, .rank = 3, .shuffle = 1, .step = 42, .epoch = 5, .row_pos = 123456789012L, .shard_pos = 2,
                    .sample_rng = 0xDEADBEEFCAFEull, .num_params = n, .n_shards = 3, .shape = SHAPE, .B = 6, .T = 7,
                    .seed = 0x123456789ull, .loss_scale = 1};
    s.m = xmalloc(n * 4); s.v = xmalloc(n * 4); s.params = xmalloc(n * 4);
    s.shard_order = xmalloc(sizeof ORDER);
    memcpy(s.shard_order, ORDER, sizeof ORDER);
    for (size_t i = 0; i < n; i++) { s.m[i] = i * 0.5f; s.v[i] = i * 0.25f; s.params[i] = -(float)i; }
    return s;
}

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, at, at < 0 ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* Saves s to name and expects state_load to refuse it with a message holding want. */
static void expect_refused(const char *name, const TrainState *s, const char *want) {
    Err err = {{0}};
    TrainState r;
    const char *path = name;
    CHECK_OK(state_save(path, s, &err), &err);
    CHECK(state_load(path, &r, &err) != 0 && strstr(err.msg, want) && strstr(err.msg, name), "%s: '%s' should say '%s'", name, err.msg, want);
}

/* ---------------------------------------------------------------- the state */

static void test_state_round_trip(void) {
    TrainState s = sample_state(), r;
    Err err;
    const char *path = "state.bin";
    CHECK_OK(state_save(path, &s, &err), &err);
    CHECK_OK(state_load(path, &r, &err), &err);
    CHECK(r.ranks == 4 && r.rank == 3 && r.shuffle == 1 && r.step == 42 && r.epoch == 5 && r.row_pos == 123456789012L
          && r.shard_pos == 2 && r.sample_rng == 0xDEADBEEFCAFEull && r.num_params == s.num_params && r.B == 6 && r.T == 7
          && r.seed == 0x123456789ull && !memcmp(&r.shape, &SHAPE, sizeof SHAPE),
          "header fields: ranks %d rank %d shuffle %d step %d epoch %ld row %ld shard %d rng %llx params %zu B %d T %d", r.ranks,
          r.rank, r.shuffle, r.step, r.epoch, r.row_pos, r.shard_pos, (unsigned long long)r.sample_rng, r.num_params, r.B, r.T);
    size_t n = s.num_params * 4;
    CHECK(r.m && !memcmp(r.m, s.m, n) && !memcmp(r.v, s.v, n) && !memcmp(r.params, s.params, n), "arrays");
    CHECK(r.n_shards == 3 && r.shard_order && !memcmp(r.shard_order, ORDER, sizeof ORDER), "shard order");
    state_free(&r);
    CHECK(truncate(path, 2000) == 0, "truncate");
    CHECK(state_load(path, &r, &err) != 0 && strstr(err.msg, "truncated"), "truncated: %s", err.msg);
    state_free(&s);
}

/* A byte changed anywhere after the save (header field, m, weights, shard order) is caught. */
static void test_state_checksum(void) {
    TrainState s = sample_state(), r;
    Err err;
    long places[] = {9 * 4, 26 * 4 + 1, 1024 + 3, 1024 + 4 * (long)s.num_params * 2 + 5, -2};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        const char *path = "flipped.bin";
        CHECK_OK(state_save(path, &s, &err), &err);
        flip_byte(path, places[i]);
        CHECK(state_load(path, &r, &err) != 0 && strstr(err.msg, "checksum mismatch"), "byte at %ld: %s", places[i], err.msg);
    }
    state_free(&s);
}

/* Crafted fields, sealed with a valid checksum: each is refused by its own check. */
static void test_state_fields(void) {
    TrainState s = sample_state();
    s.step = -5;        expect_refused("neg_step.bin", &s, "step -5");          s.step = 42;
    s.row_pos = -1;     expect_refused("neg_row.bin", &s, "row -1");            s.row_pos = 7;
    s.shard_pos = 3;    expect_refused("shard_pos.bin", &s, "shard 3");         s.shard_pos = 2;
    s.epoch = -2;       expect_refused("neg_epoch.bin", &s, "epoch -2");        s.epoch = 0;
    s.rank = 4;         expect_refused("rank.bin", &s, "rank 4 of 4");          s.rank = 0;
    s.B = 0;            expect_refused("batch.bin", &s, "B 0");                 s.B = 6;
    s.shuffle = 2;      expect_refused("shuffle.bin", &s, "shuffle flag 2");    s.shuffle = 1;
    s.shard_order[0] = 0; expect_refused("order.bin", &s, "shard order");      s.shard_order[0] = 2;
    s.num_params--;     expect_refused("nparams.bin", &s, "parameters");        s.num_params++;
    s.shape.n_head = 3; expect_refused("shape.bin", &s, "not a multiple");     s.shape = SHAPE;
    s.n_shards = 0;     expect_refused("shards.bin", &s, "0 shards");           s.n_shards = 3;
    /* version 1 (no checksum): refused with the reason */
    Err err;
    TrainState r;
    const char *path = "v1.bin";
    CHECK_OK(state_save(path, &s, &err), &err);
    int fd = open(path, O_WRONLY);
    int32_t one = 1;
    CHECK(fd >= 0 && pwrite(fd, &one, 4, 4) == 4, "write the version");
    close(fd);
    CHECK(state_load(path, &r, &err) != 0 && strstr(err.msg, "version 1"), "v1: %s", err.msg);
    state_free(&s);
}

/* A valid state that does not fit the run: another shape with the same parameter count, B, T, seed, shards,
   ranks, or a step past train.steps. */
static void test_state_check(void) {
    TrainState s = sample_state(), want = s;
    Err err;
    CHECK_OK(state_check("s.bin", &s, &want, 42, &err), &err);
    want.shape.n_head = 1;                          /* NH 2 -> 1: the same parameter count */
    CHECK(state_check("s.bin", &s, &want, 42, &err) != 0 && strstr(err.msg, "n_head is 2 in the resume state"), "shape: %s", err.msg);
    want = s; want.B = 3;
    CHECK(state_check("s.bin", &s, &want, 42, &err) != 0 && strstr(err.msg, "train.batch_size"), "B: %s", err.msg);
    want = s; want.T = 3;
    CHECK(state_check("s.bin", &s, &want, 42, &err) != 0 && strstr(err.msg, "train.seq_len"), "T: %s", err.msg);
    want = s; want.seed = 1;
    CHECK(state_check("s.bin", &s, &want, 42, &err) != 0 && strstr(err.msg, "train.seed"), "seed: %s", err.msg);
    want = s; want.n_shards = 4;
    CHECK(state_check("s.bin", &s, &want, 42, &err) != 0 && strstr(err.msg, "training shards"), "shards: %s", err.msg);
    want = s; want.ranks = 1; want.rank = 0;
    CHECK(state_check("s.bin", &s, &want, 42, &err) != 0 && strstr(err.msg, "train.num_gpus"), "ranks: %s", err.msg);
    want = s;
    CHECK(state_check("s.bin", &s, &want, 41, &err) != 0 && strstr(err.msg, "beyond train.steps = 41"), "steps: %s", err.msg);
    state_free(&s);
}

/* ---------------------------------------------------------------- the run directory */

static const char *make_dir(const char *name) {
    Err err;
    mkdir_p(name, &err);
    return name;
}

static void touch(const char *dir, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) fclose(f);
}

static void test_rundir_lock(void) {
    const char *d = make_dir("locked");
    RunDir a, b;
    Err err;
    CHECK_OK(rundir_open(&a, d, 0, &err), &err);
    char want[64];
    snprintf(want, sizeof want, "pid %d", (int)getpid());
    CHECK(rundir_open(&b, d, 0, &err) != 0 && strstr(err.msg, want) && strstr(err.msg, d), "second run: %s", err.msg);
    rundir_close(&a);
    CHECK(!file_exists("locked/run.lock"), "run.lock is left after close");
    CHECK_OK(rundir_open(&b, d, 0, &err), &err);
    rundir_close(&b);
}

static void test_rundir_stale_lock(void) {
    const char *d = make_dir("stale");
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);                        /* a pid that no longer runs */
    char text[32], path[600];
    snprintf(path, sizeof path, "%s/run.lock", d);
    snprintf(text, sizeof text, "%d\n", (int)child);
    Err err;
    write_file_atomic(path, text, strlen(text), &err);
    RunDir a;
    CHECK_OK(rundir_open(&a, d, 0, &err), &err);
    char *now = read_file(path, NULL, &err);
    CHECK(now && atoi(now) == (int)getpid(), "the lock file holds '%s', expected our pid %d", now ? now : "", (int)getpid());
    free(now);
    rundir_close(&a);
}

static void test_rundir_refuses_overwrite(void) {
    const char *d = make_dir("earlier");
    touch(d, "state_00000003.bin");
    RunDir a;
    Err err;
    CHECK(rundir_open(&a, d, 0, &err) != 0 && strstr(err.msg, "--resume") && strstr(err.msg, "earlier"), "without resume: %s", err.msg);
    CHECK(!file_exists("earlier/run.lock"), "a refused run left its lock");
    CHECK_OK(rundir_open(&a, d, 1, &err), &err);
    rundir_close(&a);
}

static void test_rundir_leftovers(void) {
    const char *d = make_dir("leftovers");
    /* pid 99999999 is past any pid_max: a process that is gone */
    touch(d, "model_00000004.bin.tmp.99999999.0123456789abcdef");
    touch(d, "state_00000004.bin.tmp.99999999.fedcba9876543210");
    touch(d, "notes.txt.tmp.99999999.0123456789abcdef");   /* not a checkpoint's: kept */
    touch(d, "model_00000004.bin.tmp.123");                 /* not an atomic write's name (no random part): kept */
    char live[96];                                          /* a running process's (this one): kept */
    snprintf(live, sizeof live, "model_00000005.bin.tmp.%d.0123456789abcdef", (int)getpid());
    touch(d, live);
    CHECK(symlink("model_00000004.bin.tmp.123", "leftovers/state_00000006.bin.tmp.99999999.0123456789abcdef") == 0, "symlink");
    RunDir a;
    Err err;
    CHECK_OK(rundir_open(&a, d, 1, &err), &err);
    rundir_close(&a);
    CHECK(!file_exists("leftovers/model_00000004.bin.tmp.99999999.0123456789abcdef") &&
          !file_exists("leftovers/state_00000004.bin.tmp.99999999.fedcba9876543210"), "leftovers are still there");
    struct stat st;
    char live_path[128];
    snprintf(live_path, sizeof live_path, "leftovers/%s", live);
    CHECK(file_exists("leftovers/notes.txt.tmp.99999999.0123456789abcdef") && file_exists("leftovers/model_00000004.bin.tmp.123")
          && file_exists(live_path) && lstat("leftovers/state_00000006.bin.tmp.99999999.0123456789abcdef", &st) == 0,
          "removed files that were not provably leftovers");
}

static void test_rundir_unusable(void) {
    const char *file = "a_file";
    Err err;
    write_file_atomic(file, "x", 1, &err);
    RunDir a;
    CHECK(rundir_open(&a, file, 0, &err) != 0 && strstr(err.msg, "a_file: not a directory"), "a file: %s", err.msg);
    CHECK(rundir_open(&a, "a_file/sub", 0, &err) != 0 && strstr(err.msg, "a_file"), "under a file: %s", err.msg);
}

static void test_rundir_steps(void) {
    const char *d = make_dir("steps");
    const char *names[] = {"model_00000003.bin", "state_00000003.bin", "state_00000010.bin", "model_x.bin",
                           "model_00000004.bin.tmp.5", "state_00000007.binx", "model_.bin", "metrics.jsonl",
                           "state_00000012.r3.bin", "done_00000011.bin", "done_00000013.bin.tmp.5", "model_00000014.r1.bin",
                           "state_00000015.r.bin"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) touch(d, names[i]);
    int *steps, n = rundir_steps(d, &steps);
    CHECK(n == 4 && steps[0] == 12 && steps[1] == 11 && steps[2] == 10 && steps[3] == 3, "%d steps: %d, %d, %d, %d", n,
          n > 0 ? steps[0] : -1, n > 1 ? steps[1] : -1, n > 2 ? steps[2] : -1, n > 3 ? steps[3] : -1);
    free(steps);
}

/* ---------------------------------------------------------------- resume's choice */

/* A pair at step: a state of sample_state's shape and its model (fp32), then (sample_state has 4 ranks) the
   marker that the save finished on every rank. */
static void save_pair(const char *dir, int step, float weight) {
    TrainState s = sample_state();
    s.step = step;
    for (size_t i = 0; i < s.num_params; i++) s.params[i] = weight;
    char model[RUNDIR_PATH_MAX], state[RUNDIR_PATH_MAX];
    rundir_paths(dir, step, model, state);
    Err err;
    CHECK_OK(state_save(state, &s, &err), &err);
    CHECK_OK(checkpoint_save(model, &SHAPE, s.params, 0, &err), &err);
    rundir_done(dir, step, model);
    CHECK_OK(write_file_atomic(model, "done\n", 5, &err), &err);
    state_free(&s);
}

/* The newest pair whose files are both there and agree wins; a valid state that does not fit is an error. */
static void test_resume_fallback(void) {
    const char *d = make_dir("resume");
    for (int step = 1; step <= 3; step++) save_pair(d, step, (float)step);
    char model[RUNDIR_PATH_MAX], state[RUNDIR_PATH_MAX], m1[RUNDIR_PATH_MAX], m2[RUNDIR_PATH_MAX], s[RUNDIR_PATH_MAX];
    rundir_paths(d, 3, model, state);
    flip_byte(state, -9);                            /* step 3: its state changed after the save */
    rundir_paths(d, 2, m2, s);
    Err err;
    write_file_atomic(m2, "", 0, &err);              /* step 2: an empty model */
    ResumeWant w = {d, sample_state(), 42, 0};
    TrainState got;
    CHECK(resume_find(&w, &got, model, state, &err) == 1 && got.step == 1 && strstr(state, "state_00000001.bin"), "found %s", state);
    state_free(&got);
    rundir_paths(d, 1, m1, s);
    save_pair(d, 2, 2.5f);
    rename(m1, m2);                                  /* step 2: the model of another save; step 1: none */
    CHECK(resume_find(&w, &got, model, state, &err) == -1 && strstr(err.msg, "none of its 3 checkpoint steps"), "none: %s", err.msg);
    save_pair(d, 3, 3.0f);
    w.max_step = 1;                                  /* valid, but past train.steps: an error, not a fallback */
    CHECK(resume_find(&w, &got, model, state, &err) == -1 && strstr(err.msg, "train.steps"), "beyond: %s", err.msg);
    state_free(&w.run);
    ResumeWant empty = {make_dir("empty"), sample_state(), 42, 0};
    CHECK(resume_find(&empty, &got, model, state, &err) == 0, "an empty directory has nothing to resume");
    state_free(&empty.run);
}

/* ---------------------------------------------------------------- JSON strings and numbers */

/* Strings through metrics_text and numbers through metrics_real, as metrics_dump writes them */
static void test_json_string(void) {
    const struct { const char *in; size_t n; const char *want; } cases[] = {
        {"plain", 5, "\"plain\""},
        {"a\"b\\c", 5, "\"a\\\"b\\\\c\""},
        {"\n\r\t\x01\x1f", 5, "\"\\n\\r\\t\\u0001\\u001F\""},
        {"nul\0x", 5, "\"nul\\u0000x\""},
        {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""},   /* valid: kept */
        {"\xff\xc3", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\""},                                            /* invalid, cut off */
        {"\xc0\x80\xed\xa0\x80", 5, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},  /* overlong, surrogate */
        {"\xf4\x90\x80\x80", 4, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},             /* past U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = metrics_text(cases[i].in, cases[i].n);
        char *got = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
        CHECK(got && !strcmp(got, cases[i].want), "case %zu: got %s, expected %s", i, got ? got : "(none)", cases[i].want);
        free(got);
        json_decref(v);
    }
    json_t *rec = metrics_record("x", "a", metrics_real("%.6f", 1.5), "b", metrics_real("%.6f", NAN), "c",
                                 metrics_real("%.6e", 6e-4f), "d", metrics_real("%.6f", -INFINITY), "e", json_integer(7),
                                 "f", metrics_real("%.3f", 2.0), "g", metrics_real("%.6f", 10.8234567), NULL);
    char *line = metrics_dump(rec);
    const char *want = "{\"event\":\"x\",\"a\":1.5,\"b\":null,\"c\":0.0006,\"d\":null,\"e\":7,\"f\":2.0,\"g\":10.823457}";
    CHECK(line && !strcmp(line, want), "record: got %s, expected %s", line ? line : "(none)", want);
    free(line);
    json_decref(rec);
}

/* metrics_open on a file with the given contents (or a FIFO where contents is NULL); what the file holds after. */
static int metrics_open_on(const char *contents, char *after, size_t size, Err *err) {
    remove("log/metrics.jsonl");
    if (mkdir("log", 0755) != 0 && errno != EEXIST) return err_set(err, "mkdir log: %s", strerror(errno));
    if (!contents) mkfifo("log/metrics.jsonl", 0644);
    else { FILE *f = fopen("log/metrics.jsonl", "wb"); if (f) { fputs(contents, f); fclose(f); } }
    Metrics m;
    if (metrics_open(&m, "log", err)) return -1;
    metrics_write(&m, json_pack("{s:i}", "n", 1));
    metrics_close(&m);
    size_t len;
    char *got = read_file("log/metrics.jsonl", &len, err);
    if (!got) return -1;
    snprintf(after, size, "%s", got);
    free(got);
    return 0;
}

/* A torn last line is cut off before the next record (a file of one torn line becomes empty), whole lines are
   kept, a file gpt2gen did not write is refused and kept, and a FIFO is refused, not waited on. */
static void test_metrics_repair(void) {
    const struct { const char *in, *want; } cases[] = {
        {"", "{\"n\":1}\n"},
        {"{\"event\":\"a\"}\n", "{\"event\":\"a\"}\n{\"n\":1}\n"},
        {"{\"event\":\"a\"}\n{\"b\"", "{\"event\":\"a\"}\n{\"n\":1}\n"},
        {"{\"event\":\"torn", "{\"n\":1}\n"},
        {"{\"ev", "{\"n\":1}\n"},
    };
    char after[256];
    Err err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_OK(metrics_open_on(cases[i].in, after, sizeof after, &err), &err);
        CHECK(!strcmp(after, cases[i].want), "case %zu: got '%s', expected '%s'", i, after, cases[i].want);
    }
    /* a file gpt2gen did not write (its first line is not a record) is refused, and kept as it was */
    const char *foreign[] = {"{\"a\":1}\n", "my notes", "{\"torn"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        int rc = metrics_open_on(foreign[i], after, sizeof after, &err);
        size_t len;
        char *kept = read_file("log/metrics.jsonl", &len, &err);
        CHECK(rc != 0 && strstr(err.msg, "is not a metrics log gpt2gen wrote") && kept && !strcmp(kept, foreign[i]),
              "foreign %zu: rc %d, '%s', holds '%s'", i, rc, err.msg, kept ? kept : "(none)");
        free(kept);
    }
    CHECK(metrics_open_on(NULL, after, sizeof after, &err) != 0 && strstr(err.msg, "log/metrics.jsonl: expected a file") &&
          strstr(err.msg, "FIFO"), "a FIFO: %s", err.msg);
}

/* Works in a fresh folder under /tmp (the current directory while the tests run), removed at the end. */
int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    char dir[] = "/tmp/gpt2gen-test-resume-XXXXXX", cmd[64];
    if (!mkdtemp(dir) || chdir(dir) != 0) { perror(dir); return 1; }
    RUN(test_state_round_trip);
    RUN(test_state_checksum);
    RUN(test_state_fields);
    RUN(test_state_check);
    RUN(test_rundir_lock);
    RUN(test_rundir_stale_lock);
    RUN(test_rundir_refuses_overwrite);
    RUN(test_rundir_leftovers);
    RUN(test_rundir_unusable);
    RUN(test_rundir_steps);
    RUN(test_resume_fallback);
    RUN(test_json_string);
    RUN(test_metrics_repair);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (chdir("/") || system(cmd)) {}
    return check_summary();
}
