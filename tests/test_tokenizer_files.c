/* Tests for the files of runtime/data: the llm.c tokenizer file (written, read back, refused when bad), tiktoken
 * ranks files refused, token shards (runtime/data/shard) and prepare (runtime/data/prepare). The small
 * tokenizer and the scratch folder are tests/tokenizer_fixture.h's; encoding is tests/test_tokenizer.c's. */
/* check.h copies messages (Err holds up to 4096 bytes) into a 1024-byte buffer; cutting them is fine. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/check.h"
#include "tests/tokenizer_fixture.h"
#include <stdio.h>
#include "runtime/data/prepare.h"
#include "cli/commands.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer.h"
#include "common/err.h"
#include "common/files.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    fwrite(data, 1, n, f);
    fclose(f);
}

/* ---------- tokenizer files ---------- */

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
    Err serr;                                               /* a stale shard, from "an earlier run" */
    CHECK_OK(shard_write(tmp_path("prep/train_000009.bin"), (const uint16_t[]){1, 2}, 2, &serr), &serr);
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

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    if (tmpdir_make("test_tokenizer_files")) return 1;
    RUN(test_tokenizer_file_roundtrip);
    RUN(test_tokenizer_file_gpt2);
    RUN(test_bad_tokenizer_files);
    RUN(test_bad_ranks_files);
    RUN(test_shard_roundtrip);
    RUN(test_bad_shards);
    RUN(test_split_documents);
    RUN(test_split_across_blocks);
    RUN(test_prepare_usage_errors);
    RUN(test_prepare_small);
    tmpdir_remove();
    return check_summary();
}
