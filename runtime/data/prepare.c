/* prepare: corpora -> token shards + tokenizer file (see prepare.h).
 *
 * One thread reads: each input once, in blocks (corpus.h undoes gzip and zstd), cut into documents
 * (documents.h). It decides each document's split when the document starts (at its first non-space
 * byte), so the split needs no count of all documents, and packs the documents' text into chunks of about
 * PREPARE_CHUNK_BYTES. A document longer than that is cut where GPT-2's pre-tokenizer starts a piece
 * whatever came before (prepare_cut_is_safe), so its parts encode to the ids of the whole. The chunks go
 * round a ring of slots: worker threads encode them, in any order, and the reading thread writes them to
 * the shards strictly in the order they were filled. So the shards are the same whatever the number of
 * threads, and memory is the ring: a few chunks per thread, and one shard per split.
 * The data set is written into a temporary folder and swapped in whole (dataset_dir.h): on any failure
 * the output folder stays as it was. The chunks and the threads that encode them are prepare_pool.c's. */
#include "runtime/data/prepare.h"
#include "runtime/data/prepare_pool.h"
#include "runtime/data/corpus.h"
#include "runtime/data/dataset_dir.h"
#include "runtime/data/documents.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer.h"
#include "common/err.h"
#include "common/clock.h"
#include <ctype.h>
#include <math.h>
#include <pthread.h>
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

static int writer_flush(ShardWriter *w, Err *err) {
    if (w->n == 0) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s_%06d.bin", w->dir, w->split, w->shards);
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
    w->tokens += n;
    while (n > 0) {
        if (w->n == w->cap && writer_flush(w, err)) return -1;
        if (w->n == w->alloc) writer_grow(w);
        size_t k = w->alloc - w->n < n ? w->alloc - w->n : n;
        uint16_t *out = w->buf + w->n;
        for (size_t i = 0; i < k; i++) out[i] = (uint16_t)ids[i];
        w->n += k;
        ids += k;
        n -= k;
    }
    return 0;
}

/* ---------- the run ---------- */

typedef struct { size_t files, docs, tokens; } InputCount;

typedef struct {
    const PrepareArgs *a;
    Tokenizer          tok;
    ShardWriter        val, train;
    unsigned long long val_millionths;   /* the validation fraction */
    size_t             docs, val_docs;   /* documents started, over all inputs */
    PreparePool        pool;
    PrepareChunk      *cur;              /* the chunk being filled */
    /* the document being read */
    size_t             doc_off;          /* where its text in cur starts */
    size_t             doc_scan;         /* cur->text[doc_off..doc_scan) is whitespace, while it has not started */
    size_t             cut_from;         /* positions below this were looked at for a cut, in vain */
    int                started, doc_val, continued;
    char              *carry;            /* a cut document's rest, on its way to the next chunk */
    size_t             carry_cap;
    int                input;            /* the input being read */
    InputCount        *counts;           /* per input */
    /* progress */
    long long          raw_done, raw_total;   /* bytes of the files read so far; all their bytes (-1: unknown) */
    const CorpusReader *reading;
    const char        *reading_name;     /* its name for messages */
    double             t0, last_report;
    int                tty, reported;
} Prepare;

static int printable_ascii(unsigned char c) { return c > ' ' && c < 0x7f; }

/* Why these: the pieces before the cut must end there whatever follows, and the text before it, encoded
   alone, must end in the same pieces. A space before a printable character is where a " word"-like
   piece starts, and the whitespace before it (if any) is a piece that ends there with the text cut or
   not. A "\n" before a printable character ends a piece too, but when whitespace comes before the "\n"
   the run would be one piece at the end of the cut text and two in the whole ("\s+(?!\S)"), so the "\n"
   must follow a printable character. */
int prepare_cut_is_safe(const char *text, size_t len, size_t at) {
    if (at == 0 || at + 1 >= len) return 0;
    const unsigned char *t = (const unsigned char *)text;
    if (t[at - 1] == '\n' && printable_ascii(t[at]) && (at == 1 || printable_ascii(t[at - 2]))) return 1;
    return t[at] == ' ' && printable_ascii(t[at + 1]);
}

/* Writes chunk seq, the oldest not yet written, once it is encoded (waiting for it when wait is set).
   1 when it was not done (and wait was not set), 0 when written, -1 + err. */
static int write_oldest(Prepare *p, int wait, Err *err) {
    PreparePool *pl = &p->pool;
    PrepareChunk *c = &pl->slots[pl->written % pl->nslots];
    pthread_mutex_lock(&pl->mu);
    while (wait && c->state != PREPARE_SLOT_DONE) pthread_cond_wait(&pl->done, &pl->mu);
    int done = c->state == PREPARE_SLOT_DONE;
    pthread_mutex_unlock(&pl->mu);
    if (!done) return 1;
    if (c->failed) return err_set(err, "%s", c->err.msg);
    size_t at = 0;
    for (int i = 0; i < c->nseg; i++) {
        PrepareSeg *s = &c->segs[i];
        if (writer_add(s->val ? &p->val : &p->train, c->ids.data + at, s->tok_end - at, err)) return -1;
        p->counts[s->input].tokens += s->tok_end - at;
        at = s->tok_end;
    }
    c->state = PREPARE_SLOT_FREE;
    pl->written++;
    return 0;
}

/* The next chunk to fill, writing the oldest one first when every slot is taken. */
static int next_chunk(Prepare *p, Err *err) {
    PreparePool *pl = &p->pool;
    while (pl->filled - pl->written >= pl->nslots)
        if (write_oldest(p, 1, err)) return -1;
    PrepareChunk *c = &pl->slots[pl->filled % pl->nslots];
    c->len = 0;
    c->nseg = 0;
    c->failed = 0;
    p->cur = c;
    return 0;
}

/* Hands the current chunk over (to a worker, or encodes it here), writes what is done, and starts the
   next chunk. */
static int submit_chunk(Prepare *p, Err *err) {
    PreparePool *pl = &p->pool;
    PrepareChunk *c = p->cur;
    if (c->nseg == 0) { c->len = 0; return 0; }
    if (pl->nthreads == 0) {
        prepare_chunk_encode(&p->tok, c);
        c->state = PREPARE_SLOT_DONE;
        pl->filled++;
    } else {
        pthread_mutex_lock(&pl->mu);
        c->state = PREPARE_SLOT_FILLED;
        pl->filled++;
        pthread_cond_signal(&pl->work);
        pthread_mutex_unlock(&pl->mu);
    }
    while (pl->written < pl->filled) {            /* what the workers have done, without waiting */
        int rc = write_oldest(p, 0, err);
        if (rc < 0) return -1;
        if (rc > 0) break;
    }
    return next_chunk(p, err);
}

static void doc_reset(Prepare *p) {
    p->doc_off = p->doc_scan = p->cur->len;
    p->cut_from = 0;
    p->started = p->continued = 0;
}

/* A long document: when its text in the chunk holds a safe cut, the part before it goes with this chunk
   and the rest starts the next. */
static int try_cut(Prepare *p, Err *err) {
    PrepareChunk *c = p->cur;
    size_t lo = p->doc_off + 1 > p->cut_from ? p->doc_off + 1 : p->cut_from, at = c->len - 1;
    while (at > lo && !prepare_cut_is_safe(c->text, c->len, at - 1)) at--;
    if (at <= lo) { p->cut_from = c->len > 1 ? c->len - 1 : 0; return 0; }
    at--;                                                 /* the cut: text[at] starts the rest */
    size_t rest = c->len - at;
    if (rest > p->carry_cap) {
        p->carry_cap = rest;
        p->carry = realloc(p->carry, rest);
        if (!p->carry) { fprintf(stderr, "out of host memory for %zu bytes of text\n", rest); abort(); }
    }
    memcpy(p->carry, c->text + at, rest);
    prepare_chunk_add_seg(c, (PrepareSeg){.off = p->doc_off, .len = at - p->doc_off, .input = p->input, .val = (unsigned char)p->doc_val,
                           .starts = (unsigned char)!p->continued});
    c->len = at;
    if (submit_chunk(p, err)) return -1;
    prepare_chunk_append(p->cur, p->carry, rest);
    p->doc_off = 0;
    p->doc_scan = p->cur->len;
    p->cut_from = 0;
    p->started = p->continued = 1;
    return 0;
}

/* Document d (from 0, over all inputs) goes to validation when it brings the number of validation
   documents up to the next whole part of the fraction F: floor((d+1)F) > floor(dF). So F = 0.1 is every
   tenth document (the 10th, 20th, ...), 0.25 every fourth, and the first document always trains. */
static int is_val_document(size_t d, unsigned long long millionths) {
    return (d + 1) * millionths / 1000000 > d * millionths / 1000000;
}

/* DocSink: more text of the current document. */
static int doc_text(void *ctx, const char *s, size_t n, Err *err) {
    Prepare *p = ctx;
    PrepareChunk *c = p->cur;
    prepare_chunk_append(c, s, n);
    if (!p->started) {
        while (p->doc_scan < c->len && isspace((unsigned char)c->text[p->doc_scan])) p->doc_scan++;
        if (p->doc_scan == c->len) return 0;
        p->started = 1;
        p->doc_val = is_val_document(p->docs++, p->val_millionths);
        p->val_docs += (size_t)p->doc_val;
        p->counts[p->input].docs++;
    }
    if (c->len - p->doc_off < PREPARE_CHUNK_BYTES) return 0;
    if (try_cut(p, err)) return -1;
    if (p->cur->len - p->doc_off <= PREPARE_UNCUT_MAX) return 0;   /* held whole until a cut: bounded */
    return err_set(err, "%s: a document of more than %u MiB with no place to cut it (no space or line break before "
                   "text: binary data, or zeros?); prepare holds such text whole, up to that limit",
                   err_show(p->reading_name), PREPARE_UNCUT_MAX >> 20);
}

/* DocSink: the document ended. Blank ones leave nothing. */
static int doc_end(void *ctx, Err *err) {
    Prepare *p = ctx;
    PrepareChunk *c = p->cur;
    if (p->started)
        prepare_chunk_add_seg(c, (PrepareSeg){.off = p->doc_off, .len = c->len - p->doc_off, .input = p->input, .val = (unsigned char)p->doc_val,
                               .starts = (unsigned char)!p->continued});
    else c->len = p->doc_off;
    if (c->len >= PREPARE_CHUNK_BYTES && submit_chunk(p, err)) return -1;
    doc_reset(p);
    return 0;
}

/* ---------- progress ---------- */

/* "12.3 MB", "4.56 GB" */
static void format_bytes(double b, char *out, size_t n) {
    if (b >= 1e9) snprintf(out, n, "%.2f GB", b / 1e9);
    else snprintf(out, n, "%.1f MB", b / 1e6);
}

/* "950", "12.3K", "4.56M", "7.89B" */
static void format_count(double v, char *out, size_t n) {
    if (v >= 1e9) snprintf(out, n, "%.2fB", v / 1e9);
    else if (v >= 1e6) snprintf(out, n, "%.2fM", v / 1e6);
    else if (v >= 1e3) snprintf(out, n, "%.1fK", v / 1e3);
    else snprintf(out, n, "%.0f", v);
}

/* On a terminal, one line on stderr rewritten about 4 times a second; otherwise a line every 10 s. */
static void report_progress(Prepare *p, int force) {
    double now = now_seconds();
    if (!force && now - p->last_report < (p->tty ? 0.25 : 10)) return;
    p->last_report = now;
    double dt = now - p->t0, raw = (double)(p->raw_done + (p->reading ? corpus_raw_bytes(p->reading) : 0));
    double tokens = (double)(p->val.tokens + p->train.tokens);
    char line[256], bytes[32], total[32], toks[32], rate[32], eta[32];
    format_bytes(raw, bytes, sizeof bytes);
    format_count(tokens, toks, sizeof toks);
    format_count(dt > 0 ? tokens / dt : 0, rate, sizeof rate);
    int k = 0;
    if (p->raw_total > 0) {
        format_bytes((double)p->raw_total, total, sizeof total);
        double frac = raw / (double)p->raw_total;
        k = snprintf(line, sizeof line, "prepare: %s of %s (%.0f%%), %s tokens, %s tokens/s", bytes, total, 100 * frac, toks, rate);
        if (frac > 0.001 && frac < 1 && dt > 0.2) {
            format_duration(dt * (1 - frac) / frac, eta, sizeof eta);
            snprintf(line + k, sizeof line - (size_t)k, ", ETA %s", eta);
        }
    } else snprintf(line, sizeof line, "prepare: %s read, %s tokens, %s tokens/s", bytes, toks, rate);
    if (p->tty) fprintf(stderr, "\r%s\033[K", line);
    else fprintf(stderr, "%s\n", line);
    fflush(stderr);
    p->reported = 1;
}

/* ---------- the command ---------- */

#define BLOCK_BYTES (1u << 16)     /* inputs are read in blocks of this much */

static int read_file(Prepare *p, const CorpusFile *f, char *block, Err *err) {
    const PrepareArgs *a = p->a;
    CorpusReader *r = corpus_open(f->path, err);
    if (!r) return -1;
    const char *name = strcmp(f->path, "-") ? f->path : "standard input";
    CorpusKind kind = a->format >= 0 ? (CorpusKind)a->format : corpus_kind(f->path);
    DocSplitter d;
    docsplit_init(&d, &a->docs, kind, name, (DocSink){doc_text, doc_end, p});
    p->input = f->input;
    p->counts[f->input].files++;
    p->reading = r;
    p->reading_name = name;
    long got;
    int rc = 0;
    while ((got = corpus_read(r, block, BLOCK_BYTES, err)) > 0) {
        if ((rc = docsplit_feed(&d, block, (size_t)got, err))) break;
        report_progress(p, 0);
    }
    if (got < 0) rc = -1;
    if (rc == 0) rc = docsplit_finish(&d, err);
    docsplit_free(&d);
    p->raw_done += corpus_raw_bytes(r);
    p->reading = NULL;
    corpus_close(r);
    return rc;
}

static int read_all(Prepare *p, const CorpusList *list, Err *err) {
    char *block = xmalloc(BLOCK_BYTES);
    int rc = next_chunk(p, err);
    if (rc == 0) doc_reset(p);
    for (int i = 0; i < list->n && rc == 0; i++) rc = read_file(p, &list->files[i], block, err);
    if (rc == 0) rc = submit_chunk(p, err);
    while (rc == 0 && p->pool.written < p->pool.filled) rc = write_oldest(p, 1, err);
    free(block);
    return rc;
}

static int no_documents(const PrepareArgs *a, Err *err) {
    if (a->n_inputs == 1) {
        const char *in = strcmp(a->inputs[0], "-") ? a->inputs[0] : "standard input";
        return err_set(err, "%s: no documents: the input is empty or only whitespace", in);
    }
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

static void print_summary(const Prepare *p, double seconds) {
    const PrepareArgs *a = p->a;
    for (int i = 0; i < a->n_inputs; i++) {
        const InputCount *c = &p->counts[i];
        char files[48] = "";
        if (c->files != 1) snprintf(files, sizeof files, "%zu file%s, ", c->files, c->files == 1 ? "" : "s");
        printf("[%d/%d] %s: %s%zu documents, %zu tokens\n", i + 1, a->n_inputs,
               strcmp(a->inputs[i], "-") ? a->inputs[i] : "standard input", files, c->docs, c->tokens);
    }
    char dur[32];
    format_duration(seconds, dur, sizeof dur);
    int threads = p->pool.nthreads ? p->pool.nthreads : 1;
    printf("prepared %d inputs, %zu documents, %zu tokens in %s (%.1f MB/s, %d thread%s)\n", a->n_inputs, p->docs,
           p->val.tokens + p->train.tokens, dur, seconds > 0 ? (double)p->raw_done / seconds / 1e6 : 0.0,
           threads, threads == 1 ? "" : "s");
    printf("  %s/train_*.bin: %zu documents, %zu tokens in %d shard%s\n", a->out_dir, p->docs - p->val_docs,
           p->train.tokens, p->train.shards, p->train.shards == 1 ? "" : "s");
    printf("  %s/val_*.bin:   %zu documents, %zu tokens in %d shard%s\n", a->out_dir, p->val_docs,
           p->val.tokens, p->val.shards, p->val.shards == 1 ? "" : "s");
    printf("  %s/tokenizer.bin: %d tokens, end-of-text %d\n", a->out_dir, p->tok.vocab_size, p->tok.eot);
    if (p->val_docs == 0 && a->val_fraction > 0)
        printf("note: no validation shard: %zu document%s too few for the fraction %g (--split-docs blank or lines "
               "cuts text into more)\n", p->docs, p->docs == 1 ? " is" : "s are", a->val_fraction);
}

int prepare_run(const PrepareArgs *a, Err *err) {
    double t0 = now_seconds();
    Prepare p = {.a = a, .val_millionths = (unsigned long long)llround(a->val_fraction * 1e6), .t0 = t0,
                 .last_report = t0, .tty = isatty(2)};
    CorpusList list;
    DatasetDir out;
    if (corpus_list(a->inputs, a->n_inputs, a->out_dir, &list, err)) return -1;
    if (load_tokenizer(&p.tok, a->ranks, err)) { corpus_list_free(&list); return -1; }
    if (dataset_dir_begin(&out, a->out_dir, err)) { tokenizer_free(&p.tok); corpus_list_free(&list); return -1; }
    if (list.skipped)
        printf("note: left out %d file%s in the folders that prepare does not read (archives; compressions other than "
               "gzip and zstd), e.g. %s\n", list.skipped, list.skipped == 1 ? "" : "s", list.first_skipped);
    fflush(stdout);
    p.raw_total = list.total;
    p.counts = xcalloc((size_t)a->n_inputs, sizeof *p.counts);
    p.val = (ShardWriter){.dir = out.tmp, .split = "val", .cap = a->shard_tokens};
    p.train = (ShardWriter){.dir = out.tmp, .split = "train", .cap = a->shard_tokens};
    int rc = prepare_pool_start(&p.pool, &p.tok, a->threads, err);
    if (rc == 0) rc = read_all(&p, &list, err);
    prepare_pool_stop(&p.pool);
    if (p.reported) {
        if (p.tty) fputs("\r\033[K", stderr);
        else if (rc == 0) report_progress(&p, 1);
    }
    if (rc == 0 && p.docs == 0) rc = no_documents(a, err);
    if (rc == 0) rc = write_rest(&p, out.tmp, err);
    if (rc) {   /* a file of the temporary folder is named as it would be in out_dir */
        err_reprefix(err, out.tmp, a->out_dir);
        dataset_dir_abort(&out);
    }
    else rc = dataset_dir_commit(&out, err);
    if (rc == 0) print_summary(&p, now_seconds() - t0);
    free(p.val.buf); free(p.train.buf); free(p.carry); free(p.counts);
    tokenizer_free(&p.tok);
    corpus_list_free(&list);
    return rc;
}
