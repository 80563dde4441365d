/* tokenizer_fixture: what tests/test_tokenizer.c and tests/test_tokenizer_files.c share: a scratch folder
   for their files, and a small tokenizer of their own (the 256 single bytes plus a few merges), so that most
   tests run anywhere; GPT-2's real ranks are read from data/gpt2.tiktoken (tools/setup_data.sh makes it), and
   the tests that need them skip without it. Header-only, after tests/check.h: each program includes it once. */
#ifndef GPT2GEN_TESTS_TOKENIZER_FIXTURE_H
#define GPT2GEN_TESTS_TOKENIZER_FIXTURE_H
#include "tests/check.h"
#include "runtime/data/tokenizer.h"
#include "common/err.h"
#include "common/files.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GPT2_RANKS "data/gpt2.tiktoken"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[64][512];                    /* a ring: each test uses far fewer than 64 at once */
    static int k;
    k = (k + 1) % 64;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* Makes the scratch folder, /tmp/<prog>.XXXXXX; 0, or -1 (said on stderr). */
static int tmpdir_make(const char *prog) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/%s.XXXXXX", prog);
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return -1; }
    return 0;
}

static void tmpdir_remove(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* ---------- a small tokenizer: bytes 0..255 (in base64 order of their value), then merges ---------- */

static void base64_encode(const uint8_t *b, size_t n, char *out) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        out[o++] = tab[w >> 18 & 63]; out[o++] = tab[w >> 12 & 63];
        out[o++] = i + 1 < n ? tab[w >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? tab[w & 63] : '=';
    }
    out[o] = 0;
}

/* Ranks: 0..255 the single bytes, then "he", "ll", "hell", "hello", " w", "or", " wor", " world". */
static const char *small_merges[] = {"he", "ll", "hell", "hello", " w", "or", " wor", " world"};
#define N_SMALL (256 + 8)

static const char *write_small_ranks(void) {
    const char *path = tmp_path("small.tiktoken");
    FILE *f = fopen(path, "w");
    char b64[64];
    for (int c = 0; c < 256; c++) { uint8_t b = (uint8_t)c; base64_encode(&b, 1, b64); fprintf(f, "%s %d\n", b64, c); }
    for (int k = 0; k < 8; k++) {
        base64_encode((const uint8_t *)small_merges[k], strlen(small_merges[k]), b64);
        fprintf(f, "%s %d\n", b64, 256 + k);
    }
    fclose(f);
    return path;
}

static int load_small(Tokenizer *t) {
    Err err;
    if (tokenizer_load_ranks(t, write_small_ranks(), &err)) { CHECK(0, "%s", err.msg); return -1; }
    return 0;
}

static int have_gpt2(Tokenizer *t) {
    if (!file_exists(GPT2_RANKS)) return 0;
    Err err;
    if (tokenizer_load_ranks(t, GPT2_RANKS, &err)) { CHECK(0, "%s", err.msg); return 0; }
    return 1;
}

static int same_ids(const TokenVec *v, const int32_t *want, size_t n) {
    if (v->n != n) return 0;
    for (size_t i = 0; i < n; i++) if (v->data[i] != want[i]) return 0;
    return 1;
}
#endif
