/* test_checkpoint: llm.c model checkpoints: fp32 and bf16 round trips, bf16 and fp16 rounding, every kind of bad
   file (a FIFO included), and that a failed save leaves the previous file as it was. Files go to a fresh temp
   directory. */
#include <math.h>
#include "common/files.h"
#include "common/rng.h"
#include "common/fp16.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "runtime/checkpoint.h"
#include "tests/check.h"

/* CHECK_OK copies an Err message (4 KiB) into the harness's 1 KiB reason: truncation is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static char tmpdir[256];
static const GPT2Shape SHAPE = GPT2_SHAPE(16, 60, 128, 2, 2, 16);   /* maxT, V, Vp, L, NH, C */

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static size_t nparams(const GPT2Shape *s) {
    size_t sz[NUM_PARAM_TENSORS];
    return gpt2_param_sizes(s, sz, NULL);
}

static float *random_params(const GPT2Shape *s, unsigned long seed) {
    float *p = xmalloc(nparams(s) * sizeof(float));
    gpt2_init_params(s, p, seed);
    uint64_t rng = seed;
    for (size_t i = 0; i < nparams(s); i++) p[i] += rng_normal(&rng);   /* a spread of magnitudes and signs */
    return p;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* Writes raw bytes: a header of 256 int32 (from h) and nbody bytes of zeros. */
static void write_raw(const char *path, const int32_t *h, size_t header_ints, size_t nbody) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(h, 4, header_ints, f);
    char zero[4096] = {0};
    while (nbody > 0) { size_t k = nbody < sizeof zero ? nbody : sizeof zero; fwrite(zero, 1, k, f); nbody -= k; }
    fclose(f);
}

static void good_header(int32_t h[256], int version) {
    memset(h, 0, 256 * sizeof(int32_t));
    h[0] = 20240326; h[1] = version; h[2] = SHAPE.max_seq_len; h[3] = SHAPE.vocab_size; h[4] = SHAPE.n_layer;
    h[5] = SHAPE.n_head; h[6] = SHAPE.n_embd; h[7] = SHAPE.padded_vocab_size;
}

/* ---------------------------------------------------------------------------------------------------- */
static void test_fp32_round_trip(void) {
    size_t n = nparams(&SHAPE);
    float *p = random_params(&SHAPE, 1), *q = xcalloc(n, sizeof(float));
    Err err;
    const char *path = tpath("fp32.bin");
    CHECK_OK(checkpoint_save(path, &SHAPE, p, 0, &err), &err);
    GPT2Shape s;
    int bf16 = -1;
    CHECK_OK(checkpoint_read_header(path, &s, &bf16, &err), &err);
    CHECK(memcmp(&s, &SHAPE, sizeof s) == 0 && bf16 == 0, "header read back as another shape or as bf16");
    CHECK_OK(checkpoint_load(path, &SHAPE, q, &err), &err);
    CHECK(same_bits(p, q, n), "fp32 round trip changed bits");
    struct stat st;
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size == 1024 + 4 * n, "file size %lld, expected %zu",
          (long long)st.st_size, 1024 + 4 * n);
    memset(q, 0, n * sizeof(float));
    CHECK_OK(checkpoint_load(path, NULL, q, &err), &err);   /* NULL: any shape */
    CHECK(same_bits(p, q, n), "load without an expected shape changed bits");
    free(p); free(q);
}

static void test_bf16_round_trip(void) {
    size_t n = nparams(&SHAPE);
    float *p = random_params(&SHAPE, 2), *q = xcalloc(n, sizeof(float)), *r = xcalloc(n, sizeof(float));
    Err err;
    const char *path = tpath("bf16.bin");
    CHECK_OK(checkpoint_save(path, &SHAPE, p, 1, &err), &err);
    GPT2Shape s;
    int bf16 = -1;
    CHECK_OK(checkpoint_read_header(path, &s, &bf16, &err), &err);
    CHECK(bf16 == 1, "bf16 checkpoint read back as fp32");
    CHECK_OK(checkpoint_load(path, &SHAPE, q, &err), &err);
    /* round to nearest: within half a bf16 ulp, 2^-9 relative to the value's binade, so <= 2^-8 |x| */
    double worst = 0;
    for (size_t i = 0; i < n; i++) if (p[i] != 0) worst = worse(worst, fabs((double)q[i] - p[i]) / fabs(p[i]));
    printf("  bf16 round trip: max rel err %.3e (bound 2^-8 = %.3e)\n", worst, 1.0 / 256);
    CHECK(worst <= 1.0 / 256, "bf16 round trip off by %.3e relative", worst);
    /* values already in bf16 come back bit-exact */
    CHECK_OK(checkpoint_save(path, &SHAPE, q, 1, &err), &err);
    CHECK_OK(checkpoint_load(path, &SHAPE, r, &err), &err);
    CHECK(same_bits(q, r, n), "bf16-representable values changed on a second round trip");
    free(p); free(q); free(r);
}

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_bf16_rounding(void) {
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1). 1 + 3*2^-8 is halfway
       between 1 + 2^-7 (odd) and 1 + 2^-6 (even). Just above a tie rounds up. */
    CHECK(bf16_from_f32(1.0f + 0x1p-8f) == 0x3f80, "1+2^-8 -> %04x, expected 3f80", bf16_from_f32(1.0f + 0x1p-8f));
    CHECK(bf16_from_f32(1.0f + 3 * 0x1p-8f) == 0x3f82, "1+3*2^-8 -> %04x, expected 3f82", bf16_from_f32(1.0f + 3 * 0x1p-8f));
    CHECK(bf16_from_f32(bits_f(0x3f808001)) == 0x3f81, "just above a tie must round up");
    CHECK(bf16_from_f32(-2.0f) == 0xc000 && bf16_to_f32(0xc000) == -2.0f, "-2 does not round trip");
    CHECK(bf16_from_f32(INFINITY) == 0x7f80 && bf16_from_f32(-INFINITY) == 0xff80, "infinities changed");
    CHECK(isnan(bf16_to_f32(bf16_from_f32(NAN))), "NaN did not stay NaN");
    CHECK(isnan(bf16_to_f32(bf16_from_f32(bits_f(0x7f800001)))), "a NaN with only low mantissa bits became infinity");
    CHECK(bf16_from_f32(bits_f(0x7f7fffff)) == 0x7f80, "FLT_MAX rounds to +inf in bf16");
    uint16_t h[3];
    float f[3] = {0.5f, -0.25f, 3.0f}, g[3];
    bf16_from_f32_array(h, f, 3);
    bf16_to_f32_array(g, h, 3);
    CHECK(memcmp(f, g, sizeof f) == 0, "array helpers do not round trip exact values");
}

/* fp16 (common/fp16.h, for the CUDA backend's fp16 weights): every one of the 65536 values round trips; between
   each two neighbours, the midpoint goes to the even one and the floats just beside it to the nearer one (so
   normals, subnormals, the carry into the next binade and the edge to infinity are all covered); and known
   values. */
static void test_fp16_rounding(void) {
    long bad_trip = 0, bad_round = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = fp16_to_f32((uint16_t)h);
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) { bad_trip += !isnan(f) || !isnan(fp16_to_f32(fp16_from_f32(f))); continue; }
        bad_trip += fp16_from_f32(f) != h;
        if ((h & 0x7fffu) >= 0x7bffu) continue;                       /* the largest finite value and infinity */
        float next = fp16_to_f32((uint16_t)(h + 1)), mid = 0.5f * (f + next);   /* exact: 12 significant bits */
        uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
        bad_round += fp16_from_f32(mid) != even;
        bad_round += fp16_from_f32(nextafterf(mid, f)) != h;
        bad_round += fp16_from_f32(nextafterf(mid, next)) != h + 1;
    }
    CHECK(bad_trip == 0, "%ld fp16 values do not round trip", bad_trip);
    CHECK(bad_round == 0, "%ld midpoints or their neighbours rounded the wrong way", bad_round);
    CHECK(fp16_to_f32(0x3c00) == 1.0f && fp16_to_f32(0xc000) == -2.0f && fp16_to_f32(0x7bff) == 65504.0f &&
          fp16_to_f32(0x0001) == 0x1p-24f && fp16_to_f32(0x0400) == 0x1p-14f && fp16_to_f32(0x7c00) == INFINITY, "known values");
    CHECK(fp16_from_f32(65519.99f) == 0x7bff && fp16_from_f32(65520.0f) == 0x7c00 && fp16_from_f32(-1e30f) == 0xfc00,
          "the edge to infinity: 65504 + half a step rounds to infinity (the even side)");
    CHECK(fp16_from_f32(0x1p-25f) == 0 && fp16_from_f32(nextafterf(0x1p-25f, 1.0f)) == 1 && fp16_from_f32(-0x1p-26f) == 0x8000 &&
          fp16_from_f32(bits_f(1)) == 0, "below the smallest subnormal");
    CHECK(isnan(fp16_to_f32(fp16_from_f32(NAN))) && isnan(fp16_to_f32(fp16_from_f32(bits_f(0x7f800001)))), "NaN did not stay NaN");
    uint16_t h[3];
    float f[3] = {0.1f, -3.0e-6f, 3.0f}, g[3];
    x16_from_f32_array(1, h, f, 3);
    x16_to_f32_array(1, g, h, 3);
    CHECK(g[0] == x16_round(1, 0.1f) && g[0] != 0.1f && fabsf(g[0] - 0.1f) <= 0.1f * 0x1p-11f && g[2] == 3.0f &&
          fabsf(g[1] + 3.0e-6f) <= 0x1p-25f, "array helpers: %.9g %.9g %.9g", g[0], g[1], g[2]);
    x16_from_f32_array(0, h, f, 3);
    CHECK(h[2] == bf16_from_f32(3.0f) && h[0] == bf16_from_f32(0.1f), "x16 with is_fp16 = 0 is bf16");
}

/* ---------------------------------------------------------------------------------------------------- */
/* bad files: each is refused with a message naming the file and what was expected */

static void expect_refused(const char *path, const GPT2Shape *expect, const char *want_in_msg) {
    float *buf = xcalloc(nparams(&SHAPE) + 1024, sizeof(float));
    Err err = {{0}};
    int rc = checkpoint_load(path, expect, buf, &err);
    CHECK(rc != 0, "%s was accepted", path);
    CHECK(strstr(err.msg, path) != NULL, "message does not name the file: %s", err.msg);
    CHECK(strstr(err.msg, want_in_msg) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want_in_msg);
    printf("  refused: %s\n", err.msg);
    free(buf);
}

static void test_bad_files(void) {
    size_t n = nparams(&SHAPE);
    int32_t h[256];
    expect_refused(tpath("missing.bin"), NULL, "cannot open");

    good_header(h, 3); h[0] = 20240520;                     /* a token shard's magic */
    write_raw(tpath("magic.bin"), h, 256, 4 * n);
    expect_refused(tpath("magic.bin"), NULL, "expected 20240326");

    good_header(h, 4);
    write_raw(tpath("version.bin"), h, 256, 4 * n);
    expect_refused(tpath("version.bin"), NULL, "expected 3 (fp32) or 5 (bf16)");

    good_header(h, 3);
    write_raw(tpath("truncated.bin"), h, 256, 4 * n - 4);
    expect_refused(tpath("truncated.bin"), NULL, "truncated");

    good_header(h, 5);                                      /* bf16 header, fp32-sized body */
    write_raw(tpath("trailing.bin"), h, 256, 4 * n);
    expect_refused(tpath("trailing.bin"), NULL, "trailing data");

    good_header(h, 3);
    write_raw(tpath("short_header.bin"), h, 10, 0);
    expect_refused(tpath("short_header.bin"), NULL, "1024-byte header");

    write_raw(tpath("empty.bin"), h, 0, 0);
    expect_refused(tpath("empty.bin"), NULL, "truncated");

    good_header(h, 3); h[5] = 0;
    write_raw(tpath("zero_heads.bin"), h, 256, 4 * n);
    expect_refused(tpath("zero_heads.bin"), NULL, "n_head is 0");

    good_header(h, 3); h[6] = 1 << 30; h[4] = 1 << 30;       /* sizes that would overflow */
    write_raw(tpath("huge.bin"), h, 256, 4 * n);
    expect_refused(tpath("huge.bin"), NULL, "implausible");

    expect_refused(tmpdir, NULL, "directory");

    /* a FIFO is refused at once: opening it to read would wait for a writer (the alarm fails a hang) */
    CHECK(mkfifo(tpath("fifo.bin"), 0644) == 0, "mkfifo");
    alarm(20);
    expect_refused(tpath("fifo.bin"), NULL, "not a regular file");
    alarm(0);
}

static void test_shape_mismatch(void) {
    float *p = random_params(&SHAPE, 3);
    Err err;
    const char *path = tpath("shape.bin");
    CHECK_OK(checkpoint_save(path, &SHAPE, p, 0, &err), &err);
    GPT2Shape e = SHAPE;
    e.n_layer = 4;
    expect_refused(path, &e, "n_layer is 2 in the checkpoint, the config says 4");
    e = SHAPE; e.n_embd = 32;
    expect_refused(path, &e, "n_embd is 16 in the checkpoint, the config says 32");
    e = SHAPE; e.padded_vocab_size = 256;
    expect_refused(path, &e, "padded_vocab_size is 128 in the checkpoint, the config says 256");
    e = SHAPE; e.max_seq_len = 1024;
    expect_refused(path, &e, "max_seq_len is 16 in the checkpoint, the config says 1024");
    free(p);
}

/* ---------------------------------------------------------------------------------------------------- */
static char *slurp(const char *path, size_t *len) {
    Err err;
    return read_file(path, len, &err);
}

static void test_failed_save_keeps_old_file(void) {
    float *good = random_params(&SHAPE, 4), *other = random_params(&SHAPE, 5);
    Err err;
    const char *path = tpath("keep.bin");
    CHECK_OK(checkpoint_save(path, &SHAPE, good, 0, &err), &err);
    size_t len0, len1;
    char *before = slurp(path, &len0);
    /* a save that cannot be written whole (the file size limit, SIGXFSZ ignored: write fails with EFBIG, as on a
       full disk) fails before the rename */
    struct rlimit old, small;
    getrlimit(RLIMIT_FSIZE, &old);
    small = old;
    small.rlim_cur = 4096;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
    int rc = checkpoint_save(path, &SHAPE, other, 0, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, was);
    CHECK(rc != 0, "save succeeded although it could not be written whole");
    CHECK(strstr(err.msg, path) != NULL && strstr(err.msg, "write failed"), "message does not name the file: %s", err.msg);
    char *after = slurp(path, &len1);
    CHECK(before && after && len0 == len1 && memcmp(before, after, len0) == 0, "the good file changed after a failed save");
    /* an invalid shape is refused before anything is written */
    GPT2Shape bad = SHAPE;
    bad.n_head = 3;
    CHECK(checkpoint_save(path, &bad, other, 0, &err) != 0 && strstr(err.msg, "not a multiple"), "bad shape saved: %s", err.msg);
    free(after);
    after = slurp(path, &len1);
    CHECK(after && len0 == len1 && memcmp(before, after, len0) == 0, "the good file changed after a refused save");
    /* a directory that does not exist */
    CHECK(checkpoint_save(tpath("no/such/dir.bin"), &SHAPE, good, 0, &err) != 0, "save into a missing directory succeeded");
    free(before); free(after); free(good); free(other);
}

static void cleanup(void) {
    const char *names[] = {"fp32.bin", "bf16.bin", "magic.bin", "version.bin", "truncated.bin", "trailing.bin",
                           "short_header.bin", "empty.bin", "zero_heads.bin", "huge.bin", "shape.bin", "keep.bin", "fifo.bin"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) remove(tpath(names[i]));
    rmdir(tmpdir);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gpt2gen_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_fp32_round_trip);
    RUN(test_bf16_round_trip);
    RUN(test_bf16_rounding);
    RUN(test_fp16_rounding);
    RUN(test_bad_files);
    RUN(test_shape_mismatch);
    RUN(test_failed_save_keeps_old_file);
    cleanup();
    return check_summary();
}
