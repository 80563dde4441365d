/* prepare: text files -> token shards + tokenizer file (see prepare.h).
 *
 * Two passes over the inputs: the first reads every file and counts its documents, so that a missing
 * file stops the command before anything is written and the validation split (a fraction of all
 * documents, spread evenly over them, so that validation looks like training) is known; the second encodes and streams tokens into shards. Inputs are read one file
 * at a time, so memory holds one file and one shard. */
#include "runtime/prepare.h"
#include "runtime/shard.h"
#include "runtime/tokenizer.h"
#include "common/err.h"
#include "common/files.h"
#include "common/clock.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------- documents ---------- */

static int is_separator(const char *line, size_t n) {
    return (n == 1 && line[0] == '%') || (n == 2 && line[0] == '%' && line[1] == '\r');
}

static int all_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) if (!isspace((unsigned char)s[i])) return 0;
    return 1;
}

static void add_doc(const char *text, size_t start, size_t end, PrepareDoc **docs, size_t *n, size_t *cap) {
    if (all_space(text + start, end - start)) return;
    if (*n == *cap) { *cap = *cap ? *cap * 2 : 64; *docs = realloc(*docs, *cap * sizeof **docs); if (!*docs) abort(); }
    (*docs)[(*n)++] = (PrepareDoc){start, end - start};
}

size_t prepare_split_documents(const char *text, size_t len, PrepareDoc **docs) {
    size_t n = 0, cap = 0, doc_start = 0;
    *docs = NULL;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t line_end = nl ? (size_t)(nl - text) : len;       /* without its '\n' */
        if (is_separator(text + i, line_end - i)) {
            add_doc(text, doc_start, i, docs, &n, &cap);
            doc_start = nl ? line_end + 1 : len;
        }
        i = nl ? line_end + 1 : len;
    }
    add_doc(text, doc_start, len, docs, &n, &cap);
    return n;
}

/* ---------- shards, streamed ---------- */

typedef struct {
    const char *dir, *split;     /* "train" or "val" */
    uint16_t   *buf;
    size_t      n, alloc, cap;   /* tokens held, room for, per shard */
    int         shards;          /* written so far */
    size_t      tokens;          /* all tokens added */
} ShardWriter;

static void shard_name(char *out, size_t size, const char *dir, const char *split, int index) {
    snprintf(out, size, "%s/%s_%06d.bin", dir, split, index);
}

static int writer_flush(ShardWriter *w, Err *err) {
    if (w->n == 0) return 0;
    char path[4200];
    shard_name(path, sizeof path, w->dir, w->split, w->shards);
    if (shard_write(path, w->buf, w->n, err)) return -1;
    w->shards++;
    w->n = 0;
    return 0;
}

/* Doubles the buffer, up to one shard: small data sets stay small, the default 100M-token shard is not
   allocated up front. Called when full and below cap, so it always makes room. */
static void writer_grow(ShardWriter *w) {
    size_t want = w->alloc ? w->alloc * 2 : 65536;
    w->alloc = want < w->cap ? want : w->cap;
    w->buf = realloc(w->buf, w->alloc * sizeof *w->buf);
    if (!w->buf) { fprintf(stderr, "out of host memory for a shard of %zu tokens\n", w->alloc); abort(); }
}

static int writer_add(ShardWriter *w, const int32_t *ids, size_t n, Err *err) {
    for (size_t i = 0; i < n; i++) {
        if (w->n == w->cap && writer_flush(w, err)) return -1;
        if (w->n == w->alloc) writer_grow(w);
        w->buf[w->n++] = (uint16_t)ids[i];
    }
    w->tokens += n;
    return 0;
}

/* Removes shards left from an earlier run (index >= from), so that a glob over the directory sees
   only this run's shards. */
static void remove_stale(const char *dir, const char *split, int from) {
    DIR *d = opendir(dir);
    if (!d) return;
    char path[4200], tail[8];
    size_t n = strlen(split);
    for (struct dirent *e; (e = readdir(d));) {
        int index;
        if (strncmp(e->d_name, split, n) || e->d_name[n] != '_' || strlen(e->d_name) != n + 11) continue;
        if (sscanf(e->d_name + n + 1, "%6d%7s", &index, tail) != 2 || strcmp(tail, ".bin") || index < from) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
}

/* ---------- the command ---------- */

typedef struct {
    Tokenizer   tok;
    ShardWriter val, train;
    size_t      n_val_docs, total_docs, docs_seen, bytes_seen;
    TokenVec    ids;
    const char *path;            /* the file being encoded, for progress lines */
    const char *text;
    size_t      len, tokens;
    double      t0, last_report;
} Prepare;

#define STEP_BYTES (4u << 20)     /* encode in steps of this much text: bounded memory, progress lines */

/* A line every few seconds while one file takes long; done = bytes of the file encoded so far. */
static void report_progress(Prepare *p, size_t done) {
    double now = now_seconds();
    if (now - p->last_report < 5) return;
    p->last_report = now;
    printf("  %s: %.0f of %.0f MB, %zu tokens, %.1f MB/s\n", p->path, done / 1e6, p->len / 1e6, p->tokens,
           done / (now - p->t0) / 1e6);
    fflush(stdout);
}

/* One document, text[start .. start+len) of the file: end-of-text, then its text, in steps. */
static int encode_document(Prepare *p, ShardWriter *w, size_t start, size_t len, Err *err) {
    int32_t eot = p->tok.eot;
    if (writer_add(w, &eot, 1, err)) return -1;
    p->tokens++;
    for (size_t at = 0; at < len;) {
        p->ids.n = 0;
        at += tokenizer_encode_some(&p->tok, p->text + start + at, len - at, STEP_BYTES, &p->ids);
        if (writer_add(w, p->ids.data, p->ids.n, err)) return -1;
        p->tokens += p->ids.n;
        report_progress(p, start + at);
    }
    return 0;
}

/* Document d (counting over all inputs) is one of the n_val_docs evenly spaced over total_docs. */
static int is_val_document(const Prepare *p, size_t d) {
    return d * p->n_val_docs / p->total_docs != (d + 1) * p->n_val_docs / p->total_docs;
}

static int encode_file(Prepare *p, const char *path, int index, int n_files, Err *err) {
    size_t len;
    char *text = read_file(path, &len, err);
    if (!text) return -1;
    PrepareDoc *docs;
    size_t n_docs = prepare_split_documents(text, len, &docs);
    p->path = path; p->text = text; p->len = len; p->tokens = 0;
    p->t0 = p->last_report = now_seconds();
    int rc = 0;
    for (size_t d = 0; d < n_docs && rc == 0; d++) {
        ShardWriter *w = is_val_document(p, p->docs_seen++) ? &p->val : &p->train;
        rc = encode_document(p, w, docs[d].start, docs[d].len, err);
    }
    double dt = now_seconds() - p->t0;
    if (rc == 0)
        printf("[%d/%d] %s: %zu documents, %zu tokens, %.1f MB/s\n", index, n_files, path, n_docs, p->tokens,
               dt > 0 ? len / dt / 1e6 : 0.0);
    fflush(stdout);
    p->bytes_seen += len;
    free(docs); free(text);
    return rc;
}

/* First pass: every input readable, and the document count. */
static int count_documents(const PrepareArgs *a, size_t *total, Err *err) {
    *total = 0;
    for (int i = 0; i < a->n_inputs; i++) {
        size_t len;
        char *text = read_file(a->inputs[i], &len, err);
        if (!text) return -1;
        PrepareDoc *docs;
        *total += prepare_split_documents(text, len, &docs);
        free(docs); free(text);
    }
    if (*total == 0) return err_set(err, "the input files hold no documents (only whitespace)");
    return 0;
}

/* Validation documents: the fraction, rounded, but at least one when asked for any and at least one left
   for training. */
static size_t val_documents(double fraction, size_t total) {
    size_t n = (size_t)(fraction * (double)total + 0.5);
    if (fraction > 0 && n == 0) n = 1;
    if (n >= total) n = total - 1;
    return n;
}

static int load_tokenizer(Tokenizer *t, const char *path, Err *err) {
    if (tokenizer_load_any(t, path, err)) return -1;
    if (t->vocab_size > 65536) { tokenizer_free(t); return err_set(err, "%s: vocab size %d; token shards hold uint16 ids, so at most 65536", path, t->vocab_size); }
    if (!t->can_encode) { tokenizer_free(t); return err_set(err, "%s: some single bytes are not tokens, so it cannot encode arbitrary text", path); }
    return 0;
}

static void print_summary(const Prepare *p, const PrepareArgs *a, double seconds) {
    char dur[32];
    format_duration(seconds, dur, sizeof dur);
    printf("prepared %d files, %zu documents, %zu tokens in %s (%.1f MB/s)\n", a->n_inputs, p->docs_seen,
           p->val.tokens + p->train.tokens, dur, seconds > 0 ? p->bytes_seen / seconds / 1e6 : 0.0);
    printf("  %s/train_*.bin: %zu documents, %zu tokens in %d shard%s\n", a->out_dir, p->docs_seen - p->n_val_docs,
           p->train.tokens, p->train.shards, p->train.shards == 1 ? "" : "s");
    printf("  %s/val_*.bin:   %zu documents, %zu tokens in %d shard%s\n", a->out_dir, p->n_val_docs,
           p->val.tokens, p->val.shards, p->val.shards == 1 ? "" : "s");
    printf("  %s/tokenizer.bin: %d tokens, end-of-text %d\n", a->out_dir, p->tok.vocab_size, p->tok.eot);
    if (p->n_val_docs == 0 && a->val_fraction > 0)
        printf("note: no validation shard: with %zu document%s, none is left for it\n", p->docs_seen, p->docs_seen == 1 ? "" : "s");
}

int prepare_run(const PrepareArgs *a, Err *err) {
    double t0 = now_seconds();
    Prepare p = {0};
    size_t total_docs;
    if (load_tokenizer(&p.tok, a->ranks, err)) return -1;
    int rc = count_documents(a, &total_docs, err);
    if (rc == 0) rc = mkdir_p(a->out_dir, err);
    p.n_val_docs = val_documents(a->val_fraction, total_docs);
    p.total_docs = total_docs;
    p.val = (ShardWriter){.dir = a->out_dir, .split = "val", .cap = a->shard_tokens};
    p.train = (ShardWriter){.dir = a->out_dir, .split = "train", .cap = a->shard_tokens};
    for (int i = 0; i < a->n_inputs && rc == 0; i++) rc = encode_file(&p, a->inputs[i], i + 1, a->n_inputs, err);
    if (rc == 0) rc = writer_flush(&p.val, err);
    if (rc == 0) rc = writer_flush(&p.train, err);
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.bin", a->out_dir);
    if (rc == 0) rc = tokenizer_save(&p.tok, path, err);
    if (rc == 0) {
        remove_stale(a->out_dir, "val", p.val.shards);
        remove_stale(a->out_dir, "train", p.train.shards);
        print_summary(&p, a, now_seconds() - t0);
    }
    free(p.val.buf); free(p.train.buf); tokvec_free(&p.ids); tokenizer_free(&p.tok);
    return rc;
}
