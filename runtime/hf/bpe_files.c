/* bpe_files: vocab.json, merges.txt and tokenizer_config.json from our tokenizer (see bpe_files.h). */
#include "runtime/hf/bpe_files.h"
#include "common/files.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GPT2_VOCAB = 50257, GPT2_EOT = 50256 };

int bpe_byte_char(int b) {
    /* printable ASCII and Latin-1 but the soft hyphen stand for themselves; the rest count up from U+0100 */
    int self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    if (self) return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    return 256 + n;
}

/* ---------- a bytes -> id map over the vocabulary (end-of-text left out: it is never a merge) ---------- */

typedef struct {
    const Tokenizer *tok;
    int32_t *slots;
    uint32_t mask;
} Vocab;

static uint64_t hash_bytes(const uint8_t *b, size_t n) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h ^ (h >> 29);
}

static int32_t vocab_id(const Vocab *v, const uint8_t *b, size_t n) {
    for (uint32_t s = (uint32_t)hash_bytes(b, n) & v->mask;; s = (s + 1) & v->mask) {
        int32_t id = v->slots[s];
        if (id < 0) return -1;
        size_t len;
        const uint8_t *t = tokenizer_decode(v->tok, id, &len);
        if (len == n && !memcmp(t, b, n)) return id;
    }
}

static void vocab_make(Vocab *v, const Tokenizer *tok) {
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)tok->vocab_size + 2) cap *= 2;
    v->tok = tok;
    v->mask = cap - 1;
    v->slots = xmalloc(cap * sizeof *v->slots);
    memset(v->slots, 0xff, cap * sizeof *v->slots);
    for (int id = 0; id < tok->vocab_size; id++) {
        size_t n;
        const uint8_t *b = tokenizer_decode(tok, id, &n);
        if (id == tok->eot || vocab_id(v, b, n) >= 0) continue;   /* a repeat: the lower id (rank) wins */
        uint32_t s = (uint32_t)hash_bytes(b, n) & v->mask;
        while (v->slots[s] >= 0) s = (s + 1) & v->mask;
        v->slots[s] = id;
    }
}

/* Byte-level BPE of b[0..n) with the merges of rank below max_rank: the parts' start offsets go to start[0..k)
   (start[k] = n), and k is returned. */
static int bpe_parts(const Vocab *v, const uint8_t *b, int n, int32_t max_rank, int *start) {
    int k = n;
    for (int i = 0; i <= n; i++) start[i] = i;
    for (;;) {
        int best = -1;
        int32_t best_rank = max_rank;
        for (int i = 0; i + 1 < k; i++) {
            int32_t r = vocab_id(v, b + start[i], (size_t)(start[i + 2] - start[i]));
            if (r >= 0 && r < best_rank) { best_rank = r; best = i; }
        }
        if (best < 0) return k;
        memmove(start + best + 1, start + best + 2, (size_t)(k - best - 1) * sizeof *start);
        k--;
    }
}

int bpe_recover_merges(const Tokenizer *tok, int32_t (*pairs)[2], int32_t *merged, char *why, size_t whylen) {
    if (!tok->can_encode) { snprintf(why, whylen, "not every byte is a token"); return -1; }
    Vocab v;
    vocab_make(&v, tok);
    size_t longest = 0;
    for (int id = 0; id < tok->vocab_size; id++) {
        size_t n;
        tokenizer_decode(tok, id, &n);
        if (n > longest) longest = n;
    }
    int *start = xmalloc((longest + 1) * sizeof *start), m = 0, rc = 0;
    for (int id = 0; id < tok->vocab_size && !rc; id++) {
        size_t n;
        const uint8_t *b = tokenizer_decode(tok, id, &n);
        if (id == tok->eot || n < 2) continue;
        if (vocab_id(&v, b, n) != id) {
            snprintf(why, whylen, "token %d repeats the bytes of token %d", id, vocab_id(&v, b, n));
            rc = -1;
        } else if (bpe_parts(&v, b, (int)n, id, start) != 2) {
            snprintf(why, whylen, "token %d is not one merge of two tokens of lower rank", id);
            rc = -1;
        } else {
            pairs[m][0] = vocab_id(&v, b, (size_t)start[1]);
            pairs[m][1] = vocab_id(&v, b + start[1], n - (size_t)start[1]);
            merged[m++] = id;
        }
    }
    free(start);
    free(v.slots);
    return rc ? -1 : m;
}

/* appends the UTF-8 of token id's bytes through the byte-to-unicode map to out (room: 2 bytes per byte + 1) */
static size_t encode_token(const Tokenizer *tok, int id, char *out) {
    size_t n, k = 0;
    const uint8_t *b = tokenizer_decode(tok, id, &n);
    for (size_t i = 0; i < n; i++) {
        int c = bpe_byte_char(b[i]);
        if (c < 0x80) out[k++] = (char)c;
        else { out[k++] = (char)(0xC0 | (c >> 6)); out[k++] = (char)(0x80 | (c & 0x3F)); }
    }
    out[k] = 0;
    return k;
}

static int write_json(const char *path, json_t *o, size_t flags, Err *err) {
    char *text = json_dumps(o, flags | JSON_PRESERVE_ORDER);
    if (!text) return err_set(err, "%s: cannot make the JSON", err_show(path));
    int rc = write_file_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

/* merges.txt: one line per merge, "left right"; longest: the most bytes of a token */
static int write_merges(const Tokenizer *tok, const char *dir, int32_t (*pairs)[2], int m, size_t longest, Err *err) {
    char path[4200], *a = xmalloc(2 * longest + 1), *b = xmalloc(2 * longest + 1);
    size_t cap = 64 + (size_t)m * (4 * longest + 2), len = 0;
    char *text = xmalloc(cap);
    len += (size_t)snprintf(text, cap, "#version: 0.2\n");
    for (int k = 0; k < m; k++) {
        size_t na = encode_token(tok, pairs[k][0], a), nb = encode_token(tok, pairs[k][1], b);
        memcpy(text + len, a, na); len += na;
        text[len++] = ' ';
        memcpy(text + len, b, nb); len += nb;
        text[len++] = '\n';
    }
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    int rc = write_file_atomic(path, text, len, err);
    free(text); free(a); free(b);
    return rc;
}

/* tokenizer_config.json: GPT-2's tokenizer class and special tokens */
static int write_config(const char *dir, int max_len, Err *err) {
    char path[4200];
    json_t *c = json_object();
    json_object_set_new(c, "tokenizer_class", json_string("GPT2Tokenizer"));
    json_object_set_new(c, "model_max_length", json_integer(max_len));
    json_object_set_new(c, "bos_token", json_string("<|endoftext|>"));
    json_object_set_new(c, "eos_token", json_string("<|endoftext|>"));
    json_object_set_new(c, "unk_token", json_string("<|endoftext|>"));
    json_object_set_new(c, "add_prefix_space", json_false());
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    int rc = write_json(path, c, JSON_INDENT(2), err);
    json_decref(c);
    return rc;
}

int bpe_write_files(const Tokenizer *tok, const char *dir, int max_len, char *note, size_t notelen, Err *err) {
    if (tok->vocab_size != GPT2_VOCAB || tok->eot != GPT2_EOT) {
        snprintf(note, notelen, "the tokenizer has %d tokens and end-of-text %d, not GPT-2's %d and %d", tok->vocab_size,
                 tok->eot, GPT2_VOCAB, GPT2_EOT);
        return 1;
    }
    int32_t (*pairs)[2] = xmalloc((size_t)tok->vocab_size * sizeof *pairs);
    int32_t *merged = xmalloc((size_t)tok->vocab_size * sizeof *merged);
    char why[256];
    int m = bpe_recover_merges(tok, pairs, merged, why, sizeof why);
    size_t longest = 0;
    for (int id = 0; id < tok->vocab_size; id++) {
        size_t n;
        tokenizer_decode(tok, id, &n);
        if (n > longest) longest = n;
    }
    char *a = xmalloc(2 * longest + 1);
    json_t *vocab = json_object();
    int rc = 0;
    if (m < 0) {
        snprintf(note, notelen, "the tokenizer is not a byte-level BPE: %s", why);
        rc = 1;
    }
    for (int id = 0; id < tok->vocab_size && !rc; id++) {
        encode_token(tok, id, a);
        json_object_set_new(vocab, a, json_integer(id));
    }
    if (!rc && json_object_size(vocab) != (size_t)tok->vocab_size) {
        snprintf(note, notelen, "two tokens have the same bytes");
        rc = 1;
    }
    char path[4200];
    if (!rc) {
        snprintf(path, sizeof path, "%s/vocab.json", dir);
        rc = write_json(path, vocab, JSON_COMPACT, err);
    }
    if (!rc) rc = write_merges(tok, dir, pairs, m, longest, err);
    if (!rc) rc = write_config(dir, max_len, err);
    json_decref(vocab);
    free(pairs); free(merged); free(a);
    return rc;
}
