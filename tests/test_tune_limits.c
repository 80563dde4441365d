/* test_tune_limits: the tuning database's bounds (docs/kernels-and-tuning.md): a file past its size limit is refused at
   once with one message and ignored; a full-size file loads in linear time, and a rewrite drops the records newer
   ones supersede; a binary file gets one message, not one per line; a CRLF line is a record and a control byte
   is not; and a record is used only when it passed (status=ok) with every field inside its domain (a cuBLASLt
   algorithm index from 0 to 31). Runs from the repository root. */
#include "tests/check.h"
#include "tests/tune_db_test.h"
#include "common/clock.h"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* loads path with its messages into text (n bytes); the seconds it took */
static double load_capture(TuneDb *db, char *text, size_t n) {
    FILE *msgs = tmpfile();
    double t0 = now_seconds();
    tune_db_load(db, path, msgs);
    double took = now_seconds() - t0;
    stream_text(msgs, text, n);
    fclose(msgs);
    return took;
}

static int lines_in(const char *text) {
    int n = 0;
    for (const char *p = text; *p; p++) n += *p == '\n';
    return n;
}

/* a sparse file of 64 MiB: refused from its size, without reading it, in one message naming it and the limit */
static void test_size_limit(void) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)64 << 20) == 0, "cannot make a sparse %s", path);
    if (fd >= 0) close(fd);
    TuneDb db;
    char text[4096];
    double took = load_capture(&db, text, sizeof text);
    CHECK(db.n == 0 && lines_in(text) == 1 && strstr(text, path) && strstr(text, "4 MiB") && strstr(text, "ignored"),
          "a 64 MiB database: %d records, the messages: %s", db.n, text);
    CHECK(took < 0.1, "refusing a 64 MiB database took %.2f s (it was read?)", took);
    tune_db_free(&db);
    unlink(path);
}

/* 16,000 records of one variant, each for another template (what a tune after every template edit leaves), and
   one for another GPU: under the size limit; loaded in well under a second (a quadratic load takes many); a
   rewrite keeps the newest of the 16,000 and the other GPU's */
static void test_linear_load_and_superseded_dropped(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    enum { N = 16000 };
    TuneRecord r = best_kernel("gelu", "BLOCK_SIZE=128", &ENV);
    snprintf(r.record, sizeof r.record, "measure");
    TuneRecord other = r;
    snprintf(other.key.f[0], TUNE_FIELD_MAX, "NVIDIA_A100");
    size_t cap = (size_t)(N + 1) * 400, len = 0;
    char *text = xmalloc(cap);
    tune_record_format(&other, text, cap);
    len = strlen(text);
    text[len++] = '\n';
    for (int i = 0; i < N; i++) {
        snprintf(r.key.f[6], TUNE_FIELD_MAX, "t%015d", i);
        tune_record_format(&r, text + len, cap - len);
        len += strlen(text + len);
        text[len++] = '\n';
    }
    CHECK(len < (4u << 20), "the file has %zu bytes, past the limit", len);
    CHECK_OK(write_file_atomic(path, text, len, &err), &err);
    free(text);
    TuneDb db;
    char msgs[4096];
    double took = load_capture(&db, msgs, sizeof msgs);
    CHECK(db.n == N + 1 && db.corrupt == 0, "%d records, %d corrupt of %d", db.n, db.corrupt, N + 1);
    CHECK(took < 1.0, "loading %d records took %.2f s", N + 1, took);
    CHECK_OK(tune_db_rewrite(&db, &err), &err);
    tune_db_free(&db);
    tune_db_load(&db, path, NULL);
    CHECK(db.n == 2 && !strcmp(db.r[1].key.f[6], r.key.f[6]) && !strcmp(db.r[0].key.f[0], "NVIDIA_A100"),
          "after the rewrite %d records (expected the other GPU's and the newest template's)", db.n);
    tune_db_free(&db);
}

/* binary junk of 500 lines (NUL and control bytes) around one good record: one message for the file */
static void test_binary_file_one_message(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    TuneRecord good = best_kernel("gelu", "BLOCK_SIZE=512", &ENV);
    char line[2048], text[65536];
    tune_record_format(&good, line, sizeof line);
    size_t len = 0;
    for (int i = 0; i < 500; i++) {
        for (int j = 0; j < 40; j++) {
            int v = (i * 131 + j * 7) % 256;
            text[len++] = (char)(j == 0 || v == 0 || v == '\n' ? 1 : v);   /* never a comment, nor two lines */
        }
        text[len - 1 - i % 30] = 0;
        text[len++] = '\n';
        if (i == 250) len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", line);
    }
    CHECK_OK(write_file_atomic(path, text, len, &err), &err);
    TuneDb db;
    char msgs[8192];
    load_capture(&db, msgs, sizeof msgs);
    CHECK(db.n == 1 && db.corrupt == 500, "%d records, %d corrupt", db.n, db.corrupt);
    CHECK(lines_in(msgs) == 1 && strstr(msgs, "500 corrupt lines ignored, the first at line 1:"),
          "%d lines of messages: %.600s", lines_in(msgs), msgs);
    tune_db_free(&db);
}

/* a line ending in CRLF is its record; a control byte inside a field, or a status no tune writes, is corrupt */
static void test_crlf_and_control_bytes(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    TuneRecord good = best_kernel("gelu", "BLOCK_SIZE=512", &ENV), ctl = good, odd = good;
    snprintf(ctl.key.f[0], TUNE_FIELD_MAX, "NVIDIA\033[2JH200");
    snprintf(odd.status, sizeof odd.status, "banana");
    char a[2048], b[2048], c[2048], text[8192];
    tune_record_format(&good, a, sizeof a);
    tune_record_format(&ctl, b, sizeof b);
    tune_record_format(&odd, c, sizeof c);
    snprintf(text, sizeof text, "# made on Windows\r\n%s\r\n%s\r\n%s\r\n", a, b, c);
    write_text(text);
    TuneDb db;
    char msgs[4096];
    load_capture(&db, msgs, sizeof msgs);
    CHECK(db.n == 1 && db.corrupt == 2 && tune_db_find(&db, "best", "kernel", "gelu", NULL, &good.key, NULL),
          "%d records, %d corrupt, the CRLF record %s: %s", db.n, db.corrupt,
          tune_db_find(&db, "best", "kernel", "gelu", NULL, &good.key, NULL) ? "found" : "not found", msgs);
    CHECK(strstr(msgs, ":3: a control byte 0x1b") && strstr(msgs, ":4: status 'banana'") && !strchr(msgs, '\r') &&
          !strchr(msgs, '\033'), "the messages: %s", msgs);
    TuneApplied ap;
    char out[2048];
    apply_capture(&db, &ap, out, sizeof out);
    CHECK(ap.kernels == 1 && ap.stale == 0, "%d used, %d stale: %s", ap.kernels, ap.stale, out);
    tune_db_free(&db);
}

/* a best record that says its variant was rejected is not a choice */
static void test_rejected_best_ignored(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    int gelu = module_of("gelu"), before = plan.families[gelu].tunables[0].value;
    TuneRecord r = best_kernel("gelu", "BLOCK_SIZE=512", &ENV);
    snprintf(r.status, sizeof r.status, "mismatch");
    TuneDb db;
    memset(&db, 0, sizeof db);
    snprintf(db.path, sizeof db.path, "%s", path);
    tune_db_put(&db, &r);
    TuneApplied ap;
    char out[2048];
    apply_capture(&db, &ap, out, sizeof out);
    CHECK(ap.kernels == 0 && plan.families[gelu].tunables[0].value == before,
          "a best record of status=mismatch was applied (BLOCK_SIZE %d)", plan.families[gelu].tunables[0].value);
    CHECK(strstr(out, "status=mismatch") && strstr(out, "ignored"), "the message: %s", out);
    tune_db_free(&db);
}

/* a matmul's algorithm index is one of cuBLASLt's heuristic results, 0 to 31: others are refused, not applied */
static void test_algo_index_domain(void) {
    static const struct { const char *algo; int ok; } cases[] = {
        {"-2147483647", 0}, {"-1", 0}, {"32", 0}, {"2147483647", 0}, {"31", 1}, {"0", 1},
    };
    Err err = {{0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_OK(make(NULL, &err), &err);
        char variant[256];
        snprintf(variant, sizeof variant, "algo=%s,id=31,tile=20,stages=8,splitk=-1,reduction=2,swizzle=0,custom=0,cluster=0",
                 cases[i].algo);
        MatmulAlgoChoice c;
        CHECK((tune_algo_parse(variant, &c) == 0) == cases[i].ok, "algo=%s: parsed %s", cases[i].algo,
              cases[i].ok ? "no" : "yes");
        TuneRecord r = tune_record("best", "matmul", "qkv", variant);
        tune_key_matmul(&r.key, &ENV, &plan, MM_QKV, "130100");
        TuneDb db;
        memset(&db, 0, sizeof db);
        tune_db_put(&db, &r);
        TuneApplied ap;
        char out[2048];
        apply_capture(&db, &ap, out, sizeof out);
        CHECK(ap.matmuls == cases[i].ok && plan.matmuls[MM_QKV].algo.set == cases[i].ok, "algo=%s: %d matmuls applied: %s",
              cases[i].algo, ap.matmuls, out);
        CHECK(cases[i].ok || strstr(out, "0 to 31"), "algo=%s: the message: %s", cases[i].algo, out);
        tune_db_free(&db);
    }
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    scratch_db("test-tune-limits");
    RUN(test_size_limit);
    RUN(test_linear_load_and_superseded_dropped);
    RUN(test_binary_file_one_message);
    RUN(test_crlf_and_control_bytes);
    RUN(test_rejected_best_ignored);
    RUN(test_algo_index_domain);
    unlink(path);
    rmdir(dir);
    return check_summary();
}
