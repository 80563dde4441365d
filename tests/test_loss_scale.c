/* test_loss_scale: the dynamic loss scaler (runtime/train/loss_scale.h): an overflow halves the scale and skips the
   step, `interval` clean steps double it (up to 2^24), an overflow at scale 1 or with the scaler off (fp32, bf16)
   is fatal; the overflow test hook's parsing; and the scaler's part of the resume state (version 3): it round
   trips, bad values are refused, and a version 2 state still loads, with no scale recorded. The training loop
   with the scaler, on the CPU backend, is tests/cli/loss_scale.sh. */
#include "runtime/train/loss_scale.h"
#include "runtime/train/state.h"
#include "common/files.h"
#include "tests/check.h"
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CHECK_OK copies an Err message (4 KiB) into the harness's reason: truncation is fine there. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static void test_overflow_halves_and_skips(void) {
    LossScaler s;
    loss_scale_init(&s, 1, 65536, 1000);
    CHECK(s.scale == 65536 && s.clean == 0 && s.skipped == 0, "init: scale %g clean %d skipped %d", s.scale, s.clean, s.skipped);
    CHECK(loss_scale_after(&s, 3.5f) == LOSS_SCALE_APPLY && s.clean == 1 && s.scale == 65536, "a clean step: clean %d scale %g", s.clean, s.scale);
    CHECK(loss_scale_after(&s, INFINITY) == LOSS_SCALE_SKIP && s.scale == 32768 && s.clean == 0 && s.skipped == 1,
          "inf: scale %g clean %d skipped %d", s.scale, s.clean, s.skipped);
    CHECK(loss_scale_after(&s, NAN) == LOSS_SCALE_SKIP && s.scale == 16384 && s.skipped == 2, "nan: scale %g skipped %d", s.scale, s.skipped);
    CHECK(loss_scale_after(&s, -INFINITY) == LOSS_SCALE_SKIP && s.scale == 8192 && s.skipped == 3, "-inf: scale %g", s.scale);
}

static void test_clean_steps_double(void) {
    LossScaler s;
    loss_scale_init(&s, 1, 1024, 3);
    float want[] = {1024, 1024, 2048, 2048, 2048, 4096};
    for (int i = 0; i < 6; i++) {
        CHECK(loss_scale_after(&s, 1.0f) == LOSS_SCALE_APPLY && s.scale == want[i], "clean step %d: scale %g, expected %g", i + 1, s.scale, want[i]);
    }
    /* an overflow restarts the count: 2 clean steps after it do not double yet, the 3rd does */
    loss_scale_after(&s, INFINITY);
    loss_scale_after(&s, 1.0f);
    loss_scale_after(&s, 1.0f);
    CHECK(s.scale == 2048 && s.clean == 2, "after overflow + 2 clean: scale %g clean %d", s.scale, s.clean);
    loss_scale_after(&s, 1.0f);
    CHECK(s.scale == 4096 && s.clean == 0, "after overflow + 3 clean: scale %g clean %d", s.scale, s.clean);
    /* growth stops at 2^24 */
    loss_scale_init(&s, 1, LOSS_SCALE_MAX / 2, 1);
    loss_scale_after(&s, 1.0f);
    loss_scale_after(&s, 1.0f);
    CHECK(s.scale == (float)LOSS_SCALE_MAX, "growth past 2^24: scale %g", s.scale);
}

static void test_fatal(void) {
    LossScaler s;
    loss_scale_init(&s, 0, 65536, 1000);   /* fp32 / bf16 */
    CHECK(s.scale == 1, "disabled: scale %g, expected 1", s.scale);
    for (int i = 0; i < 2000; i++) loss_scale_after(&s, 1.0f);
    CHECK(s.scale == 1 && s.skipped == 0, "disabled: clean steps changed the scale to %g", s.scale);
    CHECK(loss_scale_after(&s, INFINITY) == LOSS_SCALE_FATAL && s.scale == 1 && s.skipped == 0, "disabled: an overflow is not fatal");
    loss_scale_init(&s, 1, 2, 1000);
    CHECK(loss_scale_after(&s, NAN) == LOSS_SCALE_SKIP && s.scale == 1, "scale 2 -> 1: %g", s.scale);
    CHECK(loss_scale_after(&s, NAN) == LOSS_SCALE_FATAL && s.scale == 1 && s.skipped == 1, "an overflow at scale 1 must be fatal");
}

static void test_overflow_hook(void) {
    Err err;
    CHECK(loss_scale_hook_check(NULL, &err) == 0 && loss_scale_hook_check("", &err) == 0, "no hook");
    CHECK_OK(loss_scale_hook_check("3", &err), &err);
    CHECK_OK(loss_scale_hook_check("3,17,2", &err), &err);
    CHECK(loss_scale_hook_hits("3,17,2", 17) && loss_scale_hook_hits("3,17,2", 2) && loss_scale_hook_hits("3", 3), "listed steps hit");
    CHECK(!loss_scale_hook_hits("3,17,2", 1) && !loss_scale_hook_hits("3,17,2", 4) && !loss_scale_hook_hits("", 3) &&
          !loss_scale_hook_hits(NULL, 3) && !loss_scale_hook_hits("13", 3), "unlisted steps hit");
    const char *bad[] = {"0", "-1", "3,", ",3", "3,,4", "x", "3x", "3 4", "99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(loss_scale_hook_check(bad[i], &err) != 0 && strstr(err.msg, "GPT2GEN_TEST_OVERFLOW") && strstr(err.msg, bad[i]),
              "'%s' accepted or unclear: %s", bad[i], err.msg);
}

/* ---------------------------------------------------------------- the resume state's part */

static const GPT2Shape SHAPE = GPT2_SHAPE(8, 10, 16, 1, 2, 8);
static int32_t ORDER[2] = {1, 0};

static TrainState scaled_state(void) {
    size_t sz[NUM_PARAM_TENSORS], n = gpt2_param_sizes(&SHAPE, sz, NULL);
    TrainState s = {.ranks = 1, .rank = 0, .shuffle = 1, .step = 40, .num_params = n, .n_shards = 2, .shape = SHAPE, .B = 2,
                    .T = 4, .seed = 7, .loss_scale = 8192, .loss_scale_clean = 13, .skipped = 5};
    s.m = xcalloc(n, 4); s.v = xcalloc(n, 4); s.params = xcalloc(n, 4);
    s.shard_order = xmalloc(sizeof ORDER);
    memcpy(s.shard_order, ORDER, sizeof ORDER);
    for (size_t i = 0; i < n; i++) s.params[i] = (float)i;
    return s;
}

static void test_state_round_trip(void) {
    TrainState s = scaled_state(), r;
    Err err;
    CHECK_OK(state_save("ls_state.bin", &s, &err), &err);
    CHECK_OK(state_load("ls_state.bin", &r, &err), &err);
    CHECK(r.loss_scale == 8192 && r.loss_scale_clean == 13 && r.skipped == 5, "read back scale %g clean %d skipped %d",
          r.loss_scale, r.loss_scale_clean, r.skipped);
    state_free(&r);
    /* crafted values, sealed with a valid checksum, are refused with what is wrong */
    const struct { float scale; int clean, skipped; const char *want; } BAD[] = {
        {3, 0, 0, "loss scale 3, expected a power of two"}, {0.5f, 0, 0, "loss scale 0.5"}, {33554432, 0, 0, "loss scale 3.35544e+07"},
        {NAN, 0, 0, "loss scale nan"}, {1024, -1, 0, "(-1 clean, 0 skipped) out of range for step 40"},
        {1024, 0, 41, "(0 clean, 41 skipped) out of range for step 40"}, {1024, 0, -2, "-2 skipped"}};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        s.loss_scale = BAD[i].scale; s.loss_scale_clean = BAD[i].clean; s.skipped = BAD[i].skipped;
        CHECK_OK(state_save("ls_bad.bin", &s, &err), &err);
        CHECK(state_load("ls_bad.bin", &r, &err) != 0 && strstr(err.msg, BAD[i].want) && strstr(err.msg, "ls_bad.bin"),
              "'%s' expected, got: %s", BAD[i].want, err.msg);
    }
    state_free(&s);
}

/* The checksum of state.h, computed here from its description over the whole file, to seal a crafted file. */
static uint64_t documented_checksum(const unsigned char *b, size_t len) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = 0;
        memcpy(&w, b + i, len - i < 8 ? len - i : 8);
        h = ((h << 31 | h >> 33) ^ w) * 0x9E3779B97F4A7C15ull;
    }
    return ((h << 31 | h >> 33) ^ (uint64_t)len) * 0x9E3779B97F4A7C15ull;
}

/* A version 2 state (the layout before the scaler: [28..30] zero) loads, with scale 0 (not recorded), 0 clean and
   0 skipped; version 1 and a version from the future are refused. */
static void test_state_version_2(void) {
    TrainState s = scaled_state(), r;
    Err err;
    CHECK_OK(state_save("ls_v2.bin", &s, &err), &err);
    size_t len;
    unsigned char *b = (unsigned char *)read_file("ls_v2.bin", &len, &err);
    if (!b) { CHECK(0, "%s", err.msg); state_free(&s); return; }
    int32_t *h = (int32_t *)b;
    CHECK(h[1] == STATE_VERSION && STATE_VERSION == 3, "the state is written as version %d", h[1]);
    const int versions[] = {2, 1, 4};
    for (int k = 0; k < 3; k++) {
        h[1] = versions[k]; h[28] = h[29] = h[30] = 0; h[24] = h[25] = 0;
        uint64_t sum = documented_checksum(b, len);
        h[24] = (int32_t)(uint32_t)sum; h[25] = (int32_t)(uint32_t)(sum >> 32);
        FILE *f = fopen("ls_v2.bin", "wb");
        CHECK(f && fwrite(b, 1, len, f) == len, "write");
        if (f) fclose(f);
        int rc = state_load("ls_v2.bin", &r, &err);
        if (versions[k] == 2) {
            CHECK(rc == 0, "version 2: %s", err.msg);
            if (!rc) CHECK(r.loss_scale == 0 && r.loss_scale_clean == 0 && r.skipped == 0 && r.step == 40 && r.params[5] == 5.0f,
                           "version 2 read as scale %g clean %d skipped %d step %d", r.loss_scale, r.loss_scale_clean, r.skipped, r.step);
            state_free(&r);
        } else {
            CHECK(rc != 0 && strstr(err.msg, "ls_v2.bin") && strstr(err.msg, "version"), "version %d: %s", versions[k], rc ? err.msg : "loaded");
        }
    }
    free(b);
    state_free(&s);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    char dir[] = "/tmp/test_loss_scale.XXXXXX";
    if (!mkdtemp(dir) || chdir(dir)) { perror("scratch folder"); return 1; }
    RUN(test_overflow_halves_and_skips);
    RUN(test_clean_steps_double);
    RUN(test_fatal);
    RUN(test_overflow_hook);
    RUN(test_state_round_trip);
    RUN(test_state_version_2);
    remove("ls_state.bin"); remove("ls_bad.bin"); remove("ls_v2.bin");
    if (chdir("/") == 0) rmdir(dir);
    return check_summary();
}
