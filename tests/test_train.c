/* The training loop's pieces: LR schedules at known steps, the data loader (rows, order, ranks, seek, bad
   files, positions out of range, every shard checked at open), the tokenizer file checked before it is read,
   and token sampling. The resume state and the run directory are tests/test_resume.c's. */
#include "runtime/data/dataloader.h"
#include "common/files.h"
#include <stdio.h>
#include "runtime/train/schedule.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer.h"
#include "runtime/train/train.h"
#include "tests/check.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(1.0, fabs(b)); }

static void test_lr_schedules(void) {
    /* M = 1e-3, W = 10, N = 110, f = 0.1: values worked out by hand from docs/model.md, "LR schedules" */
    double M = 1e-3, f = 0.1;
    CHECK(close_to(lr_at(SCHED_COSINE, M, 10, 110, f, 0), 1e-4), "warmup step 0: %g", lr_at(SCHED_COSINE, M, 10, 110, f, 0));
    CHECK(close_to(lr_at(SCHED_COSINE, M, 10, 110, f, 9), 1e-3), "warmup step 9");
    CHECK(close_to(lr_at(SCHED_COSINE, M, 10, 110, f, 10), 1e-3), "cosine start: %g", lr_at(SCHED_COSINE, M, 10, 110, f, 10));
    CHECK(close_to(lr_at(SCHED_COSINE, M, 10, 110, f, 60), 1e-4 + 0.5 * 9e-4), "cosine middle: %g", lr_at(SCHED_COSINE, M, 10, 110, f, 60));
    CHECK(close_to(lr_at(SCHED_COSINE, M, 10, 110, f, 110), 1e-4), "cosine end");
    CHECK(close_to(lr_at(SCHED_LINEAR, M, 10, 110, f, 35), 1e-3 - 0.25 * 9e-4), "linear quarter: %g", lr_at(SCHED_LINEAR, M, 10, 110, f, 35));
    CHECK(close_to(lr_at(SCHED_CONSTANT, M, 10, 110, f, 100), 1e-3), "constant");
    CHECK(close_to(lr_at(SCHED_CONSTANT, M, 10, 110, f, 4), 5e-4), "constant warms up too");
    /* wsd, N = 100: constant until 80, then 1 - sqrt(d) with d = (s - 80) / 20 */
    CHECK(close_to(lr_at(SCHED_WSD, M, 0, 100, f, 79), 1e-3), "wsd stable");
    CHECK(close_to(lr_at(SCHED_WSD, M, 0, 100, f, 85), 1e-4 + (1 - sqrt(0.25)) * 9e-4), "wsd decay: %g", lr_at(SCHED_WSD, M, 0, 100, f, 85));
    CHECK(close_to(lr_at(SCHED_WSD, M, 0, 100, f, 100), 1e-4), "wsd end");
}

/* Two shards of tokens 0,1,2,... (mod 500) so each row's content says where it came from. */
static void make_shards(const char *dir, int n_shards, size_t tokens_each) {
    char path[512];
    Err err;
    uint16_t *t = malloc(tokens_each * sizeof(uint16_t));
    for (int s = 0; s < n_shards; s++) {
        for (size_t i = 0; i < tokens_each; i++) t[i] = (uint16_t)((s * tokens_each + i) % 500);
        snprintf(path, sizeof path, "%s/train_%06d.bin", dir, s);
        if (shard_write(path, t, tokens_each, &err)) fprintf(stderr, "%s\n", err.msg);
    }
    free(t);
}

static void test_dataloader_rows(void) {
    char pat[512];
    Err err;
    snprintf(pat, sizeof pat, "%s/rows", tmpdir);
    mkdir_p(pat, &err);
    make_shards(pat, 2, 1000);
    snprintf(pat, sizeof pat, "%s/rows/train_*.bin", tmpdir);
    DataLoader dl;
    int B = 4, T = 16;
    CHECK_OK(dataloader_open(&dl, pat, B, T, 0, 1, 0, 1, 500, &err), &err);
    int32_t in[64], tg[64];
    /* unshuffled: rows in file order, row j starts at token j*T, targets are inputs shifted by one */
    CHECK_OK(dataloader_next(&dl, in, tg, &err), &err);
    for (int i = 0; i < B * T; i++) {
        CHECK(in[i] == i % 500, "input %d is %d", i, in[i]);
        int b = i / T, t = i % T;
        CHECK(tg[i] == (b * T + t + 1) % 500, "target %d is %d", i, tg[i]);
    }
    /* (1000-1)/16 = 62 rows per shard, 15 batches of 4 per shard */
    CHECK(dataloader_batches_per_epoch(&dl) == 30, "batches per epoch %ld", dataloader_batches_per_epoch(&dl));
    dataloader_close(&dl);
}

/* Reads n batches and returns a checksum of their first tokens. */
static unsigned long batches_sum(DataLoader *dl, int n, Err *err) {
    int32_t in[4 * 16], tg[4 * 16];
    unsigned long h = 1469598103ul;
    for (int i = 0; i < n; i++) {
        if (dataloader_next(dl, in, tg, err)) return 0;
        for (int b = 0; b < 4; b++) h = h * 1099511628211ul ^ (unsigned long)in[b * 16];
    }
    return h;
}

static void test_dataloader_shuffle_and_seek(void) {
    char pat[512];
    Err err;
    snprintf(pat, sizeof pat, "%s/rows/train_*.bin", tmpdir);
    DataLoader a, b, c;
    CHECK_OK(dataloader_open(&a, pat, 4, 16, 0, 1, 1, 7, 500, &err), &err);
    CHECK_OK(dataloader_open(&b, pat, 4, 16, 0, 1, 1, 7, 500, &err), &err);
    CHECK_OK(dataloader_open(&c, pat, 4, 16, 0, 1, 1, 8, 500, &err), &err);
    /* 70 batches crosses shards and an epoch (30 per epoch) */
    unsigned long ha = batches_sum(&a, 70, &err), hb = batches_sum(&b, 70, &err), hc = batches_sum(&c, 70, &err);
    CHECK(ha == hb, "same seed, different batches");
    CHECK(ha != hc, "different seeds, same batches");
    /* seek: remember a position, read on, then seek back and read the same batches */
    long ep = a.epoch, row = a.row_pos;
    int sh = a.shard_pos;
    unsigned long first = batches_sum(&a, 25, &err);
    CHECK_OK(dataloader_seek(&a, ep, sh, row, &err), &err);
    CHECK(batches_sum(&a, 25, &err) == first, "seek did not reproduce the batches");
    dataloader_close(&a); dataloader_close(&b); dataloader_close(&c);
}

/* Ranks split every global batch: for N ranks of B rows, rank r's batch is rows r*B..r*B+B-1 of the batch a
   1-rank loader of N*B rows reads, so together they are that global batch, in order. Shards of 62, 43 and 81
   rows (tails of every length are skipped), N = 1..4, with and without shuffle, over three epochs. */
static void test_dataloader_ranks(void) {
    char pat[512];
    Err err;
    snprintf(pat, sizeof pat, "%s/ranks", tmpdir);
    mkdir_p(pat, &err);
    const size_t sizes[3] = {1000, 700, 1300};
    uint16_t *t = malloc(1300 * sizeof(uint16_t));
    for (int s = 0; s < 3; s++) {
        for (size_t i = 0; i < sizes[s]; i++) t[i] = (uint16_t)((s * 1300 + i) % 499);
        snprintf(pat, sizeof pat, "%s/ranks/train_%06d.bin", tmpdir, s);
        if (shard_write(pat, t, sizes[s], &err)) fprintf(stderr, "%s\n", err.msg);
    }
    free(t);
    snprintf(pat, sizeof pat, "%s/ranks/train_*.bin", tmpdir);
    enum { B = 2, T = 16, NMAX = 4 };
    for (int N = 1; N <= NMAX; N++)
        for (int shuffle = 0; shuffle <= 1; shuffle++) {
            DataLoader one, rk[NMAX];
            CHECK_OK(dataloader_open(&one, pat, N * B, T, 0, 1, shuffle, 5, 500, &err), &err);
            for (int r = 0; r < N; r++) CHECK_OK(dataloader_open(&rk[r], pat, B, T, r, N, shuffle, 5, 500, &err), &err);
            long per_epoch = dataloader_batches_per_epoch(&one);
            CHECK(per_epoch == 62 / (N * B) + 43 / (N * B) + 81 / (N * B), "N=%d: %ld global batches an epoch", N, per_epoch);
            for (int r = 0; r < N; r++) CHECK(dataloader_batches_per_epoch(&rk[r]) == per_epoch, "N=%d rank %d: batches", N, r);
            int32_t gi[NMAX * B * T], gt[NMAX * B * T], in[B * T], tg[B * T];
            int bad = 0;
            for (long k = 0; k < 3 * per_epoch + 1 && !bad; k++) {
                CHECK_OK(dataloader_next(&one, gi, gt, &err), &err);
                for (int r = 0; r < N; r++) {
                    CHECK_OK(dataloader_next(&rk[r], in, tg, &err), &err);
                    if (memcmp(in, gi + r * B * T, sizeof in) || memcmp(tg, gt + r * B * T, sizeof tg)) bad = 1;
                    if (rk[r].row_pos != one.row_pos || rk[r].shard_pos != one.shard_pos || rk[r].epoch != one.epoch) bad = 1;
                }
                CHECK(!bad, "N=%d shuffle=%d: global batch %ld differs from the ranks' rows", N, shuffle, k);
            }
            CHECK(one.epoch == 3, "N=%d: ended in epoch %ld", N, one.epoch);
            dataloader_close(&one);
            for (int r = 0; r < N; r++) dataloader_close(&rk[r]);
        }
}

static void test_dataloader_errors(void) {
    char pat[512], path[600];
    Err err;
    DataLoader dl;
    snprintf(pat, sizeof pat, "%s/none_*.bin", tmpdir);
    CHECK(dataloader_open(&dl, pat, 4, 16, 0, 1, 0, 1, 500, &err) != 0 && strstr(err.msg, "no token shards match"), "missing: %s", err.msg);
    /* too few tokens for a batch */
    snprintf(pat, sizeof pat, "%s/small", tmpdir);
    mkdir_p(pat, &err);
    make_shards(pat, 1, 20);
    snprintf(pat, sizeof pat, "%s/small/train_*.bin", tmpdir);
    CHECK(dataloader_open(&dl, pat, 4, 16, 0, 1, 0, 1, 500, &err) != 0 && strstr(err.msg, "too few tokens"), "small: %s", err.msg);
    /* not a shard */
    snprintf(path, sizeof path, "%s/junk_000.bin", tmpdir);
    write_file_atomic(path, "hello world, not a shard at all", 31, &err);
    snprintf(pat, sizeof pat, "%s/junk_*.bin", tmpdir);
    CHECK(dataloader_open(&dl, pat, 4, 16, 0, 1, 0, 1, 500, &err) != 0 && strstr(err.msg, "junk_000.bin: 31 bytes; expected a token shard"), "junk: %s", err.msg);
    /* a token id >= vocab is caught when the shard is read */
    snprintf(pat, sizeof pat, "%s/rows/train_*.bin", tmpdir);
    CHECK(dataloader_open(&dl, pat, 4, 16, 0, 1, 0, 1, 100, &err) != 0 && strstr(err.msg, "train_000000.bin"), "vocab: %s", err.msg);
}

/* A saved data position outside the data is refused, not read out of bounds (a crafted or stale resume state). */
static void test_dataloader_seek_range(void) {
    char pat[512];
    Err err;
    snprintf(pat, sizeof pat, "%s/rows/train_*.bin", tmpdir);
    DataLoader dl;
    CHECK_OK(dataloader_open(&dl, pat, 4, 16, 0, 1, 1, 7, 500, &err), &err);
    /* 62 rows a shard: row 62 is the shard's end (the next batch moves on), row 63 is past it */
    CHECK_OK(dataloader_seek(&dl, 0, 1, 62, &err), &err);
    int32_t in[64], tg[64];
    CHECK_OK(dataloader_next(&dl, in, tg, &err), &err);
    CHECK(dataloader_seek(&dl, 0, 1, 63, &err) != 0 && strstr(err.msg, "row 63") && strstr(err.msg, "62 rows"), "row 63: %s", err.msg);
    CHECK(dataloader_seek(&dl, 0, 0, 9223372036854775806L, &err) != 0 && strstr(err.msg, "row 9223372036854775806"), "huge row: %s", err.msg);
    CHECK(dataloader_seek(&dl, -1, 0, 0, &err) != 0 && strstr(err.msg, "epoch -1"), "negative epoch: %s", err.msg);
    CHECK(dataloader_seek(&dl, 0, 2, 0, &err) != 0 && strstr(err.msg, "shard 2"), "shard 2 of 2: %s", err.msg);
    dataloader_close(&dl);
}

/* Every shard's header is checked when the loader opens, not when the run first reaches the shard. */
static void test_dataloader_checks_every_shard(void) {
    char dir[512], path[600], pat[600];
    Err err;
    snprintf(dir, sizeof dir, "%s/several", tmpdir);
    mkdir_p(dir, &err);
    make_shards(dir, 3, 1000);
    snprintf(pat, sizeof pat, "%s/train_*.bin", dir);
    snprintf(path, sizeof path, "%s/train_000002.bin", dir);
    CHECK(truncate(path, 1024 + 2 * 999) == 0, "truncate");
    DataLoader dl;
    CHECK(dataloader_open(&dl, pat, 4, 16, 0, 1, 1, 7, 500, &err) != 0 && strstr(err.msg, "train_000002.bin: truncated"), "truncated: %s", err.msg);
    CHECK(truncate(path, 1024 + 2 * 1000 + 2) == 0, "extend");
    CHECK(dataloader_open(&dl, pat, 4, 16, 0, 1, 1, 7, 500, &err) != 0 && strstr(err.msg, "train_000002.bin"), "trailing data: %s", err.msg);
    CHECK(remove(path) == 0 && mkdir(path, 0755) == 0, "a directory named like a shard");
    CHECK(dataloader_open(&dl, pat, 4, 16, 0, 1, 1, 7, 500, &err) != 0 && strstr(err.msg, "train_000002.bin: is a directory"), "directory: %s", err.msg);
}

/* The tokenizer file's header and size are checked before the file is read whole: a file larger than its
   tokens can take (another kind of file behind a tokenizer's magic) is refused. */
static void test_tokenizer_file_checked_first(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/big_tokenizer.bin", tmpdir);
    int32_t h[256] = {TOKENIZER_MAGIC, 2, 3, 2};
    static char body[2000];
    memset(body, 1, sizeof body);
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(h, sizeof h, 1, f); fwrite(body, 1, sizeof body, f); fclose(f); }
    Tokenizer t;
    Err err;
    CHECK(tokenizer_load(&t, path, &err) != 0 && strstr(err.msg, "big_tokenizer.bin") && strstr(err.msg, "more than 3 tokens"), "%s", err.msg);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gpt2gen-test-train-%d", (int)getpid());
    Err err;
    mkdir_p(tmpdir, &err);
    RUN(test_lr_schedules);
    RUN(test_dataloader_rows);
    RUN(test_dataloader_shuffle_and_seek);
    RUN(test_dataloader_ranks);
    RUN(test_dataloader_errors);
    RUN(test_dataloader_seek_range);
    RUN(test_dataloader_checks_every_shard);
    RUN(test_tokenizer_file_checked_first);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) {}
    return check_summary();
}
