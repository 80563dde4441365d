/* Tests for runtime/tokenizer, runtime/shard and runtime/prepare.
 *
 * Most tests build a small tokenizer of their own (the 256 single bytes plus a few merges), so they run
 * anywhere. The tests against GPT-2's real ranks read data/gpt2.tiktoken (tools/setup_data.sh makes it)
 * and skip without it; tests/cli/tokenizer_agree.sh holds the encoder against tiktoken on megabytes.
 *
 * Two helper modes, for the shell tests:
 *   test_tokenizer --prepare ARGS...          runs `gpt2gen prepare ARGS...`
 *   test_tokenizer --encode RANKS IN OUT      encodes file IN as one text into shard OUT, prints MB/s */
/* check.h copies messages (Err holds up to 4096 bytes) into a 1024-byte buffer; cutting them is fine. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/check.h"
#include <stdio.h>
#include "runtime/data/prepare.h"
#include "cli/commands.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer.h"
#include "common/err.h"
#include "common/files.h"
#include "common/clock.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    fwrite(data, 1, n, f);
    fclose(f);
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

/* ---------- tokenizer ---------- */

static void test_small_ranks_load_and_merge(void) {
    Tokenizer t;
    if (load_small(&t)) return;
    CHECK(t.vocab_size == N_SMALL + 1 && t.eot == N_SMALL, "vocab %d eot %d", t.vocab_size, t.eot);
    size_t n;
    const uint8_t *b = tokenizer_decode(&t, t.eot, &n);
    CHECK(n == 13 && !memcmp(b, "<|endoftext|>", 13), "eot bytes");
    CHECK(tokenizer_decode(&t, t.vocab_size, &n) == NULL && tokenizer_decode(&t, -1, &n) == NULL, "out of range decode");
    TokenVec v = {0};
    Err err;
    CHECK_OK(tokenizer_encode(&t, "hello world", 11, &v, &err), &err);
    int32_t want[] = {259, 263};
    CHECK(same_ids(&v, want, 2), "hello world -> %zu ids, first %d", v.n, v.n ? v.data[0] : -1);
    v.n = 0;
    CHECK_OK(tokenizer_encode(&t, "hellx", 5, &v, &err), &err);   /* "hell" + "x" */
    int32_t want2[] = {258, 'x'};
    CHECK(same_ids(&v, want2, 2), "hellx -> %zu ids", v.n);
    tokvec_free(&v);
    tokenizer_free(&t);
}

static void test_pieces(void) {
    /* each case: the text, then its pieces separated by '|' */
    static const char *cases[][2] = {
        {"Hello  world", "Hello| | world"},
        {"I'm they'll we've you're he'd it's 'T", "I|'m| they|'ll| we|'ve| you|'re| he|'d| it|'s| '|T"},
        {"DON'T", "DON|'|T"},
        {"a1b 22 ,.!x", "a|1|b| 22| ,.!|x"},
        {"x  \n\n  y", "x|  \n\n | y"},
        {"end   ", "end|   "},
        {" \t ", " \t "},
        {"a\tb", "a|\t|b"},
        {"''s", "''|s"},
        {"日本語 テキスト", "日本語| テキスト"},
        {"é\xcc\x81x", "é|\xcc\x81|x"},            /* a combining mark is not a letter */
        {"Ⅻ ½ ٣", "Ⅻ| ½| ٣"},                       /* Nl, No, Nd */
        {"a\xc2\xa0" "b", "a|\xc2\xa0|b"},          /* no-break space is \s, not " " */
        {"\xff\xfe" "ab", "\xff\xfe|ab"},           /* invalid UTF-8: one "other" byte each */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *s = cases[c][0];
        char got[256] = {0};
        size_t n = strlen(s), o = 0;
        for (size_t i = 0; i < n;) {
            size_t k = gpt2_piece_length((const uint8_t *)s + i, n - i);
            if (o) got[o++] = '|';
            memcpy(got + o, s + i, k); o += k;
            i += k;
        }
        CHECK(!strcmp(got, cases[c][1]), "'%s' split as '%s', expected '%s'", s, got, cases[c][1]);
    }
}

static void test_gpt2_known_ids(void) {
    Tokenizer t;
    if (!have_gpt2(&t)) SKIP("no %s (run tools/setup_data.sh)", GPT2_RANKS);
    CHECK(t.vocab_size == 50257 && t.eot == 50256, "vocab %d eot %d", t.vocab_size, t.eot);
    /* ids from tiktoken's gpt2 encoding */
    static const struct { const char *text; int32_t ids[32]; size_t n; } cases[] = {
        {"Hello world", {15496, 995}, 2},
        {"I'm here, they'll've  gone!\n\n  x", {40, 1101, 994, 11, 484, 1183, 1053, 220, 3750, 0, 628, 220, 2124}, 13},
        {"1234567 3.14159", {10163, 2231, 3134, 513, 13, 1415, 19707}, 7},
        {"héllo wörld — 日本語テキスト 🤖👍🏽", {71, 2634, 18798, 266, 30570, 335, 851, 10545, 245, 98, 17312, 105, 45739,
                                               252, 24336, 25084, 43302, 12520, 97, 244, 41840, 235, 8582, 237, 121}, 25},
        {"   leading\ttabs\r\n\r\nCRLF  ", {220, 220, 3756, 197, 8658, 82, 201, 198, 201, 198, 34, 7836, 37, 220, 220}, 15},
        {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}, 7},
        {"DON'T", {41173, 6, 51}, 3},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", {24794, 24794, 24794, 24794, 24794, 24794, 24794, 24794, 24794, 24794, 7252}, 11},
    };
    Err err;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        TokenVec v = {0};
        CHECK_OK(tokenizer_encode(&t, cases[c].text, strlen(cases[c].text), &v, &err), &err);
        CHECK(same_ids(&v, cases[c].ids, cases[c].n), "'%s': %zu ids, expected %zu", cases[c].text, v.n, cases[c].n);
        tokvec_free(&v);
    }
    tokenizer_free(&t);
}

static void check_roundtrip(const Tokenizer *t, const char *text, size_t n);

/* One piece of a megabyte: the merge loop must not be quadratic (tiktoken does this in ~0.3 s). */
static void test_long_pieces(void) {
    Tokenizer small, gpt2;
    if (load_small(&small)) return;
    size_t n = 1000000;
    char *text = xmalloc(n);
    for (size_t i = 0; i < n; i++) text[i] = "hello"[i % 5];
    TokenVec v = {0};
    Err err;
    double t0 = now_seconds();
    CHECK_OK(tokenizer_encode(&small, text, n, &v, &err), &err);
    double dt = now_seconds() - t0;
    size_t bad = 0;
    for (size_t i = 0; i < v.n; i++) bad += v.data[i] != 259;
    CHECK(v.n == n / 5 && bad == 0, "'hello' x 200000 gave %zu ids (%zu not 'hello')", v.n, bad);
    CHECK(dt < 5, "a 1 MB piece took %.1f s", dt);
    if (have_gpt2(&gpt2)) {
        memset(text, 'a', n);
        v.n = 0;
        t0 = now_seconds();
        CHECK_OK(tokenizer_encode(&gpt2, text, n, &v, &err), &err);
        dt = now_seconds() - t0;
        /* tiktoken: 'a' x 1000000 is 24794 ('aaaa') 250000 times */
        bad = 0;
        for (size_t i = 0; i < v.n; i++) bad += v.data[i] != 24794;
        CHECK(v.n == 250000 && bad == 0, "'a' x 1e6 gave %zu ids", v.n);
        CHECK(dt < 5, "'a' x 1e6 took %.1f s", dt);
        check_roundtrip(&gpt2, text, n);
        tokenizer_free(&gpt2);
    }
    free(text);
    tokvec_free(&v);
    tokenizer_free(&small);
}

/* Encoding in steps (as prepare does, to bound memory) gives the ids of encoding at once. */
static void test_encode_in_steps(void) {
    Tokenizer t;
    if (!have_gpt2(&t) && load_small(&t)) return;
    static const char text[] = "It's   a test,\n\n  of steps: 12345 日本語   \t\n hello world''s end  ";
    size_t n = sizeof text - 1;
    TokenVec whole = {0}, steps = {0};
    Err err;
    CHECK_OK(tokenizer_encode(&t, text, n, &whole, &err), &err);
    for (size_t step = 1; step <= n; step++) {
        steps.n = 0;
        for (size_t at = 0; at < n;) at += tokenizer_encode_some(&t, text + at, n - at, step, &steps);
        if (!same_ids(&steps, whole.data, whole.n)) { CHECK(0, "steps of %zu bytes gave other ids", step); break; }
    }
    tokvec_free(&whole); tokvec_free(&steps);
    tokenizer_free(&t);
}

/* Encoding a text as it arrives, in chunks of every size (what prepare does with a stream), gives the ids
   of encoding it at once: tokenizer_encode_stable takes only pieces that later text cannot change. */
static void test_encode_streamed(void) {
    Tokenizer t;
    if (!have_gpt2(&t) && load_small(&t)) return;
    static const char text[] = "It's   a test,\n\n  of steps: 12345 日本語   \t\n hello world''s end 'll 're\n\n\nx  \r\n%\n 'v 😀!"
                               " café Ελληνικά x  \u3000y q \u3000\u3000z  \u00a0\u00a0w abc\U0001D400\U0001D401 \u2028\u3000é";
    size_t n = sizeof text - 1;
    TokenVec whole = {0}, got = {0};
    Err err;
    CHECK_OK(tokenizer_encode(&t, text, n, &whole, &err), &err);
    for (size_t chunk = 1; chunk <= n; chunk++) {
        size_t done = 0, have = 0, k;
        got.n = 0;
        while (have < n) {
            have = have + chunk < n ? have + chunk : n;
            while ((k = tokenizer_encode_stable(&t, text + done, have - done, 1, &got)) > 0) done += k;
        }
        tokenizer_encode_some(&t, text + done, n - done, n, &got);
        if (!same_ids(&got, whole.data, whole.n)) { CHECK(0, "chunks of %zu bytes gave other ids", chunk); break; }
    }
    tokvec_free(&whole); tokvec_free(&got);
    tokenizer_free(&t);
}

/* decode(encode(text)) == text, byte for byte, whatever the bytes. */
static void check_roundtrip(const Tokenizer *t, const char *text, size_t n) {
    TokenVec v = {0};
    Err err;
    CHECK_OK(tokenizer_encode(t, text, n, &v, &err), &err);
    char *back = xmalloc(n * 2 + 16);
    size_t m = 0;
    for (size_t i = 0; i < v.n; i++) {
        size_t k;
        const uint8_t *b = tokenizer_decode(t, v.data[i], &k);
        if (!b || m + k > n) { m = n + 1; break; }
        memcpy(back + m, b, k); m += k;
    }
    CHECK(m == n && !memcmp(back, text, n), "round trip of '%.40s' (%zu bytes) gave %zu bytes", text, n, m);
    free(back);
    tokvec_free(&v);
}

static void test_roundtrip(void) {
    Tokenizer small, gpt2;
    static const char *texts[] = {
        "", "a", "Hello, world! It's 2024; we'll see.", "  \n\n\t\t  spaces   everywhere \r\n ",
        "Ünïcödé: Ελληνικά, русский, العربية, हिन्दी, 中文, 한국어, emoji 👩‍👩‍👧‍👦 🇯🇵",
        "numbers 0 12 345 6789 ١٢٣ ①②③ ¼ Ⅻ 3.14e-10 0x1F",
        "contractions: I'd you'D we'Ve they'RE don't ''quoted'' 'll",
        "punct: ...!?--(([[{{}}]]))<<>>@@##$$%%^^&&**__++==||\\\\//~~``",
    };
    if (load_small(&small)) return;
    int g = have_gpt2(&gpt2);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        check_roundtrip(&small, texts[i], strlen(texts[i]));
        if (g) check_roundtrip(&gpt2, texts[i], strlen(texts[i]));
    }
    char all[256];                                      /* every byte, invalid UTF-8 included */
    for (int c = 0; c < 256; c++) all[c] = (char)(255 - c);
    check_roundtrip(&small, all, 256);
    if (g) { check_roundtrip(&gpt2, all, 256); tokenizer_free(&gpt2); }
    tokenizer_free(&small);
}

static void test_tokenizer_file_roundtrip(void) {
    Tokenizer t, back;
    Err err;
    if (load_small(&t)) return;
    const char *path = tmp_path("tok.bin");
    CHECK_OK(tokenizer_save(&t, path, &err), &err);
    CHECK_OK(tokenizer_load(&back, path, &err), &err);
    CHECK(back.vocab_size == t.vocab_size && back.eot == t.eot, "vocab %d eot %d", back.vocab_size, back.eot);
    for (int id = 0; id < t.vocab_size && back.vocab_size == t.vocab_size; id++) {
        size_t n1, n2;
        const uint8_t *a = tokenizer_decode(&t, id, &n1), *b = tokenizer_decode(&back, id, &n2);
        if (n1 != n2 || memcmp(a, b, n1)) { CHECK(0, "token %d differs after the round trip", id); break; }
    }
    CHECK(back.can_encode, "a tokenizer file gives an encoder too");
    TokenVec v = {0};
    CHECK_OK(tokenizer_encode(&back, "hello world", 11, &v, &err), &err);
    int32_t want[] = {259, 263};
    CHECK(same_ids(&v, want, 2), "encoding with the loaded file");
    tokvec_free(&v);
    Tokenizer any;
    CHECK_OK(tokenizer_load_any(&any, path, &err), &err);
    CHECK(any.vocab_size == t.vocab_size, "load_any on a tokenizer file");
    tokenizer_free(&any);
    tokenizer_free(&back); tokenizer_free(&t);
}

static void test_tokenizer_file_gpt2(void) {
    Tokenizer t, back;
    Err err;
    if (!have_gpt2(&t)) SKIP("no %s", GPT2_RANKS);
    const char *path = tmp_path("gpt2_tok.bin");
    CHECK_OK(tokenizer_save(&t, path, &err), &err);
    CHECK_OK(tokenizer_load(&back, path, &err), &err);
    CHECK(back.vocab_size == 50257 && back.eot == 50256, "vocab %d eot %d", back.vocab_size, back.eot);
    /* a version 1 file: same body, no eot in the header; it must mean 50256 */
    size_t len;
    char *data = read_file(path, &len, &err);
    CHECK(data != NULL, "%s", err.msg);
    if (data) {
        int32_t *h = (int32_t *)data;
        h[1] = 1; h[3] = 0;
        write_bytes(tmp_path("gpt2_v1.bin"), data, len);
        Tokenizer v1;
        CHECK_OK(tokenizer_load(&v1, tmp_path("gpt2_v1.bin"), &err), &err);
        CHECK(v1.eot == 50256 && v1.vocab_size == 50257, "v1 eot %d", v1.eot);
        tokenizer_free(&v1);
        free(data);
    }
    tokenizer_free(&back); tokenizer_free(&t);
}

/* Writes a tokenizer file of header h (first 4 ints) and body, loads it, expects failure mentioning want. */
static void expect_bad_tokenizer(const char *name, const int32_t h4[4], const void *body, size_t body_len, const char *want) {
    int32_t h[256] = {h4[0], h4[1], h4[2], h4[3]};
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    fwrite(h, sizeof h, 1, f);
    fwrite(body, 1, body_len, f);
    fclose(f);
    Tokenizer t;
    Err err = {{0}};
    int rc = tokenizer_load(&t, path, &err);
    CHECK(rc != 0, "%s: loaded a bad file", name);
    CHECK(strstr(err.msg, path) && strstr(err.msg, want), "%s: message '%s' should name the file and say '%s'", name, err.msg, want);
    if (rc == 0) tokenizer_free(&t);
}

static void test_bad_tokenizer_files(void) {
    Tokenizer t;
    Err err = {{0}};
    CHECK(tokenizer_load(&t, tmp_path("nope.bin"), &err) != 0 && strstr(err.msg, "nope.bin") && strstr(err.msg, "cannot open"), "missing: %s", err.msg);
    write_bytes(tmp_path("short.bin"), "abc", 3);
    CHECK(tokenizer_load(&t, tmp_path("short.bin"), &err) != 0 && strstr(err.msg, "header"), "short: %s", err.msg);
    const char body[] = "\x01" "a" "\x01" "b" "\x02" "ab";           /* 3 tokens: a, b, ab */
    size_t nb = sizeof body - 1;
    expect_bad_tokenizer("magic.bin", (int32_t[]){20240326, 2, 3, 2}, body, nb, "magic 20240326, expected 20240328");
    expect_bad_tokenizer("version.bin", (int32_t[]){TOKENIZER_MAGIC, 3, 3, 2}, body, nb, "version 3; expected 1 or 2");
    expect_bad_tokenizer("vocab0.bin", (int32_t[]){TOKENIZER_MAGIC, 2, 0, 0}, body, nb, "vocab size 0");
    expect_bad_tokenizer("vocabneg.bin", (int32_t[]){TOKENIZER_MAGIC, 2, -5, 0}, body, nb, "vocab size -5");
    expect_bad_tokenizer("eot.bin", (int32_t[]){TOKENIZER_MAGIC, 2, 3, 3}, body, nb, "end-of-text id 3 is not below the vocab size 3");
    expect_bad_tokenizer("v1eot.bin", (int32_t[]){TOKENIZER_MAGIC, 1, 3, 0}, body, nb, "version 1 files use 50256");
    expect_bad_tokenizer("trunc_tokens.bin", (int32_t[]){TOKENIZER_MAGIC, 2, 4, 2}, body, nb, "truncated: header says 4 tokens, file ends at token 3");
    expect_bad_tokenizer("trunc_bytes.bin", (int32_t[]){TOKENIZER_MAGIC, 2, 3, 2}, body, nb - 1, "truncated: token 2 needs 2 bytes, file holds 1");
    expect_bad_tokenizer("zero_len.bin", (int32_t[]){TOKENIZER_MAGIC, 2, 3, 2}, "\x01" "a" "\x00" "\x01" "b", 5, "token 1 has length 0");
    expect_bad_tokenizer("extra.bin", (int32_t[]){TOKENIZER_MAGIC, 2, 2, 1}, body, nb, "3 extra bytes after the last of 2 tokens");
    /* a file that loads but cannot encode: not every byte is a token */
    int32_t h[256] = {TOKENIZER_MAGIC, 2, 3, 2};
    FILE *f = fopen(tmp_path("noenc.bin"), "wb");
    fwrite(h, sizeof h, 1, f); fwrite(body, 1, nb, f); fclose(f);
    CHECK_OK(tokenizer_load(&t, tmp_path("noenc.bin"), &err), &err);
    TokenVec v = {0};
    CHECK(!t.can_encode && tokenizer_encode(&t, "ab", 2, &v, &err) != 0 && strstr(err.msg, "cannot encode"), "encode without all bytes: %s", err.msg);
    tokenizer_free(&t);
}

static void expect_bad_ranks(const char *name, const char *text, const char *want) {
    const char *path = tmp_path(name);
    char *full = xmalloc(strlen(text) + 256 * 16);
    size_t o = 0;
    for (int c = 0; c < 255; c++) {                /* 255 good lines first, then the case's own */
        char b64[8];
        uint8_t b = (uint8_t)c;
        base64_encode(&b, 1, b64);
        o += (size_t)sprintf(full + o, "%s %d\n", b64, c);
    }
    strcpy(full + o, text);
    write_bytes(path, full, strlen(full));
    free(full);
    Tokenizer t;
    Err err = {{0}};
    int rc = tokenizer_load_ranks(&t, path, &err);
    CHECK(rc != 0, "%s: loaded a bad ranks file", name);
    CHECK(strstr(err.msg, path) && strstr(err.msg, want), "%s: message '%s' should name the file and say '%s'", name, err.msg, want);
    if (rc == 0) tokenizer_free(&t);
}

static void test_bad_ranks_files(void) {
    Tokenizer t;
    Err err = {{0}};
    CHECK(tokenizer_load_ranks(&t, tmp_path("none.tiktoken"), &err) != 0 && strstr(err.msg, "cannot open"), "missing: %s", err.msg);
    write_bytes(tmp_path("few.tiktoken"), "IQ== 0\n", 7);
    CHECK(tokenizer_load_ranks(&t, tmp_path("few.tiktoken"), &err) != 0 && strstr(err.msg, "1 lines"), "too few: %s", err.msg);
    /* blank lines and CRLF are fine, as in tiktoken's loader */
    char *good = xmalloc(256 * 16 + 8);
    size_t o = 0;
    for (int c = 0; c < 256; c++) {
        char b64[8];
        uint8_t b = (uint8_t)c;
        base64_encode(&b, 1, b64);
        o += (size_t)sprintf(good + o, c % 50 == 0 ? "\n%s %d\r\n" : "%s %d\n", b64, c);
    }
    write_bytes(tmp_path("blank.tiktoken"), good, o);
    free(good);
    int rc = tokenizer_load_ranks(&t, tmp_path("blank.tiktoken"), &err);
    CHECK(rc == 0, "blank lines: %s", err.msg);
    if (rc == 0) { CHECK(t.vocab_size == 257 && t.can_encode, "vocab %d", t.vocab_size); tokenizer_free(&t); }
    expect_bad_ranks("nospace.tiktoken", "/w==\n", ":256: expected \"<base64 token bytes> <rank>\"");
    expect_bad_ranks("b64.tiktoken", "!!!! 255\n", ":256: '!!!!' is not base64");
    expect_bad_ranks("rank.tiktoken", "/w== x\n", ":256: rank 'x' is not a number");
    expect_bad_ranks("big.tiktoken", "/w== 900\n", "rank 900, but the file has 256 ranks");
    expect_bad_ranks("dup.tiktoken", "/w== 3\n", ":256: rank 3 appears twice");
}

static void test_base64_padding(void) {
    /* The small ranks file holds every padding: single bytes ("IQ==", two '='), "he" ("aGU=", one), "hello"
       ("aGVsbG8=", one), "hell" ("aGVsbA==", two) and " world" ("IHdvcmxk", none). Each rank decodes to its bytes. */
    Tokenizer t;
    if (load_small(&t)) return;
    size_t n;
    for (int c = 0; c < 256; c++) {
        const uint8_t *b = tokenizer_decode(&t, c, &n);
        if (!b || n != 1 || b[0] != c) { CHECK(0, "rank %d is not byte %d (%zu bytes)", c, c, b ? n : 0); break; }
    }
    for (int k = 0; k < 8; k++) {
        const uint8_t *b = tokenizer_decode(&t, 256 + k, &n);
        size_t want = strlen(small_merges[k]);
        CHECK(b && n == want && !memcmp(b, small_merges[k], want), "rank %d is not '%s' (%zu bytes)", 256 + k, small_merges[k], b ? n : 0);
    }
    /* a ranks file of exactly those four strings, with unpadded, '='- and '=='-padded tokens, decodes the same */
    char b64[16];
    const char *path = tmp_path("pad.tiktoken");
    FILE *f = fopen(path, "w");
    for (int c = 0; c < 256; c++) { uint8_t byte = (uint8_t)c; base64_encode(&byte, 1, b64); fprintf(f, "%s %d\n", b64, c); }
    fprintf(f, "YWI= 256\nYWJj 257\n");
    fclose(f);
    Tokenizer p;
    Err err;
    if (tokenizer_load_ranks(&p, path, &err)) { CHECK(0, "%s", err.msg); tokenizer_free(&t); return; }
    const uint8_t *ab = tokenizer_decode(&p, 256, &n);
    CHECK(ab && n == 2 && !memcmp(ab, "ab", 2), "YWI= is not 'ab'");
    const uint8_t *abc = tokenizer_decode(&p, 257, &n);
    CHECK(abc && n == 3 && !memcmp(abc, "abc", 3), "YWJj is not 'abc'");
    const uint8_t *bang = tokenizer_decode(&p, '!', &n), *quote = tokenizer_decode(&p, '"', &n);
    CHECK(bang && quote && bang[0] == '!' && quote[0] == '"', "IQ== / Ig== are not '!' / '\"'");
    tokenizer_free(&p);
    tokenizer_free(&t);
}

static void test_utf8_stream(void) {
    char *buf; size_t len;
    FILE *f = open_memstream(&buf, &len);
    Utf8Stream s = {0};
    utf8_stream_put(&s, "a\xc3", 2, f);          /* é split across two tokens */
    fflush(f);
    CHECK(len == 1, "held back the first byte of é (wrote %zu)", len);
    utf8_stream_put(&s, "\xa9" "b", 2, f);
    utf8_stream_put(&s, "\xf0\x9f", 2, f);       /* 🤖 in three parts */
    utf8_stream_put(&s, "\xa4", 1, f);
    utf8_stream_put(&s, "\x96", 1, f);
    utf8_stream_put(&s, "\xff" "c", 2, f);       /* an invalid byte */
    utf8_stream_put(&s, "\xe6\x97" "d", 3, f);   /* a cut-off character */
    utf8_stream_put(&s, "\x1b[2J\t\x7f\xc2\x9b\xc2\xa0\n", 11, f);   /* ESC, DEL, C1 CSI: replaced */
    utf8_stream_put(&s, "\xe6", 1, f);           /* pending at the end */
    utf8_stream_flush(&s, f);
    fclose(f);
    const char *want = "a\xc3\xa9" "b" "\xf0\x9f\xa4\x96" "\xef\xbf\xbd" "c" "\xef\xbf\xbd" "d"
                       "\xef\xbf\xbd" "[2J\t" "\xef\xbf\xbd" "\xef\xbf\xbd" "\xc2\xa0\n" "\xef\xbf\xbd";
    CHECK(len == strlen(want) && !memcmp(buf, want, len), "stream printed '%s'", buf);
    free(buf);
}

/* ---------- shards ---------- */

static void test_shard_roundtrip(void) {
    uint16_t toks[1000];
    for (int i = 0; i < 1000; i++) toks[i] = (uint16_t)(i * 37 % 50257);
    Err err;
    const char *path = tmp_path("s.bin");
    CHECK_OK(shard_write(path, toks, 1000, &err), &err);
    uint16_t *back; size_t n;
    CHECK_OK(shard_read(path, &back, &n, 50257, &err), &err);
    CHECK(n == 1000 && back && !memcmp(back, toks, sizeof toks), "round trip: %zu tokens", n);
    free(back);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 1024 + 2000, "file size %lld", (long long)st.st_size);
    CHECK_OK(shard_write(path, toks, 0, &err), &err);
    CHECK_OK(shard_read(path, &back, &n, 50257, &err), &err);
    CHECK(n == 0 && back != NULL, "empty shard");
    free(back);
}

static void expect_bad_shard(const char *name, int32_t magic, int32_t version, int32_t count, const uint16_t *body, size_t nbody,
                             int vocab, const char *want) {
    int32_t h[256] = {magic, version, count};
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    fwrite(h, sizeof h, 1, f);
    fwrite(body, 2, nbody, f);
    fclose(f);
    uint16_t *toks = (uint16_t *)1; size_t n = 99;
    Err err = {{0}};
    int rc = shard_read(path, &toks, &n, vocab, &err);
    CHECK(rc != 0 && toks == NULL && n == 0, "%s: read a bad shard", name);
    CHECK(strstr(err.msg, path) && strstr(err.msg, want), "%s: message '%s' should name the file and say '%s'", name, err.msg, want);
    if (rc == 0) free(toks);
}

static void test_bad_shards(void) {
    uint16_t body[10] = {1, 2, 3, 4, 5, 6, 7, 8, 50257, 10};
    uint16_t *toks; size_t n;
    Err err = {{0}};
    CHECK(shard_read(tmp_path("missing.bin"), &toks, &n, 50257, &err) != 0 && strstr(err.msg, "missing.bin") && strstr(err.msg, "cannot open"), "missing: %s", err.msg);
    write_bytes(tmp_path("tiny.bin"), "xyz", 3);
    CHECK(shard_read(tmp_path("tiny.bin"), &toks, &n, 50257, &err) != 0 && strstr(err.msg, "3 bytes; expected a token shard"), "tiny: %s", err.msg);
    expect_bad_shard("magic.bin", 20240328, 1, 8, body, 8, 50257, "magic 20240328, expected 20240520");
    expect_bad_shard("version.bin", SHARD_MAGIC, 2, 8, body, 8, 50257, "version 2; expected 1");
    expect_bad_shard("trunc.bin", SHARD_MAGIC, 1, 10, body, 7, 50257, "truncated: header says 10 tokens, file holds 7");
    expect_bad_shard("extra.bin", SHARD_MAGIC, 1, 5, body, 7, 50257, "header says 5 tokens, file holds 4 bytes more");
    expect_bad_shard("negative.bin", SHARD_MAGIC, 1, -1, body, 0, 50257, "header says -1 tokens");
    expect_bad_shard("vocab.bin", SHARD_MAGIC, 1, 10, body, 10, 50257, "token at position 8 is 50257; expected ids below the vocab size 50257");
    expect_bad_shard("vocab_small.bin", SHARD_MAGIC, 1, 10, body, 10, 5, "token at position 4 is 5; expected ids below the vocab size 5");
    /* vocab_size 0 skips the id check */
    int32_t h[256] = {SHARD_MAGIC, 1, 10};
    FILE *f = fopen(tmp_path("nocheck.bin"), "wb");
    fwrite(h, sizeof h, 1, f); fwrite(body, 2, 10, f); fclose(f);
    CHECK_OK(shard_read(tmp_path("nocheck.bin"), &toks, &n, 0, &err), &err);
    free(toks);
}

/* ---------- prepare ---------- */

static int run_prepare(int n, const char **args) {
    char *argv[32];
    argv[0] = "prepare";
    for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
    fflush(stdout);
    int saved = dup(1);                         /* keep the command's progress lines out of the test output */
    if (!freopen("/dev/null", "w", stdout)) return -1;
    int rc = cmd_prepare(n + 1, argv);
    fflush(stdout);
    dup2(saved, 1); close(saved);
    return rc;
}

static void test_prepare_usage_errors(void) {
    const char *ranks = write_small_ranks();
    const char *in = tmp_path("in.txt");
    write_bytes(in, "hello\n", 6);
    CHECK(run_prepare(1, (const char *[]){"--help"}) == 0, "--help exits 0");
    CHECK(run_prepare(0, NULL) == 2, "no arguments: usage error");
    CHECK(run_prepare(1, (const char *[]){in}) == 2, "no -o: usage error");
    CHECK(run_prepare(2, (const char *[]){"-o", tmp_path("out")}) == 2, "no inputs: usage error");
    CHECK(run_prepare(2, (const char *[]){in, "-o"}) == 2, "-o without a value");
    CHECK(run_prepare(4, (const char *[]){in, "-o", tmp_path("out"), "--frobnicate"}) == 2, "unknown option");
    CHECK(run_prepare(5, (const char *[]){in, "-o", tmp_path("out"), "--val-fraction", "1.5"}) == 2, "bad fraction");
    CHECK(run_prepare(5, (const char *[]){in, "-o", tmp_path("out"), "--shard-tokens", "0"}) == 2, "bad shard size");
    CHECK(run_prepare(5, (const char *[]){in, "-o", tmp_path("out"), "--val-fraction", "1e-7"}) == 2, "fraction below a millionth");
    CHECK(run_prepare(4, (const char *[]){"-", "-", "-o", tmp_path("out")}) == 2, "standard input twice");
    CHECK(run_prepare(3, (const char *[]){in, "-o", "."}) == 2, "-o . (no folder of its own)");
    CHECK(run_prepare(3, (const char *[]){in, "-o", "/"}) == 2, "-o /");
    CHECK(run_prepare(5, (const char *[]){tmp_path("absent.txt"), "-o", tmp_path("out"), "--ranks", ranks}) == 1, "missing input");
    CHECK(!file_exists(tmp_path("out/train_000000.bin")), "nothing written when an input is missing");
    CHECK(run_prepare(5, (const char *[]){in, "-o", tmp_path("out"), "--ranks", tmp_path("absent.tiktoken")}) == 1, "missing ranks");
    CHECK(run_prepare(5, (const char *[]){in, "-o", tmp_path("out"), "--ranks", in}) == 1, "ranks file that is not one");
}

/* Reads all shards of a split back into one list. */
static size_t read_split(const char *dir, const char *split, uint16_t *out, size_t cap, int *shards) {
    size_t total = 0;
    for (*shards = 0;; ++*shards) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s_%06d.bin", dir, split, *shards);
        if (!file_exists(path)) break;
        uint16_t *t; size_t n;
        Err err;
        if (shard_read(path, &t, &n, 0, &err)) { CHECK(0, "%s", err.msg); break; }
        if (total + n <= cap) memcpy(out + total, t, n * 2);
        total += n;
        free(t);
    }
    return total;
}

/* Runs prepare on text (validation fraction 0) and decodes its training shard: returns the number of
   documents (0 when prepare fails) and puts the text of document `which` into out. */
static int prepared_documents(const char *text, size_t len, int which, char *out, size_t cap) {
    const char *ranks = write_small_ranks(), *in = tmp_path("split.txt"), *dir = tmp_path("split");
    write_bytes(in, text, len);
    out[0] = 0;
    if (run_prepare(7, (const char *[]){in, "-o", dir, "--ranks", ranks, "--val-fraction", "0"}) != 0) return 0;
    size_t cap_toks = len + 64, m = 0;
    uint16_t *toks = xmalloc(cap_toks * sizeof *toks);
    int shards, k = -1;
    size_t n = read_split(dir, "train", toks, cap_toks, &shards);
    Tokenizer t;
    if (load_small(&t)) { free(toks); return 0; }
    for (size_t i = 0; i < n && i < cap_toks; i++) {
        size_t b;
        const uint8_t *bytes = tokenizer_decode(&t, toks[i], &b);
        if (toks[i] == N_SMALL) k++;
        else if (k == which && m + b < cap) { memcpy(out + m, bytes, b); out[m += b] = 0; }
    }
    tokenizer_free(&t);
    free(toks);
    return k + 1;
}

static void test_split_documents(void) {
    static const struct { const char *text; int n; const char *first; } cases[] = {
        {"one\ntwo\n%\nthree\n%\n", 2, "one\ntwo\n"},
        {"%\nlead\n%\n\n%\n  \n%\nlast", 2, "lead\n"},      /* empty and blank documents dropped */
        {"a\r\n%\r\nb\r\n", 2, "a\r\n"},
        {"no separators, 100% one document\n%%\n", 1, "no separators, 100% one document\n%%\n"},
        {"a\n%", 1, "a\n"},                                  /* a last separator without its newline */
        {"", 0, ""},
        {" \n\t\n", 0, ""},
    };
    char doc[128];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = prepared_documents(cases[c].text, strlen(cases[c].text), 0, doc, sizeof doc);
        CHECK(n == cases[c].n, "case %zu: %d documents, expected %d", c, n, cases[c].n);
        if (n) CHECK(!strcmp(doc, cases[c].first), "case %zu: first document '%s'", c, doc);
    }
}

/* Inputs are read in blocks of 64 KiB: a separator line cut by a block's end still separates, and a
   line that only starts like one ("%x") does not. */
static void test_split_across_blocks(void) {
    static const char *tails[] = {"\n%\r\nyes\n", "\n%\nyes\n", "\n%x\nno\n"};
    size_t len = 65536 + 64;
    char *text = xmalloc(len + 16), doc[64];
    for (int cut = 1; cut <= 4; cut++)
        for (size_t k = 0; k < 3; k++) {
            size_t head = 65536 - (size_t)cut;
            memset(text, 'a', head);
            strcpy(text + head, tails[k]);
            int n = prepared_documents(text, strlen(text), 1, doc, sizeof doc);
            int want = tails[k][2] == 'x' ? 1 : 2;
            CHECK(n == want && (want == 1 || !strcmp(doc, "yes\n")), "cut %d, tail %zu: %d documents, the second '%s'", cut, k, n, doc);
        }
    free(text);
}

static void test_prepare_small(void) {
    const char *ranks = write_small_ranks();
    const char *fort = tmp_path("fort.txt"), *plain = tmp_path("plain.txt"), *out = tmp_path("prep");
    write_bytes(fort, "hello\n%\nab\n%\nc\n%\n", 17);      /* 3 documents */
    write_bytes(plain, "hello world", 11);                 /* 1 document */
    mkdir(out, 0755);
    write_bytes(tmp_path("prep/train_000009.bin"), "x", 1);  /* stale, from "an earlier run" */
    CHECK(run_prepare(8, (const char *[]){fort, plain, "-o", out, "--ranks", ranks, "--val-fraction", "0.25"}) == 0, "prepare ran");
    uint16_t toks[64];
    int shards;
    int eot = N_SMALL;
    size_t n = read_split(out, "val", toks, 64, &shards);
    /* one document in four, spread evenly: the fourth goes to val */
    uint16_t want_val[] = {eot, 259, 263};
    CHECK(n == 3 && shards == 1 && !memcmp(toks, want_val, sizeof want_val), "val: %zu tokens in %d shards", n, shards);
    n = read_split(out, "train", toks, 64, &shards);
    uint16_t want_train[] = {eot, 259, '\n', eot, 'a', 'b', '\n', eot, 'c', '\n'};
    CHECK(n == 10 && shards == 1 && !memcmp(toks, want_train, sizeof want_train), "train: %zu tokens in %d shards", n, shards);
    CHECK(!file_exists(tmp_path("prep/train_000009.bin")), "stale shard from an earlier run removed");
    Tokenizer t;
    Err err;
    CHECK_OK(tokenizer_load(&t, tmp_path("prep/tokenizer.bin"), &err), &err);
    CHECK(t.vocab_size == N_SMALL + 1 && t.eot == N_SMALL, "tokenizer.bin vocab %d", t.vocab_size);
    tokenizer_free(&t);
    /* small shards: same tokens, split 3 + 3 + 3 + 1 */
    CHECK(run_prepare(10, (const char *[]){fort, plain, "-o", out, "--ranks", ranks, "--val-fraction", "0.25", "--shard-tokens", "3"}) == 0, "prepare ran");
    uint16_t again[64];
    n = read_split(out, "train", again, 64, &shards);
    CHECK(n == 10 && shards == 4 && !memcmp(again, want_train, sizeof want_train), "train in 3-token shards: %zu tokens, %d shards", n, shards);
    /* the fraction 0 gives no val shard, and removes the old one */
    CHECK(run_prepare(8, (const char *[]){fort, plain, "-o", out, "--ranks", ranks, "--val-fraction", "0"}) == 0, "prepare ran");
    CHECK(!file_exists(tmp_path("prep/val_000000.bin")), "no val shard with --val-fraction 0");
    n = read_split(out, "train", again, 64, &shards);
    CHECK(n == 13 && shards == 1, "all documents in train: %zu tokens", n);
}

/* ---------- helper modes ---------- */

static int encode_mode(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s --encode RANKS IN OUT\n", argv[0]); return 2; }
    Tokenizer t;
    Err err;
    size_t len;
    char *text;
    if (tokenizer_load_any(&t, argv[2], &err) || !(text = read_file(argv[3], &len, &err))) { fprintf(stderr, "%s\n", err.msg); return 1; }
    TokenVec v = {0};
    double t0 = now_seconds();
    if (tokenizer_encode(&t, text, len, &v, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    double dt = now_seconds() - t0;
    uint16_t *u = xmalloc(v.n * 2 + 2);
    for (size_t i = 0; i < v.n; i++) u[i] = (uint16_t)v.data[i];
    if (shard_write(argv[4], u, v.n, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    printf("encoded %zu bytes into %zu tokens in %.3f s (%.2f MB/s)\n", len, v.n, dt, len / dt / 1e6);
    free(u); free(text); tokvec_free(&v); tokenizer_free(&t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--prepare")) return cmd_prepare(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "--encode")) return encode_mode(argc, argv);
    CHECK_MAIN_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_tokenizer.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_small_ranks_load_and_merge);
    RUN(test_base64_padding);
    RUN(test_pieces);
    RUN(test_gpt2_known_ids);
    RUN(test_roundtrip);
    RUN(test_long_pieces);
    RUN(test_encode_in_steps);
    RUN(test_encode_streamed);
    RUN(test_tokenizer_file_roundtrip);
    RUN(test_tokenizer_file_gpt2);
    RUN(test_bad_tokenizer_files);
    RUN(test_bad_ranks_files);
    RUN(test_utf8_stream);
    RUN(test_shard_roundtrip);
    RUN(test_bad_shards);
    RUN(test_split_documents);
    RUN(test_split_across_blocks);
    RUN(test_prepare_usage_errors);
    RUN(test_prepare_small);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_summary();
}
