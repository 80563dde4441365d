/* Tests for runtime/data/tokenizer: loading a tiktoken ranks file, encoding (pieces, merges, GPT-2's known
 * ids, long pieces, in steps and streamed) and decoding, and printing token bytes as they stream. The files
 * it reads and writes, token shards and prepare are tests/test_tokenizer_files.c's; the small tokenizer and
 * the scratch folder are tests/tokenizer_fixture.h's. tests/cli/tokenizer_agree.sh holds the encoder against
 * tiktoken on megabytes.
 *
 * Two helper modes, for the shell tests:
 *   test_tokenizer --prepare ARGS...          runs `gpt2gen prepare ARGS...`
 *   test_tokenizer --encode RANKS IN OUT      encodes file IN as one text into shard OUT, prints MB/s */
/* check.h copies messages (Err holds up to 4096 bytes) into a 1024-byte buffer; cutting them is fine. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/check.h"
#include "tests/tokenizer_fixture.h"
#include <stdio.h>
#include "cli/commands.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer.h"
#include "common/err.h"
#include "common/files.h"
#include "common/clock.h"
#include <stdlib.h>
#include <string.h>

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
    if (tmpdir_make("test_tokenizer")) return 1;
    RUN(test_small_ranks_load_and_merge);
    RUN(test_base64_padding);
    RUN(test_pieces);
    RUN(test_gpt2_known_ids);
    RUN(test_roundtrip);
    RUN(test_long_pieces);
    RUN(test_encode_in_steps);
    RUN(test_encode_streamed);
    RUN(test_utf8_stream);
    tmpdir_remove();
    return check_summary();
}
