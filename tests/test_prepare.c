/* test_prepare: the parts of `gpt2gen prepare` below the command line. Where a long document may be cut for
 * the threads (prepare_cut_is_safe: each side encoded alone gives the ids of the whole, checked against
 * encoding the whole); documents cut out of text in every --split-docs mode and out of JSON lines, the same
 * however the bytes arrive (whole, byte by byte, in odd blocks); JSON lines' errors naming file and line;
 * gzip and zstd undone (several members and frames, any read size), and damaged, truncated or misnamed
 * compressed files refused; folders listed recursively in path order, hidden names and link loops skipped.
 * tests/cli/prepare.sh runs the command itself on the same kinds of input. */
#include "tests/check.h"
#include "tests/tokenizer_fixture.h"
#include "runtime/data/corpus.h"
#include "runtime/data/documents.h"
#include "runtime/data/prepare.h"
#include "common/rng.h"
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

/* ---------- cuts ---------- */

/* Random text with what GPT-2's pre-tokenizer cares about: words, numbers, runs of spaces, newlines, tabs
   and CRs, non-ASCII letters and spaces (U+00A0, U+3000, U+2028), punctuation, contractions. */
static size_t random_text(char *out, size_t n, uint64_t seed) {
    static const char *parts[] = {"word", " word", "Hello", " the", "42", " 2024", "  ", "   ", "\n", "\n\n", "\t", "\r\n",
                                  " \n", "\n ", "'s", "'ll", " '", "!", "...", " --", "\xc3\xa9t\xc3\xa9", " \xe6\x97\xa5\xe6\x9c\xac",
                                  "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", " (x)", "\"", "a", " I", "%", "\n%\n"};
    uint64_t rng = seed;
    size_t at = 0;
    while (at < n) {
        const char *p = parts[rng_next(&rng) % (sizeof parts / sizeof parts[0])];
        size_t k = strlen(p);
        if (at + k > n) break;
        memcpy(out + at, p, k);
        at += k;
    }
    return at;
}

static void encode(const Tokenizer *t, const char *s, size_t n, TokenVec *v) {
    Err err;
    CHECK_OK(tokenizer_encode(t, s, n, v, &err), &err);
}

static void test_safe_cuts(void) {
    Tokenizer t;
    int gpt2 = have_gpt2(&t);
    if (!gpt2 && load_small(&t)) return;
    char text[6000];
    TokenVec whole = {0}, parts = {0};
    size_t cuts = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        size_t n = random_text(text, sizeof text, seed);
        whole.n = 0;
        encode(&t, text, n, &whole);
        for (size_t at = 0; at <= n; at++) {
            if (!prepare_cut_is_safe(text, n, at)) continue;
            cuts++;
            parts.n = 0;
            encode(&t, text, at, &parts);
            encode(&t, text + at, n - at, &parts);
            if (!same_ids(&parts, whole.data, whole.n)) {
                CHECK(0, "seed %llu: a cut before byte %zu ('%.8s') changes the ids", (unsigned long long)seed, at, text + at);
                break;
            }
        }
    }
    CHECK(cuts > 500, "only %zu safe cuts found", cuts);
    /* the check can fail: a cut inside a word does change the ids */
    parts.n = whole.n = 0;
    encode(&t, "hello world", 11, &whole);
    encode(&t, "hel", 3, &parts);
    encode(&t, "lo world", 8, &parts);
    CHECK(!same_ids(&parts, whole.data, whole.n), "a cut inside 'hello' gave the same ids");
    CHECK(!prepare_cut_is_safe("hello world", 11, 3) && prepare_cut_is_safe("hello world", 11, 5), "cut rule on 'hello world'");
    CHECK(!prepare_cut_is_safe("a  b", 4, 1) && prepare_cut_is_safe("a  b", 4, 2), "cut rule on a double space");
    CHECK(!prepare_cut_is_safe("x\n\xc3\xa9", 4, 2), "no cut before a non-ASCII character");
    tokvec_free(&whole); tokvec_free(&parts);
    tokenizer_free(&t);
}

/* ---------- documents ---------- */

/* A sink that keeps the documents that are not blank, each followed by "|" in one string. */
typedef struct { char buf[1 << 12]; size_t len; size_t doc_start; size_t docs; } Recorder;

static int rec_text(void *ctx, const char *s, size_t n, Err *err) {
    (void)err;
    Recorder *r = ctx;
    size_t room = sizeof r->buf - 2 - r->len;     /* len never passes sizeof buf - 2 */
    if (n > room) n = room;
    memcpy(r->buf + r->len, s, n);
    r->len += n;
    r->buf[r->len] = 0;
    return 0;
}

static int rec_end(void *ctx, Err *err) {
    (void)err;
    Recorder *r = ctx;
    int blank = 1;
    for (size_t i = r->doc_start; i < r->len; i++) blank &= strchr(" \t\n\r\v\f", r->buf[i]) != NULL;
    if (blank) r->len = r->doc_start;
    else { if (r->len < sizeof r->buf - 2) r->buf[r->len++] = '|'; r->docs++; }
    r->buf[r->len] = 0;
    r->doc_start = r->len;
    return 0;
}

/* Splits text[0..n) fed in blocks of `block` bytes (0: all at once) into r; the splitter's return code. */
static int split(const DocsOptions *o, CorpusKind kind, const char *text, size_t n, size_t block, Recorder *r, Err *err) {
    memset(r, 0, sizeof *r);
    DocSplitter d;
    docsplit_init(&d, o, kind, "in.txt", (DocSink){rec_text, rec_end, r});
    int rc = 0;
    for (size_t at = 0; at < n && rc == 0;) {
        size_t k = block && n - at > block ? block : n - at;
        rc = docsplit_feed(&d, text + at, k, err);
        at += k;
    }
    if (rc == 0) rc = docsplit_finish(&d, err);
    docsplit_free(&d);
    return rc;
}

static void test_split_modes(void) {
    static const struct { DocsMode mode; const char *sep, *text, *want; } cases[] = {
        {DOCS_SEPARATOR, NULL, "a\n%\nb\n", "a\n|b\n|"},
        {DOCS_SEPARATOR, NULL, "a\n\nb\n%\r\nc\n%x\n%", "a\n\nb\n|c\n%x\n|"},
        {DOCS_SEPARATOR, "<|endoftext|>", "s1\n\ns1b\n<|endoftext|>\ns2\n<|endoftext|>", "s1\n\ns1b\n|s2\n|"},
        {DOCS_BLANK, NULL, "p1 l1\np1 l2\n\n\np2\n  \t\np3", "p1 l1\np1 l2\n|p2\n|p3|"},
        {DOCS_BLANK, NULL, "\n\n  lead\r\n\r\nb\r\n \r\n", "  lead\r\n|b\r\n|"},
        {DOCS_BLANK, NULL, "a\n%\nb\n", "a\n%\nb\n|"},
        {DOCS_LINES, NULL, "x\ny\n\nz", "x\n|y\n|z|"},
        {DOCS_NONE, NULL, "a\n\nb\n%\n", "a\n\nb\n%\n|"},
        {DOCS_AUTO, NULL, "a\n\nb\n%\nc\n", "a\n\nb\n|c\n|"},          /* a "%" line: a fortune file */
        {DOCS_AUTO, NULL, "a\n\nb\n", "a\n|b\n|"},                     /* none: paragraphs */
        {DOCS_AUTO, NULL, "a\n%", "a\n|"},                             /* a last "%" without its newline */
        {DOCS_AUTO, NULL, "100% sure\n\n%%\n", "100% sure\n|%%\n|"},
        {DOCS_AUTO, NULL, "", ""},
    };
    Recorder r;
    Err err;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        DocsOptions o = {.mode = cases[c].mode, .separator = cases[c].sep};
        size_t n = strlen(cases[c].text);
        static const size_t blocks[] = {0, 1, 2, 3, 7};
        for (size_t b = 0; b < 5; b++) {
            CHECK_OK(split(&o, CORPUS_TEXT, cases[c].text, n, blocks[b], &r, &err), &err);
            if (strcmp(r.buf, cases[c].want)) { CHECK(0, "case %zu, blocks of %zu: '%s', expected '%s'", c, blocks[b], r.buf, cases[c].want); break; }
        }
    }
}

/* DOCS_AUTO looks at the first MiB only: a "%" line after it is text, one inside it makes a fortune file. */
static void test_auto_peek(void) {
    size_t n = DOCS_AUTO_PEEK + 64;
    char *text = xmalloc(n + 16);
    for (size_t i = 0; i < n; i += 4) memcpy(text + i, "xy\n\n", 4);
    Err err;
    DocsOptions o = {.mode = DOCS_AUTO};
    for (int late = 0; late < 2; late++) {
        size_t at = late ? DOCS_AUTO_PEEK : DOCS_AUTO_PEEK - 4;   /* "%\n" ending at or past the first MiB */
        memcpy(text + at, "%\n\n\n", 4);
        Recorder r;
        memset(&r, 0, sizeof r);
        DocSplitter d;
        docsplit_init(&d, &o, CORPUS_TEXT, "big.txt", (DocSink){rec_text, rec_end, &r});
        for (size_t i = 0; i < n; i += 65536) CHECK_OK(docsplit_feed(&d, text + i, n - i < 65536 ? n - i : 65536, &err), &err);
        CHECK_OK(docsplit_finish(&d, &err), &err);
        DocsMode mode = d.mode;
        docsplit_free(&d);
        CHECK(mode == (late ? DOCS_BLANK : DOCS_SEPARATOR), "a '%%' line at %zu: mode %d", at, (int)mode);
        memcpy(text + at, "xy\n\n", 4);
    }
    free(text);
}

static void test_json_lines(void) {
    static const char text[] = "{\"text\": \"one\\ntwo\", \"id\": 1}\n"
                               "\n"
                               "  {\"id\": 2, \"text\": \"caf\\u00e9 \\\"q\\\"\"}\r\n"
                               "{\"text\": \"nul\\u0000byte\"}\n"
                               "{\"text\": \"   \"}\n"
                               "{\"text\": \"last, no newline\"}";
    Recorder r;
    Err err;
    DocsOptions o = {0};
    static const char want[] = "one\ntwo|caf\xc3\xa9 \"q\"|nul\0byte|last, no newline|";
    for (size_t block = 0; block < 6; block += 5) {
        CHECK_OK(split(&o, CORPUS_JSONL, text, sizeof text - 1, block, &r, &err), &err);
        CHECK(r.len == sizeof want - 1 && !memcmp(r.buf, want, r.len) && r.docs == 4, "blocks of %zu: %zu documents '%s'", block, r.docs, r.buf);
    }
    o.field = "body";
    CHECK_OK(split(&o, CORPUS_JSONL, "\xef\xbb\xbf{\"body\": \"b\"}\n", 17, 0, &r, &err), &err);
    CHECK(!strcmp(r.buf, "b|"), "--field body, after a byte order mark: '%s'", r.buf);
    static const struct { const char *text, *field, *want; } bad[] = {
        {"{\"text\": \"a\"}\n{\"text\": \"b\"\n", NULL, "in.txt: line 2: not JSON"},
        {"{\"text\": \"a\"}\n\n[1, 2]\n", NULL, "in.txt: line 3: a JSON array, not an object"},
        {"{\"text\": \"a\"} x\n", NULL, "in.txt: line 1: not JSON"},
        {"{\"id\": 3, \"url\": \"u\"}\n", NULL, "line 1: no \"text\" field (it has: id, url;"},
        {"{\"text\": 12}\n", NULL, "line 1: \"text\" is a number, not a string"},
        {"{\"text\": null}\n", NULL, "\"text\" is a null, not a string"},
        {"[\n{\"text\": \"a\"}\n]\n", NULL, "line 1: a JSON array; prepare reads JSON lines"},
        {"{\"text\": \"a\"}\n{\"text\": \"a\"}\n{\"body\": 1}", "text", "line 3: no \"text\" field"},
    };
    o.field = NULL;
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        o.field = bad[c].field;
        err.msg[0] = 0;
        int rc = split(&o, CORPUS_JSONL, bad[c].text, strlen(bad[c].text), 0, &r, &err);
        CHECK(rc != 0 && strstr(err.msg, bad[c].want), "bad case %zu: rc %d, '%s'", c, rc, err.msg);
    }
}

/* ---------- compressed files ---------- */

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n, "cannot write %s", path);
    if (f) fclose(f);
}

/* gzip of data into out (a member), returning its size. */
static size_t gzip_member(const char *data, size_t n, unsigned char *out, size_t cap) {
    z_stream z = {0};
    deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    z.next_in = (unsigned char *)data; z.avail_in = (uInt)n;
    z.next_out = out; z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    size_t k = cap - z.avail_out;
    deflateEnd(&z);
    return k;
}

/* The whole content of path, read in steps of `step` bytes, into out (NUL-terminated); -1 + err on failure. */
static long read_all(const char *path, size_t step, char *out, size_t cap, Err *err) {
    CorpusReader *r = corpus_open(path, err);
    if (!r) return -1;
    size_t at = 0;
    long got;
    while ((got = corpus_read(r, out + at, step < cap - at - 1 ? step : cap - at - 1, err)) > 0) at += (size_t)got;
    corpus_close(r);
    out[at] = 0;
    return got < 0 ? -1 : (long)at;
}

static void test_compressed(void) {
    size_t n = 200000;
    char *text = xmalloc(n + 1), *back = xmalloc(2 * n + 64);
    uint64_t rng = 7;
    for (size_t i = 0; i < n; i++) text[i] = "abc de\n"[rng_next(&rng) % 7];
    size_t cap = n + 4096, half = n / 2;
    unsigned char *gz = xmalloc(2 * cap), *zs = xmalloc(2 * cap);
    size_t g1 = gzip_member(text, half, gz, cap), g2 = gzip_member(text + half, n - half, gz + g1, cap);   /* two members */
    size_t z1 = ZSTD_compress(zs, cap, text, half, 3), z2 = ZSTD_compress(zs + z1, cap, text + half, n - half, 3);
    write_file(tmp_path("t.txt.gz"), gz, g1 + g2);
    write_file(tmp_path("t.zst"), zs, z1 + z2);
    write_file(tmp_path("t.bin"), gz, g1 + g2);           /* gzip under another name: known by its bytes */
    Err err;
    static const size_t steps[] = {1, 777, 65536, 1 << 20};
    const char *names[] = {"t.txt.gz", "t.zst", "t.bin"};
    for (int f = 0; f < 3; f++)
        for (size_t s = 0; s < 4; s++) {
            if (steps[s] == 1 && f == 2) continue;
            long got = read_all(tmp_path(names[f]), steps[s], back, 2 * n + 64, &err);
            if (got != (long)n || memcmp(back, text, n)) { CHECK(0, "%s in steps of %zu: %ld bytes (%s)", names[f], steps[s], got, got < 0 ? err.msg : "differ"); break; }
        }
    CorpusReader *r = corpus_open(tmp_path("t.zst"), &err);
    CHECK(r && !strcmp(corpus_compression(r), "zstd"), "t.zst's compression");
    corpus_close(r);
    /* refused: truncated, damaged, misnamed */
    write_file(tmp_path("cut.gz"), gz, g1 / 2);
    write_file(tmp_path("cut.zst"), zs, z1 / 2);
    gz[g1 / 2] ^= 0x55; gz[g1 / 2 + 1] ^= 0x55;
    write_file(tmp_path("bad.gz"), gz, g1);
    write_file(tmp_path("plain.gz"), text, 100);
    write_file(tmp_path("plain.zst"), text, 100);
    write_file(tmp_path("t.xz"), "\xfd" "7zXZ\0rest", 10);
    static const struct { const char *name, *want; } bad[] = {
        {"cut.gz", "cut.gz: truncated gzip data"}, {"cut.zst", "cut.zst: truncated zstd data"},
        {"bad.gz", "bad.gz: damaged gzip data"}, {"plain.gz", "plain.gz: named as gzip-compressed"},
        {"plain.zst", "plain.zst: named as zstd-compressed"}, {"t.xz", "t.xz: xz-compressed"},
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        err.msg[0] = 0;
        long got = read_all(tmp_path(bad[c].name), 65536, back, 2 * n + 64, &err);
        CHECK(got < 0 && strstr(err.msg, bad[c].want), "%s: %ld bytes, '%s'", bad[c].name, got, err.msg);
    }
    CHECK(corpus_kind("a/b.jsonl.zst") == CORPUS_JSONL && corpus_kind("x.JSON") == CORPUS_JSONL &&
          corpus_kind("x.ndjson.gz") == CORPUS_JSONL && corpus_kind("x.txt.gz") == CORPUS_TEXT &&
          corpus_kind("jsonl") == CORPUS_TEXT, "kinds by name");
    free(text); free(back); free(gz); free(zs);
}

/* ---------- folders ---------- */

static void test_folders(void) {
    const char *dirs[] = {"c", "c/b", "c/a.d", "c/.git", "c/empty", "e"};
    for (size_t i = 0; i < 6; i++) mkdir(tmp_path(dirs[i]), 0755);
    const char *files[] = {"c/z.txt", "c/b/2.txt", "c/b/10.txt", "c/a.d/x.jsonl", "c/a.txt", "c/.hidden", "c/.git/HEAD"};
    for (size_t i = 0; i < 7; i++) write_file(tmp_path(files[i]), "x\n", 2);
    CHECK(symlink("..", tmp_path("c/b/up")) == 0, "symlink");          /* a loop back to c */
    CHECK(symlink("../z.txt", tmp_path("c/b/link.txt")) == 0, "symlink");
    char *inputs[] = {(char *)tmp_path("c"), (char *)tmp_path("c/z.txt")};
    CorpusList l;
    Err err;
    CHECK_OK(corpus_list(inputs, 2, NULL, &l, &err), &err);
    /* in the order of the paths' bytes (strcmp): 10.txt before 2.txt; the link back up skipped */
    const char *want[] = {"c/a.d/x.jsonl", "c/a.txt", "c/b/10.txt", "c/b/2.txt", "c/b/link.txt", "c/z.txt", "c/z.txt"};
    int good = l.n == 7 && l.total == 14;
    for (int i = 0; good && i < 7; i++) {
        good = !strcmp(l.files[i].path, tmp_path(want[i])) && l.files[i].input == (i == 6);
        if (!good) CHECK(0, "file %d: %s, expected %s", i, l.files[i].path, tmp_path(want[i]));
    }
    CHECK(good || l.n != 7, "%d files, %lld bytes", l.n, l.total);
    corpus_list_free(&l);
    char *empty[] = {(char *)tmp_path("e")};
    CHECK(corpus_list(empty, 1, NULL, &l, &err) != 0 && strstr(err.msg, "a folder with no files"), "empty folder: %s", err.msg);
    char *missing[] = {(char *)tmp_path("nope.txt")};
    CHECK(corpus_list(missing, 1, NULL, &l, &err) != 0 && strstr(err.msg, "nope.txt: cannot open"), "missing: %s", err.msg);
    write_file(tmp_path("c/b/data.tar.gz"), "x", 1);
    write_file(tmp_path("c/b/notes.xz"), "x", 1);
    CHECK_OK(corpus_list(inputs, 1, NULL, &l, &err), &err);
    CHECK(l.n == 6 && l.skipped == 2 && l.total == 12 && !strcmp(l.first_skipped, tmp_path("c/b/data.tar.gz")),
          "an archive in a folder: %d files, %d left out (%s)", l.n, l.skipped, l.first_skipped);
    corpus_list_free(&l);
    CHECK_OK(corpus_list(inputs, 1, tmp_path("c/b"), &l, &err), &err);   /* the output folder, inside: left out */
    CHECK(l.n == 3 && !strcmp(l.files[2].path, tmp_path("c/z.txt")), "c/b excluded: %d files", l.n);
    corpus_list_free(&l);
    char *tar[] = {(char *)tmp_path("c/b/data.tar.gz")};
    CHECK(corpus_list(tar, 1, NULL, &l, &err) != 0 && strstr(err.msg, "data.tar.gz: an archive"), "an archive named: %s", err.msg);
    mkdir(tmp_path("x"), 0755);
    write_file(tmp_path("x/a.zip"), "x", 1);
    char *only[] = {(char *)tmp_path("x")};
    CHECK(corpus_list(only, 1, NULL, &l, &err) != 0 && strstr(err.msg, "x: a folder with only files that prepare does not read"), "only archives: %s", err.msg);
    char *dash[] = {"-"};
    CHECK_OK(corpus_list(dash, 1, NULL, &l, &err), &err);
    CHECK(l.n == 1 && l.total == -1, "standard input: %d files, total %lld", l.n, l.total);
    corpus_list_free(&l);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    if (tmpdir_make("test_prepare")) return 1;
    RUN(test_safe_cuts);
    RUN(test_split_modes);
    RUN(test_auto_peek);
    RUN(test_json_lines);
    RUN(test_compressed);
    RUN(test_folders);
    tmpdir_remove();
    return check_summary();
}
