/* tokenizer: GPT-2 byte-level BPE (see tokenizer.h), in three files:
 *   1. the vocabulary (this file): token bytes by id and the map from bytes back to id, loaded from a
 *      tiktoken ranks file or an llm.c tokenizer file, and the llm.c file written;
 *   2. encoding (runtime/data/tokenizer_encode.c): GPT-2's pre-tokenizer and the merge loop;
 *   3. printing token bytes as they stream (runtime/data/utf8_stream.c). */
#include "runtime/data/tokenizer.h"
#include "runtime/data/tokenizer_internal.h"
#include "common/files.h"
#include <stdio.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the llm.c file formats are little-endian; this reader assumes a little-endian host"
#endif

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)

/* ---------- token lists ---------- */

void tokvec_push(TokenVec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 1024;
        int32_t *d = realloc(v->data, cap * sizeof *d);
        if (!d) { fprintf(stderr, "out of host memory growing a token list to %zu ids\n", cap); abort(); }
        v->data = d; v->cap = cap;
    }
    v->data[v->n++] = id;
}

void tokvec_free(TokenVec *v) {
    free(v->data);
    v->data = NULL; v->n = v->cap = 0;
}

/* ---------- the bytes -> id map ---------- */

static uint64_t hash_bytes(const uint8_t *b, size_t n) {
    uint64_t h = 1469598103934665603ull;                 /* FNV-1a: simple, and good enough for 50k keys */
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h ^ (h >> 29);
}

static size_t token_len(const Tokenizer *t, int id) { return t->offset[id + 1] - t->offset[id]; }

int32_t tokenizer_rank_of(const Tokenizer *t, const uint8_t *b, size_t n) {
    for (uint32_t s = (uint32_t)hash_bytes(b, n) & t->slot_mask;; s = (s + 1) & t->slot_mask) {
        int32_t id = t->slots[s];
        if (id < 0) return -1;
        if (token_len(t, id) == n && memcmp(t->bytes + t->offset[id], b, n) == 0) return id;
    }
}

/* Builds the encoder map over every token but end-of-text (which tiktoken treats as special, never as
   a merge result). Where two ids share bytes the lower id wins, as the lower rank would. */
static void build_map(Tokenizer *t) {
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)t->vocab_size) cap *= 2;
    t->slots = xmalloc(cap * sizeof *t->slots);
    memset(t->slots, 0xff, cap * sizeof *t->slots);
    t->slot_mask = cap - 1;
    for (int id = 0; id < t->vocab_size; id++) {
        const uint8_t *b = t->bytes + t->offset[id];
        size_t n = token_len(t, id);
        if (id == t->eot || tokenizer_rank_of(t, b, n) >= 0) continue;
        uint32_t s = (uint32_t)hash_bytes(b, n) & t->slot_mask;
        while (t->slots[s] >= 0) s = (s + 1) & t->slot_mask;
        t->slots[s] = id;
    }
    t->can_encode = 1;
    for (int c = 0; c < 256; c++) {
        uint8_t b = (uint8_t)c;
        if (tokenizer_rank_of(t, &b, 1) < 0) { t->can_encode = 0; break; }
    }
}

void tokenizer_free(Tokenizer *t) {
    free(t->bytes); free(t->offset); free(t->slots);
    memset(t, 0, sizeof *t);
}

const uint8_t *tokenizer_decode(const Tokenizer *t, int id, size_t *len) {
    if (id < 0 || id >= t->vocab_size) { *len = 0; return NULL; }
    *len = token_len(t, id);
    return t->bytes + t->offset[id];
}

/* ---------- the tiktoken ranks file ---------- */

static int base64_value(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with '=' padding. Writes at most 3*n/4 bytes to out; returns their count or -1. */
static long base64_decode(const char *s, size_t n, uint8_t *out) {
    if (n == 0 || n % 4 != 0) return -1;
    long m = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) { v[k] = 0; pad++; continue; }
            if (pad) return -1;                                 /* data after padding */
            if ((v[k] = base64_value((unsigned char)s[i + k])) < 0) return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[m++] = (uint8_t)(w >> 16);
        if (pad < 2) out[m++] = (uint8_t)(w >> 8);
        if (pad < 1) out[m++] = (uint8_t)w;
    }
    return m;
}

/* One line "<base64> <rank>": its bytes go to blob+*used, its place to where[rank]. */
typedef struct { uint32_t start, len; } Span;

static int parse_rank_line(const char *path, int lineno, const char *line, size_t n, int nlines,
                           uint8_t *blob, uint32_t *used, Span *where, Err *err) {
    const char *sp = memchr(line, ' ', n);
    if (!sp) return err_set(err, "%s:%d: expected \"<base64 token bytes> <rank>\"", path, lineno);
    size_t b64 = (size_t)(sp - line);
    char num[16];
    size_t nd = n - b64 - 1;
    if (nd == 0 || nd >= sizeof num) return err_set(err, "%s:%d: expected a rank after the space", err_show(path), lineno);
    memcpy(num, sp + 1, nd); num[nd] = 0;
    char *end;
    errno = 0;
    long rank = strtol(num, &end, 10);
    if (*end || errno || rank < 0) return err_set(err, "%s:%d: rank '%s' is not a number >= 0", err_show(path), lineno, num);
    if (rank >= nlines)
        return err_set(err, "%s:%d: rank %ld, but the file has %d ranks; expected ranks 0..%d, each once", err_show(path), lineno, rank, nlines, nlines - 1);
    if (where[rank].len) return err_set(err, "%s:%d: rank %ld appears twice", err_show(path), lineno, rank);
    long m = base64_decode(line, b64, blob + *used);
    if (m <= 0) return err_set(err, "%s:%d: '%.*s' is not base64 token bytes", err_show(path), lineno, (int)(b64 > 60 ? 60 : b64), line);
    where[rank] = (Span){*used, (uint32_t)m};
    *used += (uint32_t)m;
    return 0;
}

/* Lines that are not blank: the ranks (blank lines are skipped, as tiktoken's loader does). */
static int count_lines(const char *text, size_t len) {
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] != '\n' && text[i] != '\r' && (i + 1 == len || text[i + 1] == '\n' || text[i + 1] == '\r');
    return n;
}

/* Lays the tokens out by id: ranks first, then end-of-text. */
static void fill_vocab(Tokenizer *t, const uint8_t *blob, const Span *where, int nranks) {
    static const char eot_text[] = "<|endoftext|>";
    size_t total = sizeof eot_text - 1;
    for (int r = 0; r < nranks; r++) total += where[r].len;
    t->vocab_size = nranks + 1;
    t->eot = nranks;
    t->bytes = xmalloc(total);
    t->offset = xmalloc((size_t)(nranks + 2) * sizeof *t->offset);
    uint32_t at = 0;
    for (int r = 0; r < nranks; r++) {
        t->offset[r] = at;
        memcpy(t->bytes + at, blob + where[r].start, where[r].len);
        at += where[r].len;
    }
    t->offset[nranks] = at;
    memcpy(t->bytes + at, eot_text, sizeof eot_text - 1);
    t->offset[nranks + 1] = at + (uint32_t)(sizeof eot_text - 1);
}

/* the most a tokenizer file or a ranks file may hold, checked before reading (docs/data.md, "Limits of the files
   gpt2gen reads"); GPT-2's are under 2 MiB */
enum { TOKENIZER_FILE_MAX = 16 << 20 };

int tokenizer_load_ranks(Tokenizer *t, const char *path, Err *err) {
    memset(t, 0, sizeof *t);
    size_t len;
    char *text = read_file_max(path, TOKENIZER_FILE_MAX, &len, err);
    if (!text) return -1;
    int nlines = count_lines(text, len);
    if (nlines < 256) { free(text); return err_set(err, "%s: %d lines; expected a tiktoken ranks file (\"<base64> <rank>\" per line, at least the 256 single bytes)", path, nlines); }
    uint8_t *blob = xmalloc(len + 1);
    Span *where = xcalloc((size_t)nlines, sizeof *where);
    uint32_t used = 0;
    int rc = 0, lineno = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        lineno++;
        size_t m = n && text[i + n - 1] == '\r' ? n - 1 : n;   /* tolerate CRLF */
        if (m > 0) rc = parse_rank_line(path, lineno, text + i, m, nlines, blob, &used, where, err);
        i += n + 1;
    }
    if (rc == 0) fill_vocab(t, blob, where, nlines);
    free(text); free(blob); free(where);
    if (rc) return -1;
    build_map(t);
    return 0;
}

/* ---------- the llm.c tokenizer file ---------- */

static int check_header(const char *path, const int32_t *h, size_t len, Err *err) {
    if (h[0] != TOKENIZER_MAGIC)
        return err_set(err, "%s: not an llm.c tokenizer file (magic %d, expected %d)", err_show(path), h[0], TOKENIZER_MAGIC);
    if (h[1] != 1 && h[1] != 2)
        return err_set(err, "%s: tokenizer file version %d; expected 1 or 2", err_show(path), h[1]);
    if (h[2] <= 0 || (size_t)h[2] > len)
        return err_set(err, "%s: vocab size %d; expected a count between 1 and the file's %zu bytes", err_show(path), h[2], len);
    int eot = h[1] == 1 ? TOKENIZER_EOT_GPT2 : h[3];
    if (eot < 0 || eot >= h[2])
        return err_set(err, "%s: end-of-text id %d is not below the vocab size %d%s", err_show(path), eot, h[2],
                       h[1] == 1 ? " (version 1 files use 50256)" : "");
    return 0;
}

/* Checks the header and the file's size before the file is read whole, so that another kind of file (a shard,
   a model) is refused without reading it into memory: at most 255 bytes a token follow the header. */
static int check_file(const char *path, Err *err) {
    FILE *f = fopen_regular(path, "an llm.c tokenizer file", err);
    if (!f) return -1;
    struct stat st;
    int32_t h[HEADER_INTS];
    int rc = fstat(fileno(f), &st) != 0 ? err_set(err, "%s: cannot stat: %s", err_show(path), strerror(errno))
           : st.st_size < HEADER_BYTES || fread(h, sizeof h, 1, f) != 1
               ? err_set(err, "%s: %lld bytes; expected an llm.c tokenizer file (a %d-byte header, then the tokens)", err_show(path), (long long)st.st_size, HEADER_BYTES)
               : check_header(path, h, (size_t)st.st_size, err);
    fclose(f);
    if (!rc && (unsigned long long)st.st_size > HEADER_BYTES + 256ull * (unsigned)h[2])
        rc = err_set(err, "%s: %lld bytes, more than %d tokens of at most 255 bytes can take", err_show(path), (long long)st.st_size, h[2]);
    return rc;
}

int tokenizer_load(Tokenizer *t, const char *path, Err *err) {
    memset(t, 0, sizeof *t);
    if (check_file(path, err)) return -1;
    size_t len;
    uint8_t *data = (uint8_t *)read_file_max(path, TOKENIZER_FILE_MAX, &len, err);
    if (!data) return -1;
    int32_t h[HEADER_INTS];
    if (len < HEADER_BYTES) { free(data); return err_set(err, "%s: %zu bytes; expected an llm.c tokenizer file (a %d-byte header, then the tokens)", err_show(path), len, HEADER_BYTES); }
    memcpy(h, data, sizeof h);
    if (check_header(path, h, len, err)) { free(data); return -1; }
    int V = h[2];
    t->offset = xmalloc((size_t)(V + 1) * sizeof *t->offset);
    t->bytes = xmalloc(len);
    size_t at = HEADER_BYTES;
    uint32_t used = 0;
    for (int id = 0; id < V; id++) {
        if (at >= len) { tokenizer_free(t); free(data); return err_set(err, "%s: truncated: header says %d tokens, file ends at token %d", err_show(path), V, id); }
        size_t n = data[at++];
        if (n == 0) { tokenizer_free(t); free(data); return err_set(err, "%s: token %d has length 0; expected 1..255 bytes", err_show(path), id); }
        if (at + n > len) { tokenizer_free(t); free(data); return err_set(err, "%s: truncated: token %d needs %zu bytes, file holds %zu", err_show(path), id, n, len - at); }
        t->offset[id] = used;
        memcpy(t->bytes + used, data + at, n);
        used += (uint32_t)n; at += n;
    }
    t->offset[V] = used;
    free(data);
    if (at != len) { tokenizer_free(t); return err_set(err, "%s: %zu extra bytes after the last of %d tokens", err_show(path), len - at, V); }
    t->vocab_size = V;
    t->eot = h[1] == 1 ? TOKENIZER_EOT_GPT2 : h[3];
    build_map(t);
    return 0;
}

int tokenizer_load_any(Tokenizer *t, const char *path, Err *err) {
    FILE *f = fopen_regular(path, "a tokenizer file", err);
    if (!f) { memset(t, 0, sizeof *t); return -1; }
    int32_t magic = 0;
    size_t got = fread(&magic, 1, sizeof magic, f);
    fclose(f);
    if (got == sizeof magic && magic == TOKENIZER_MAGIC) return tokenizer_load(t, path, err);
    return tokenizer_load_ranks(t, path, err);
}

int tokenizer_save(const Tokenizer *t, const char *path, Err *err) {
    for (int id = 0; id < t->vocab_size; id++) {
        size_t n = token_len(t, id);
        if (n == 0 || n > 255) return err_set(err, "%s: token %d has %zu bytes; the llm.c format holds 1..255", err_show(path), id, n);
    }
    int32_t h[HEADER_INTS] = {TOKENIZER_MAGIC, 2, t->vocab_size, t->eot};
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    int bad = fwrite(h, sizeof h, 1, af.f) != 1;
    for (int id = 0; id < t->vocab_size && !bad; id++) {
        size_t n = token_len(t, id);
        bad = fputc((int)n, af.f) == EOF || fwrite(t->bytes + t->offset[id], 1, n, af.f) != n;
    }
    if (bad) { atomic_abort(&af); return err_set(err, "%s: write failed: %s", err_show(path), strerror(errno)); }
    return atomic_commit(&af, err);
}
