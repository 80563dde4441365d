/* tokenizer_encode: text to GPT-2 token ids, as tiktoken's "gpt2" encoding gives them (see tokenizer.h; the
 * vocabulary and its bytes -> id map are runtime/data/tokenizer.c's). Two parts:
 *   1. the pre-tokenizer: GPT-2's pattern
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      matched by hand, alternative by alternative, with the same leftmost-first choice a backtracking
 *      regex engine makes;
 *   2. the merge loop: within one piece, repeatedly join the adjacent pair whose joined bytes have the
 *      lowest rank (leftmost on a tie) until no joined pair is a token. */
#include "runtime/data/tokenizer.h"
#include "runtime/data/tokenizer_internal.h"
#include "runtime/data/unicode_tables.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    int32_t r = tokenizer_rank_of(t, p + start[i], start[i + 2] - start[i]);
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
    for (size_t i = 0; i < nparts; i++) tokvec_push(out, tokenizer_rank_of(t, p + start[i], start[i + 1] - start[i]));
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
    int32_t r = tokenizer_rank_of(t, p + left, end[mid] - left);
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
    for (uint32_t i = 0; i < n; i = end[i]) tokvec_push(out, tokenizer_rank_of(t, p + i, end[i] - i));
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
        int32_t whole = tokenizer_rank_of(t, s + i, k);             /* most pieces are a token already */
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
