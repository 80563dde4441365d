/* tokenizer: GPT-2 byte-level BPE (see tokenizer.h). Three parts:
 *   1. the vocabulary: token bytes by id, loaded from a tiktoken ranks file or an llm.c tokenizer file;
 *   2. the pre-tokenizer: GPT-2's pattern
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      matched by hand, alternative by alternative, with the same leftmost-first choice a backtracking
 *      regex engine makes;
 *   3. the merge loop: within one piece, repeatedly join the adjacent pair whose joined bytes have the
 *      lowest rank (leftmost on a tie) until no joined pair is a token. */
#include "runtime/data/tokenizer.h"
#include "common/files.h"
#include <stdio.h>
#include "runtime/data/unicode_tables.h"
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

/* The id whose bytes are b[0..n), or -1. */
static int32_t rank_of(const Tokenizer *t, const uint8_t *b, size_t n) {
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
        if (id == t->eot || rank_of(t, b, n) >= 0) continue;
        uint32_t s = (uint32_t)hash_bytes(b, n) & t->slot_mask;
        while (t->slots[s] >= 0) s = (s + 1) & t->slot_mask;
        t->slots[s] = id;
    }
    t->can_encode = 1;
    for (int c = 0; c < 256; c++) {
        uint8_t b = (uint8_t)c;
        if (rank_of(t, &b, 1) < 0) { t->can_encode = 0; break; }
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
    if (nd == 0 || nd >= sizeof num) return err_set(err, "%s:%d: expected a rank after the space", path, lineno);
    memcpy(num, sp + 1, nd); num[nd] = 0;
    char *end;
    errno = 0;
    long rank = strtol(num, &end, 10);
    if (*end || errno || rank < 0) return err_set(err, "%s:%d: rank '%s' is not a number >= 0", path, lineno, num);
    if (rank >= nlines)
        return err_set(err, "%s:%d: rank %ld, but the file has %d ranks; expected ranks 0..%d, each once",
                       path, lineno, rank, nlines, nlines - 1);
    if (where[rank].len) return err_set(err, "%s:%d: rank %ld appears twice", path, lineno, rank);
    long m = base64_decode(line, b64, blob + *used);
    if (m <= 0) return err_set(err, "%s:%d: '%.*s' is not base64 token bytes", path, lineno, (int)(b64 > 60 ? 60 : b64), line);
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

int tokenizer_load_ranks(Tokenizer *t, const char *path, Err *err) {
    memset(t, 0, sizeof *t);
    size_t len;
    char *text = read_file(path, &len, err);
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
        return err_set(err, "%s: not an llm.c tokenizer file (magic %d, expected %d)", path, h[0], TOKENIZER_MAGIC);
    if (h[1] != 1 && h[1] != 2)
        return err_set(err, "%s: tokenizer file version %d; expected 1 or 2", path, h[1]);
    if (h[2] <= 0 || (size_t)h[2] > len)
        return err_set(err, "%s: vocab size %d; expected a count between 1 and the file's %zu bytes", path, h[2], len);
    int eot = h[1] == 1 ? TOKENIZER_EOT_GPT2 : h[3];
    if (eot < 0 || eot >= h[2])
        return err_set(err, "%s: end-of-text id %d is not below the vocab size %d%s", path, eot, h[2],
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
    int rc = fstat(fileno(f), &st) != 0 ? err_set(err, "%s: cannot stat: %s", path, strerror(errno))
           : st.st_size < HEADER_BYTES || fread(h, sizeof h, 1, f) != 1
               ? err_set(err, "%s: %lld bytes; expected an llm.c tokenizer file (a %d-byte header, then the tokens)", path, (long long)st.st_size, HEADER_BYTES)
               : check_header(path, h, (size_t)st.st_size, err);
    fclose(f);
    if (!rc && (unsigned long long)st.st_size > HEADER_BYTES + 256ull * (unsigned)h[2])
        rc = err_set(err, "%s: %lld bytes, more than %d tokens of at most 255 bytes can take", path, (long long)st.st_size, h[2]);
    return rc;
}

int tokenizer_load(Tokenizer *t, const char *path, Err *err) {
    memset(t, 0, sizeof *t);
    if (check_file(path, err)) return -1;
    size_t len;
    uint8_t *data = (uint8_t *)read_file(path, &len, err);
    if (!data) return -1;
    int32_t h[HEADER_INTS];
    if (len < HEADER_BYTES) { free(data); return err_set(err, "%s: %zu bytes; expected an llm.c tokenizer file (a %d-byte header, then the tokens)", path, len, HEADER_BYTES); }
    memcpy(h, data, sizeof h);
    if (check_header(path, h, len, err)) { free(data); return -1; }
    int V = h[2];
    t->offset = xmalloc((size_t)(V + 1) * sizeof *t->offset);
    t->bytes = xmalloc(len);
    size_t at = HEADER_BYTES;
    uint32_t used = 0;
    for (int id = 0; id < V; id++) {
        if (at >= len) { tokenizer_free(t); free(data); return err_set(err, "%s: truncated: header says %d tokens, file ends at token %d", path, V, id); }
        size_t n = data[at++];
        if (n == 0) { tokenizer_free(t); free(data); return err_set(err, "%s: token %d has length 0; expected 1..255 bytes", path, id); }
        if (at + n > len) { tokenizer_free(t); free(data); return err_set(err, "%s: truncated: token %d needs %zu bytes, file holds %zu", path, id, n, len - at); }
        t->offset[id] = used;
        memcpy(t->bytes + used, data + at, n);
        used += (uint32_t)n; at += n;
    }
    t->offset[V] = used;
    free(data);
    if (at != len) { tokenizer_free(t); return err_set(err, "%s: %zu extra bytes after the last of %d tokens", path, len - at, V); }
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
        if (n == 0 || n > 255) return err_set(err, "%s: token %d has %zu bytes; the llm.c format holds 1..255", path, id, n);
    }
    int32_t h[HEADER_INTS] = {TOKENIZER_MAGIC, 2, t->vocab_size, t->eot};
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    int bad = fwrite(h, sizeof h, 1, af.f) != 1;
    for (int id = 0; id < t->vocab_size && !bad; id++) {
        size_t n = token_len(t, id);
        bad = fputc((int)n, af.f) == EOF || fwrite(t->bytes + t->offset[id], 1, n, af.f) != n;
    }
    if (bad) { atomic_abort(&af); return err_set(err, "%s: write failed: %s", path, strerror(errno)); }
    return atomic_commit(&af, err);
}

/* ---------- UTF-8 and character classes ---------- */

/* Length of the UTF-8 sequence at s (1..4) and its code point; an invalid or cut-off sequence counts
   as one byte with code point UINT32_MAX, which is in no class (so "other"). */
static size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    size_t need;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { need = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { need = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = UINT32_MAX; return 1; }
    if (need > n) { *cp = UINT32_MAX; return 1; }
    for (size_t k = 1; k < need; k++) {
        if ((s[k] & 0xC0) != 0x80) { *cp = UINT32_MAX; return 1; }
        v = v << 6 | (s[k] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = UINT32_MAX; return 1; }
    *cp = v;
    return need;
}

static int class_of(uint32_t cp) {
    if (cp < 0x80) {                    /* the common case, without the table */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return UCLS_LETTER;
        if (cp >= '0' && cp <= '9') return UCLS_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return UCLS_SPACE;
        return UCLS_OTHER;
    }
    size_t lo = 0, hi = sizeof unicode_ranges / sizeof unicode_ranges[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp > unicode_ranges[mid].hi) lo = mid + 1;
        else if (cp < unicode_ranges[mid].lo) hi = mid;
        else return unicode_ranges[mid].cls;
    }
    return UCLS_OTHER;
}

/* Class of the character at s; *clen gets its byte length. */
static int class_at(const uint8_t *s, size_t n, size_t *clen) {
    uint32_t cp;
    *clen = utf8_decode(s, n, &cp);
    return class_of(cp);
}

/* Bytes from i covered by characters of class cls; *last_len gets the byte length of the last one. */
static size_t run_length(const uint8_t *s, size_t n, size_t i, int cls, size_t *last_len) {
    size_t j = i, clen = 0;
    *last_len = 0;
    while (j < n && class_at(s + j, n - j, &clen) == cls) { *last_len = clen; j += clen; }
    return j - i;
}

static size_t contraction_length(const uint8_t *s, size_t n) {
    if (n >= 2 && (s[1] == 's' || s[1] == 'd' || s[1] == 'm' || s[1] == 't')) return 2;
    if (n >= 3 && ((s[1] == 'l' && s[2] == 'l') || (s[1] == 'v' && s[2] == 'e') || (s[1] == 'r' && s[2] == 'e'))) return 3;
    return 0;
}

size_t gpt2_piece_length(const uint8_t *s, size_t n) {
    size_t clen, last;
    if (s[0] == '\'') {                                           /* 's|'t|'re|'ve|'m|'ll|'d */
        size_t k = contraction_length(s, n);
        if (k) return k;
    }
    if (s[0] == ' ' && n > 1) {                                   /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" with the space */
        int c1 = class_at(s + 1, n - 1, &clen);
        if (c1 != UCLS_SPACE) return 1 + run_length(s, n, 1, c1, &last);
    }
    int c0 = class_at(s, n, &clen);
    if (c0 != UCLS_SPACE) return run_length(s, n, 0, c0, &last); /* the same three, without the space */
    size_t j = run_length(s, n, 0, UCLS_SPACE, &last);
    /* "\s+(?!\S)": at the end of the text the whole run; before a non-space, the run less its last
       character (which then leads the next piece, e.g. as the space of " word"), if that leaves any.
       Otherwise "\s+": the whole run. */
    if (j < n && j > last) return j - last;
    return j;
}

/* ---------- byte pair merges within one piece ---------- */

#define NO_RANK INT32_MAX
#define LONG_PIECE 64          /* pieces longer than this (bytes) take the O(n log n) merge */

/* Rank of the bytes from part i to the end of part i+1, or NO_RANK. start has nparts+1 entries. */
static int32_t pair_rank(const Tokenizer *t, const uint8_t *p, const size_t *start, size_t nparts, size_t i) {
    if (i + 1 >= nparts) return NO_RANK;
    int32_t r = rank_of(t, p + start[i], start[i + 2] - start[i]);
    return r < 0 ? NO_RANK : r;
}

/* The piece p[0..n) starts as single bytes; merge the lowest-ranked adjacent pair (leftmost on a tie)
   until none is a token, then emit each part's id. This version rescans all pairs after each merge:
   quadratic, but the fastest for the short pieces of ordinary text (a word, a number, a few spaces). */
static void merge_short(const Tokenizer *t, const uint8_t *p, size_t n, TokenVec *out) {
    size_t start[LONG_PIECE + 1];
    int32_t rank[LONG_PIECE];
    size_t nparts = n;
    for (size_t i = 0; i <= n; i++) start[i] = i;
    for (size_t i = 0; i < nparts; i++) rank[i] = pair_rank(t, p, start, nparts, i);
    for (;;) {
        size_t best = 0;
        for (size_t i = 1; i < nparts; i++) if (rank[i] < rank[best]) best = i;
        if (nparts < 2 || rank[best] == NO_RANK) break;
        /* parts best and best+1 become one: drop boundary best+1 */
        memmove(start + best + 1, start + best + 2, (nparts - best - 1) * sizeof *start);
        memmove(rank + best + 1, rank + best + 2, (nparts - best - 2) * sizeof *rank);
        nparts--;
        rank[best] = pair_rank(t, p, start, nparts, best);
        if (best > 0) rank[best - 1] = pair_rank(t, p, start, nparts, best - 1);
    }
    for (size_t i = 0; i < nparts; i++) tokvec_push(out, rank_of(t, p + start[i], start[i + 1] - start[i]));
}

/* The same merges for long pieces (a page without spaces, a long run of one character), in
   O(n log n): parts form a linked list, candidate pairs wait in a min-heap ordered by (rank, start).
   A merge changes the pairs on both sides of the new part; their old heap entries are left in place
   and recognised as stale when popped (the pair they name no longer spans those bytes). */
typedef struct { int32_t rank; uint32_t left, right_end; } PairEntry;

static int pair_less(PairEntry a, PairEntry b) {
    return a.rank < b.rank || (a.rank == b.rank && a.left < b.left);
}

typedef struct { PairEntry *e; size_t n; } PairHeap;

static void heap_push(PairHeap *h, PairEntry x) {
    size_t i = h->n++;
    while (i > 0 && pair_less(x, h->e[(i - 1) / 2])) { h->e[i] = h->e[(i - 1) / 2]; i = (i - 1) / 2; }
    h->e[i] = x;
}

static PairEntry heap_pop(PairHeap *h) {
    PairEntry top = h->e[0], x = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && pair_less(h->e[c + 1], h->e[c])) c++;
        if (!pair_less(h->e[c], x)) break;
        h->e[i] = h->e[c]; i = c;
    }
    h->e[i] = x;
    return top;
}

/* Parts are named by their first byte; end[i] is where part i ends, 0 once it was merged away. */
static void push_pair(const Tokenizer *t, const uint8_t *p, const uint32_t *end, size_t n, uint32_t left, PairHeap *h) {
    uint32_t mid = end[left];
    if (mid >= n) return;
    int32_t r = rank_of(t, p + left, end[mid] - left);
    if (r >= 0) heap_push(h, (PairEntry){r, left, end[mid]});
}

static void merge_long(const Tokenizer *t, const uint8_t *p, size_t n, TokenVec *out) {
    uint32_t *end = xmalloc(n * sizeof *end), *prev = xmalloc(n * sizeof *prev);
    PairHeap h = {xmalloc(3 * n * sizeof *h.e), 0};      /* n pairs to start, at most 2 more per merge */
    for (uint32_t i = 0; i < n; i++) { end[i] = i + 1; prev[i] = i ? i - 1 : UINT32_MAX; }
    for (uint32_t i = 0; i + 1 < n; i++) push_pair(t, p, end, n, i, &h);
    while (h.n) {
        PairEntry e = heap_pop(&h);
        uint32_t mid = end[e.left];
        if (mid == 0 || mid >= n || end[mid] != e.right_end) continue;   /* stale */
        end[e.left] = e.right_end;                                       /* left absorbs mid */
        end[mid] = 0;
        if (e.right_end < n) prev[e.right_end] = e.left;
        push_pair(t, p, end, n, e.left, &h);
        if (prev[e.left] != UINT32_MAX) push_pair(t, p, end, n, prev[e.left], &h);
    }
    for (uint32_t i = 0; i < n; i = end[i]) tokvec_push(out, rank_of(t, p + i, end[i] - i));
    free(end); free(prev); free(h.e);
}

/* Encodes whole pieces from the start of text until at least min_bytes are consumed (or the text ends),
   taking only pieces that end at least `keep` bytes before len; returns the bytes consumed. With keep 0
   it always takes at least one piece. */
static size_t encode_pieces(const Tokenizer *t, const uint8_t *s, size_t len, size_t min_bytes, size_t keep, TokenVec *out) {
    size_t i = 0;
    while (i < len && (i < min_bytes || (i == 0 && keep == 0))) {
        size_t k = gpt2_piece_length(s + i, len - i);
        if (i + k + keep > len) break;
        int32_t whole = rank_of(t, s + i, k);             /* most pieces are a token already */
        if (whole >= 0) tokvec_push(out, whole);
        else if (k <= LONG_PIECE) merge_short(t, s + i, k, out);
        else merge_long(t, s + i, k, out);
        i += k;
    }
    return i;
}

size_t tokenizer_encode_some(const Tokenizer *t, const void *text, size_t len, size_t min_bytes, TokenVec *out) {
    return encode_pieces(t, text, len, min_bytes, 0, out);
}

/* gpt2_piece_length reads a piece and at most the two characters after it (the character that ends a
   run, and for "\s+(?!\S)" the one after the run): up to 8 bytes past its end. So a piece that ends 8 or
   more bytes before len is the same piece whatever text follows. */
size_t tokenizer_encode_stable(const Tokenizer *t, const void *text, size_t len, size_t min_bytes, TokenVec *out) {
    return encode_pieces(t, text, len, min_bytes, TOKENIZER_LOOKAHEAD, out);
}

int tokenizer_encode(const Tokenizer *t, const void *text, size_t len, TokenVec *out, Err *err) {
    if (!t->can_encode) return err_set(err, "this tokenizer cannot encode: some single bytes are not tokens (byte-level BPE needs all 256)");
    tokenizer_encode_some(t, text, len, len, out);
    return 0;
}

/* ---------- printing token bytes as they stream ---------- */

static void put_replacement(FILE *out) { fputs("\xEF\xBF\xBD", out); }

/* Expected sequence length for a lead byte, or 0 where it cannot start one. */
static int utf8_need(uint8_t c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Whether c may follow lead as its second byte (this rules out overlong forms, surrogates, > U+10FFFF). */
static int utf8_second_ok(uint8_t lead, uint8_t c) {
    if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
    if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
    if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
    if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
    return (c & 0xC0) == 0x80;
}

/* Control characters other than tab and newlines could drive the terminal (escape sequences). */
static int is_control(uint8_t c) {
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
}

static void utf8_stream_byte(Utf8Stream *s, uint8_t c, FILE *out) {
    if (s->npend > 0) {
        int ok = s->npend == 1 ? utf8_second_ok(s->pend[0], c) : (c & 0xC0) == 0x80;
        if (!ok) { put_replacement(out); s->npend = 0; }        /* cut off; c starts afresh below */
    }
    if (s->npend == 0) {
        int need = utf8_need(c);
        if (need == 0 || is_control(c)) { put_replacement(out); return; }
        if (need == 1) { fputc(c, out); return; }
    }
    s->pend[s->npend++] = c;
    if (s->npend == 2 && s->pend[0] == 0xC2 && c <= 0x9F) { put_replacement(out); s->npend = 0; return; }   /* C1 control */
    if (s->npend == utf8_need(s->pend[0])) { fwrite(s->pend, 1, (size_t)s->npend, out); s->npend = 0; }
}

void utf8_stream_put(Utf8Stream *s, const void *bytes, size_t n, FILE *out) {
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n; i++) utf8_stream_byte(s, b[i], out);
}

void utf8_stream_flush(Utf8Stream *s, FILE *out) {
    if (s->npend) put_replacement(out);
    s->npend = 0;
    fflush(out);
}
