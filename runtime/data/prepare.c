/* prepare: text files -> token shards + tokenizer file (see prepare.h).
 *
 * One pass: each input is read once, in blocks, so standard input, a pipe or a FIFO works as a file does.
 * Documents are found as the text streams by. A document's text is encoded as soon as the text after it
 * cannot change its tokens (tokenizer_encode_stable), and the rest when it ends. Each document goes to
 * validation or training when it starts (is_val_document), so the split needs no count of all documents.
 * Memory holds one read block, one shard per split, and the current document's text not yet encoded:
 * a few bytes, but all of a document's leading whitespace (until a non-space byte shows it is not blank)
 * and all of one pre-tokenizer piece that has not ended yet (a run of letters, digits or punctuation).
 * The data set is written into a temporary folder and swapped in whole (dataset_dir.h): on any failure
 * the output folder stays as it was. */
#include "runtime/data/prepare.h"
#include "runtime/data/dataset_dir.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer.h"
#include "common/err.h"
#include "common/clock.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---------- documents, streamed ---------- */

#define BLOCK_BYTES (1u << 16)     /* inputs are read in blocks of this much */
#define STEP_BYTES  (4u << 20)     /* and encoded in steps of at most this much text */
#define NO_LINE     SIZE_MAX

/* The document being read: its text not yet encoded. */
typedef struct {
    char        *text;
    size_t       len, cap;
    size_t       line;       /* where its last line starts while that line may still be a separator, else NO_LINE */
    size_t       scanned;    /* text[0..scanned) is whitespace, while the document has not started */
    ShardWriter *w;          /* its split, chosen when it starts (at its first non-space byte); NULL before */
} Doc;

typedef struct {
    Tokenizer          tok;
    ShardWriter        val, train;
    unsigned long long val_millionths;   /* the validation fraction */
    size_t             docs, val_docs;   /* documents started, over all inputs */
    Doc                doc;
    TokenVec           ids;
    const char        *name;             /* the input being read, for messages */
    size_t             bytes, tokens;    /* read from it, written for it */
    size_t             all_bytes;
    double             t0, last_report;
} Prepare;

static const char *input_name(const char *path) { return strcmp(path, "-") ? path : "standard input"; }

/* A line, without its '\n', that separates documents: "%" (a trailing "\r" allowed). */
static int is_separator(const char *line, size_t n) {
    return (n == 1 && line[0] == '%') || (n == 2 && line[0] == '%' && line[1] == '\r');
}

/* The last line may still turn out to be a separator: so far it is "", "%" or "%\r". */
static int line_open(const Doc *d) {
    if (d->line == NO_LINE) return 0;
    size_t n = d->len - d->line;
    return n == 0 || is_separator(d->text + d->line, n);
}

/* Document d (from 0, over all inputs) goes to validation when it brings the number of validation
   documents up to the next whole part of the fraction F: floor((d+1)F) > floor(dF). So F = 0.1 is every
   tenth document (the 10th, 20th, ...), 0.25 every fourth, and the first document always trains. */
static int is_val_document(size_t d, unsigned long long millionths) {
    return (d + 1) * millionths / 1000000 > d * millionths / 1000000;
}

static void doc_append(Doc *d, const char *s, size_t n) {
    if (d->len + n > d->cap) {
        while (d->cap < d->len + n) d->cap = d->cap ? d->cap * 2 : 4096;
        d->text = realloc(d->text, d->cap);
        if (!d->text) { fprintf(stderr, "out of host memory for a document of %zu bytes\n", d->cap); abort(); }
    }
    memcpy(d->text + d->len, s, n);
    d->len += n;
}

/* Drops the first n bytes of the text, once encoded. */
static void doc_drop(Doc *d, size_t n) {
    memmove(d->text, d->text + n, d->len - n);
    d->len -= n;
    d->line = d->line == NO_LINE || d->line < n ? NO_LINE : d->line - n;
}

/* Starts the document when text[0..upto) holds a non-space byte: picks its split, writes end-of-text. */
static int doc_start(Prepare *p, size_t upto, Err *err) {
    Doc *d = &p->doc;
    if (d->w) return 0;
    while (d->scanned < upto && isspace((unsigned char)d->text[d->scanned])) d->scanned++;
    if (d->scanned == upto) return 0;
    int val = is_val_document(p->docs++, p->val_millionths);
    p->val_docs += (size_t)val;
    d->w = val ? &p->val : &p->train;
    int32_t eot = p->tok.eot;
    p->tokens++;
    return writer_add(d->w, &eot, 1, err);
}

/* Encodes text[0..upto) in steps: all of it when the document ends there (final), else what the text
   after upto cannot change. Nothing while the document is blank. Drops what it encoded. */
static int doc_encode(Prepare *p, size_t upto, int final, Err *err) {
    Doc *d = &p->doc;
    if (doc_start(p, upto, err)) return -1;
    if (!d->w) return 0;
    size_t at = 0, k;
    do {
        p->ids.n = 0;
        k = final ? tokenizer_encode_some(&p->tok, d->text + at, upto - at, STEP_BYTES, &p->ids)
                  : tokenizer_encode_stable(&p->tok, d->text + at, upto - at, STEP_BYTES, &p->ids);
        at += k;
        p->tokens += p->ids.n;
        if (writer_add(d->w, p->ids.data, p->ids.n, err)) return -1;
    } while (k > 0 && at < upto);
    doc_drop(d, at);
    return 0;
}

/* The document ends with its text: the rest is encoded (or dropped when blank), and a new one begins. */
static int doc_end(Prepare *p, Err *err) {
    Doc *d = &p->doc;
    int rc = doc_encode(p, d->len, 1, err);
    *d = (Doc){.text = d->text, .cap = d->cap};
    return rc;
}

/* One line's bytes, s[0..n), ending in '\n' when complete. A complete separator line ends the document
   and belongs to none. */
static int add_line(Prepare *p, const char *s, size_t n, int complete, Err *err) {
    Doc *d = &p->doc;
    doc_append(d, s, n);
    if (!complete) return 0;
    if (d->line != NO_LINE && is_separator(d->text + d->line, d->len - d->line - 1)) {
        d->len = d->line;
        return doc_end(p, err);
    }
    d->line = d->len;
    return 0;
}

static int feed_block(Prepare *p, const char *s, size_t n, Err *err) {
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t k = nl ? (size_t)(nl - s) + 1 : n;
        if (add_line(p, s, k, nl != NULL, err)) return -1;
        s += k;
        n -= k;
    }
    const Doc *d = &p->doc;
    return doc_encode(p, line_open(d) ? d->line : d->len, 0, err);
}

/* The input ended, and so does its last document (less a last line "%" without its '\n'). */
static int end_input(Prepare *p, Err *err) {
    Doc *d = &p->doc;
    if (d->line != NO_LINE && is_separator(d->text + d->line, d->len - d->line)) d->len = d->line;
    return doc_end(p, err);
}

/* ---------- the command ---------- */

/* A line every few seconds while one input takes long. */
static void report_progress(Prepare *p) {
    double now = now_seconds();
    if (now - p->last_report < 5) return;
    p->last_report = now;
    printf("  %s: %.0f MB, %zu tokens, %.1f MB/s\n", p->name, p->bytes / 1e6, p->tokens, p->bytes / (now - p->t0) / 1e6);
    fflush(stdout);
}

/* Reads one input to its end, once ("-" is standard input), feeding its text through. */
static int read_input(Prepare *p, const char *path, Err *err) {
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return err_set(err, "%s: cannot open: %s", p->name, strerror(errno));
    char *block = xmalloc(BLOCK_BYTES);
    int rc = 0, read_errno = 0;
    size_t got;
    do {
        got = fread(block, 1, BLOCK_BYTES, f);
        if (got < BLOCK_BYTES && ferror(f)) read_errno = errno;
        p->bytes += got;
        if (got) rc = feed_block(p, block, got, err);
        report_progress(p);
    } while (rc == 0 && got == BLOCK_BYTES);
    if (rc == 0 && read_errno) rc = err_set(err, "%s: read error: %s", p->name, strerror(read_errno));
    if (rc == 0) rc = end_input(p, err);
    if (!is_stdin) fclose(f);
    free(block);
    return rc;
}

static int encode_input(Prepare *p, const char *path, int index, int n_inputs, Err *err) {
    size_t docs = p->docs;
    p->name = input_name(path);
    p->bytes = p->tokens = 0;
    p->t0 = p->last_report = now_seconds();
    if (read_input(p, path, err)) return -1;
    double dt = now_seconds() - p->t0;
    printf("[%d/%d] %s: %zu documents, %zu tokens, %.1f MB/s\n", index, n_inputs, p->name, p->docs - docs, p->tokens,
           dt > 0 ? p->bytes / dt / 1e6 : 0.0);
    fflush(stdout);
    p->all_bytes += p->bytes;
    return 0;
}

/* Every named input can be opened, checked before any work (a missing file fails at once). */
static int check_inputs(const PrepareArgs *a, Err *err) {
    for (int i = 0; i < a->n_inputs; i++)
        if (strcmp(a->inputs[i], "-") && access(a->inputs[i], R_OK) != 0)
            return err_set(err, "%s: cannot open: %s", a->inputs[i], strerror(errno));
    return 0;
}

static int no_documents(const PrepareArgs *a, Err *err) {
    if (a->n_inputs == 1) return err_set(err, "%s: no documents: the input is empty or only whitespace", input_name(a->inputs[0]));
    return err_set(err, "no documents: the %d inputs are empty or only whitespace", a->n_inputs);
}

static int load_tokenizer(Tokenizer *t, const char *path, Err *err) {
    if (tokenizer_load_any(t, path, err)) return -1;
    if (t->vocab_size > 65536) { tokenizer_free(t); return err_set(err, "%s: vocab size %d; token shards hold uint16 ids, so at most 65536", path, t->vocab_size); }
    if (!t->can_encode) { tokenizer_free(t); return err_set(err, "%s: some single bytes are not tokens, so it cannot encode arbitrary text", path); }
    return 0;
}

/* The last shards and the tokenizer file, into the new data set's folder. */
static int write_rest(Prepare *p, const char *dir, Err *err) {
    char path[4600];
    snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
    if (writer_flush(&p->val, err) || writer_flush(&p->train, err)) return -1;
    return tokenizer_save(&p->tok, path, err);
}

/* A message about a file in the temporary folder names it as it would be in out_dir. */
static void name_by_out_dir(Err *err, const char *tmp, const char *out_dir) {
    size_t n = strlen(tmp);
    if (strncmp(err->msg, tmp, n)) return;
    char rest[sizeof err->msg];
    memcpy(rest, err->msg + n, strlen(err->msg + n) + 1);
    err_set(err, "%s%s", out_dir, rest);
}

static void print_summary(const Prepare *p, const PrepareArgs *a, double seconds) {
    char dur[32];
    format_duration(seconds, dur, sizeof dur);
    printf("prepared %d inputs, %zu documents, %zu tokens in %s (%.1f MB/s)\n", a->n_inputs, p->docs,
           p->val.tokens + p->train.tokens, dur, seconds > 0 ? p->all_bytes / seconds / 1e6 : 0.0);
    printf("  %s/train_*.bin: %zu documents, %zu tokens in %d shard%s\n", a->out_dir, p->docs - p->val_docs,
           p->train.tokens, p->train.shards, p->train.shards == 1 ? "" : "s");
    printf("  %s/val_*.bin:   %zu documents, %zu tokens in %d shard%s\n", a->out_dir, p->val_docs,
           p->val.tokens, p->val.shards, p->val.shards == 1 ? "" : "s");
    printf("  %s/tokenizer.bin: %d tokens, end-of-text %d\n", a->out_dir, p->tok.vocab_size, p->tok.eot);
    if (p->val_docs == 0 && a->val_fraction > 0)
        printf("note: no validation shard: %zu document%s too few for the fraction %g\n", p->docs,
               p->docs == 1 ? " is" : "s are", a->val_fraction);
}

int prepare_run(const PrepareArgs *a, Err *err) {
    double t0 = now_seconds();
    Prepare p = {.val_millionths = (unsigned long long)llround(a->val_fraction * 1e6)};
    DatasetDir out;
    if (check_inputs(a, err) || load_tokenizer(&p.tok, a->ranks, err)) return -1;
    if (dataset_dir_begin(&out, a->out_dir, err)) { tokenizer_free(&p.tok); return -1; }
    p.val = (ShardWriter){.dir = out.tmp, .split = "val", .cap = a->shard_tokens};
    p.train = (ShardWriter){.dir = out.tmp, .split = "train", .cap = a->shard_tokens};
    int rc = 0;
    for (int i = 0; i < a->n_inputs && rc == 0; i++) rc = encode_input(&p, a->inputs[i], i + 1, a->n_inputs, err);
    if (rc == 0 && p.docs == 0) rc = no_documents(a, err);
    if (rc == 0) rc = write_rest(&p, out.tmp, err);
    if (rc) { name_by_out_dir(err, out.tmp, a->out_dir); dataset_dir_abort(&out); }
    else rc = dataset_dir_commit(&out, err);
    if (rc == 0) print_summary(&p, a, now_seconds() - t0);
    free(p.val.buf); free(p.train.buf); free(p.doc.text); tokvec_free(&p.ids); tokenizer_free(&p.tok);
    return rc;
}
