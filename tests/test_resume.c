/* test_resume: what keeps a run's files safe. The resume state (round trip, checksum, every field checked,
   a state that does not fit the run). */
#include "common/files.h"
#include "runtime/state.h"
#include "tests/check.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CHECK_OK copies an Err message (4 KiB) into the harness's reason: truncation is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static const GPT2Shape SHAPE = {8, 10, 16, 1, 2, 8};     /* maxT, V, Vp, L, NH, C: a few hundred parameters */
static int32_t ORDER[3] = {2, 0, 1};

static size_t nparams(void) { size_t sz[NUM_PARAM_TENSORS]; return gpt2_param_sizes(&SHAPE, sz, NULL); }

/* A state with every field away from its zero and from the others' values; free it with state_free. */
static TrainState sample_state(void) {
    size_t n = nparams();
    TrainState s = {.ranks = 4, .rank = 3, .shuffle = 1, .step = 42, .epoch = 5, .row_pos = 123456789012L, .shard_pos = 2,
                    .sample_rng = 0xDEADBEEFCAFEull, .num_params = n, .n_shards = 3, .shape = SHAPE, .B = 6, .T = 7,
                    .seed = 0x123456789ull};
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

/* Works in a fresh folder under /tmp (the current directory while the tests run), removed at the end. */
int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    char dir[] = "/tmp/gpt2gen-test-resume-XXXXXX", cmd[64];
    if (!mkdtemp(dir) || chdir(dir) != 0) { perror(dir); return 1; }
    RUN(test_state_round_trip);
    RUN(test_state_checksum);
    RUN(test_state_fields);
    RUN(test_state_check);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (chdir("/") || system(cmd)) {}
    return check_summary();
}
