/* evalset: reading llm.c's multiple-choice evaluation files (see evalset.h). */
#include "runtime/eval/evalset.h"
#include "common/files.h"
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the llm.c evaluation format is little-endian; this reader assumes a little-endian host"
#endif

enum { HEADER_BYTES = 256 * 4, FIXED_FIELDS = 6 };   /* start, bytes, index, label, K, context count */
#define EVALSET_MAX_BYTES ((size_t)1 << 30)

/* A cursor over one example's uint16 fields: get() fails past the example's end. */
typedef struct {
    const uint16_t *w;
    size_t at, end;
} Cursor;

static int get(Cursor *c, int *v) {
    if (c->at >= c->end) return -1;
    *v = c->w[c->at++];
    return 0;
}

static int read_example(EvalSet *s, const uint16_t *w, size_t words, size_t *pos, int k, int longest_bytes,
                        size_t *ntok, Err *err) {
    const char *p = s->path;
    size_t at = *pos;
    if (words - at < 2)
        return err_set(err, "%s: truncated: the header says %d examples, the file ends inside example %d", err_show(p), s->n, k);
    if (w[at] != EVALSET_START)
        return err_set(err, "%s: example %d: the start field is %u, expected %d (a bad example length before it, or "
                       "not an evaluation file)", err_show(p), k, w[at], EVALSET_START);
    int bytes = w[at + 1];
    if (bytes % 2 || bytes < 2 * (FIXED_FIELDS + 1))
        return err_set(err, "%s: example %d: its bytes field is %d: expected an even count of at least %d", err_show(p), k, bytes,
                       2 * (FIXED_FIELDS + 1));
    if (bytes > longest_bytes)
        return err_set(err, "%s: example %d: %d bytes, more than the header's longest example (%d)", err_show(p), k, bytes, longest_bytes);
    if ((size_t)bytes / 2 > words - at)
        return err_set(err, "%s: truncated: example %d is %d bytes, the file holds %zu more", err_show(p), k, bytes, (words - at) * 2);
    Cursor c = {w, at + 2, at + (size_t)bytes / 2};
    EvalExample *e = &s->ex[k];
    int K, n;
    if (get(&c, &e->index) || get(&c, &e->label) || get(&c, &K) || get(&c, &n))
        return err_set(err, "%s: example %d: its fields end before the context's count", err_show(p), k);
    if (K < 1 || K > EVALSET_MAX_COMPLETIONS)
        return err_set(err, "%s: example %d: %d completions: expected 1 to %d", err_show(p), k, K, EVALSET_MAX_COMPLETIONS);
    if (e->label >= K)
        return err_set(err, "%s: example %d: its label is %d, but it has %d completions (labels 0..%d)", err_show(p), k, e->label, K, K - 1);
    e->n_completions = K;
    if (n < 1) return err_set(err, "%s: example %d: its context has no tokens", err_show(p), k);
    e->ctx_len = n;
    e->ctx = *ntok;
    for (int j = -1; j < K; j++) {   /* j = -1: the context, whose count was read */
        if (j >= 0) {
            if (get(&c, &n)) return err_set(err, "%s: example %d: it ends before completion %d's count", err_show(p), k, j);
            if (n < 1) return err_set(err, "%s: example %d: completion %d has no tokens", err_show(p), k, j);
            e->comp_len[j] = n;
            if (j == 0) e->comp = *ntok;
            int row = e->ctx_len + n;
            if (row > s->longest_row) s->longest_row = row;
        }
        if ((size_t)n > c.end - c.at)
            return err_set(err, "%s: example %d: %s holds %d tokens, more than the %zu left of its %d bytes", err_show(p), k,
                           j < 0 ? "the context" : "a completion", n, c.end - c.at, bytes);
        for (int i = 0; i < n; i++) s->tokens[(*ntok)++] = w[c.at++];
    }
    if (c.at != c.end)
        return err_set(err, "%s: example %d: its bytes field says %d, its fields end after %zu", err_show(p), k, bytes,
                       (c.at - at) * 2);
    s->rows += K;
    *pos = c.end;
    return 0;
}

int evalset_load(EvalSet *s, const char *path, Err *err) {
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", err_show(path));
    size_t len;
    char *buf = read_file_max(path, EVALSET_MAX_BYTES, &len, err);
    if (!buf) return -1;
    const char *p = s->path;
    int rc = -1;
    int32_t h[4];
    if (len < HEADER_BYTES) {
        err_set(err, "%s: %zu bytes; expected an evaluation file (a %d-byte header, then the examples)", err_show(p), len, HEADER_BYTES);
        goto done;
    }
    memcpy(h, buf, sizeof h);
    if (h[0] != EVALSET_MAGIC) {
        err_set(err, "%s: not an evaluation file (magic %d, expected %d%s)", err_show(p), h[0], EVALSET_MAGIC,
                h[0] == 20240520 ? ": this is a token shard" : "");
        goto done;
    }
    if (h[1] != EVALSET_VERSION) { err_set(err, "%s: evaluation file version %d; expected %d", err_show(p), h[1], EVALSET_VERSION); goto done; }
    if (h[2] < 1) { err_set(err, "%s: the header's number of examples is %d: expected at least 1", err_show(p), h[2]); goto done; }
    if (h[3] < 2 * (FIXED_FIELDS + 1) || h[3] > 65535) {
        err_set(err, "%s: the header's longest example is %d bytes: expected %d to 65535", err_show(p), h[3], 2 * (FIXED_FIELDS + 1));
        goto done;
    }
    if ((len - HEADER_BYTES) % 2) { err_set(err, "%s: %zu bytes: the examples must be whole uint16 words", err_show(p), len); goto done; }
    size_t words = (len - HEADER_BYTES) / 2;
    if ((size_t)h[2] > words / (FIXED_FIELDS + 2)) {
        err_set(err, "%s: truncated: the header says %d examples; %zu bytes hold at most %zu", err_show(p), h[2], len - HEADER_BYTES,
                words / (FIXED_FIELDS + 2));
        goto done;
    }
    s->n = h[2];
    s->ex = xcalloc((size_t)s->n, sizeof *s->ex);
    s->tokens = xmalloc(words * sizeof *s->tokens);
    const uint16_t *w = (const uint16_t *)(buf + HEADER_BYTES);
    size_t pos = 0, ntok = 0;
    for (int k = 0; k < s->n; k++)
        if (read_example(s, w, words, &pos, k, h[3], &ntok, err)) goto done;
    if (pos != words) {
        err_set(err, "%s: %zu bytes after the %d examples the header counts", err_show(p), (words - pos) * 2, s->n);
        goto done;
    }
    rc = 0;
done:
    free(buf);
    if (rc) evalset_free(s);
    return rc;
}

int evalset_check_model(const EvalSet *s, int vocab_size, int max_seq_len, const char *model, Err *err) {
    for (int k = 0; k < s->n; k++) {
        const EvalExample *e = &s->ex[k];
        size_t end = e->comp;
        for (int j = 0; j < e->n_completions; j++) {
            end += (size_t)e->comp_len[j];
            if (e->ctx_len + e->comp_len[j] > max_seq_len)
                return err_set(err, "%s: example %d: its context and completion %d are %d tokens, more than the model's "
                               "context of %d positions (%s)", err_show(s->path), k, j, e->ctx_len + e->comp_len[j], max_seq_len, model);
        }
        for (size_t i = e->ctx; i < end; i++)
            if (s->tokens[i] >= vocab_size)
                return err_set(err, "%s: example %d: token %u is past the model's vocabulary (vocab_size %d, %s)", err_show(s->path),
                               k, s->tokens[i], vocab_size, model);
    }
    return 0;
}

void evalset_free(EvalSet *s) {
    free(s->ex);
    free(s->tokens);
    s->ex = NULL;
    s->tokens = NULL;
}
