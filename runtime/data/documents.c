/* documents: an input cut into documents as it streams by (see documents.h). */
#include "runtime/data/documents.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int docs_mode_of(const char *name) {
    static const char *names[] = {"auto", "separator", "blank", "lines", "none"};
    for (int i = 0; i < 5; i++) if (!strcmp(name, names[i])) return i;
    return -1;
}

void docsplit_init(DocSplitter *d, const DocsOptions *opt, CorpusKind kind, const char *name, DocSink sink) {
    *d = (DocSplitter){.opt = *opt, .kind = kind, .name = name, .sink = sink};
    if (!d->opt.separator) d->opt.separator = "%";
    if (!d->opt.field) d->opt.field = "text";
    d->mode = opt->mode;
}

void docsplit_free(DocSplitter *d) {
    free(d->line);
    free(d->peek);
    d->line = d->peek = NULL;
}

static void grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return;
    while (*cap < need) *cap = *cap ? *cap * 2 : 4096;
    *buf = realloc(*buf, *cap);
    if (!*buf) { fprintf(stderr, "out of host memory for a line of %zu bytes\n", *cap); abort(); }
}

static void line_append(DocSplitter *d, const char *s, size_t n) {
    grow(&d->line, &d->cap, d->len + n);
    memcpy(d->line + d->len, s, n);
    d->len += n;
}

/* ---------- text ---------- */

static int blank_byte(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static int all_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) if (!blank_byte(s[i])) return 0;
    return 1;
}

/* A complete line (without its "\n") that is the separator, a trailing "\r" allowed. */
static int is_separator_line(const char *sep, const char *s, size_t n) {
    size_t k = strlen(sep);
    return (n == k || (n == k + 1 && s[k] == '\r')) && !memcmp(s, sep, k);
}

/* Whether the complete line s[0..n) (no "\n") ends a document in mode. */
static int separates(const DocSplitter *d, DocsMode mode, const char *s, size_t n) {
    if (mode == DOCS_BLANK) return all_blank(s, n);
    if (mode == DOCS_SEPARATOR) return is_separator_line(d->opt.separator, s, n);
    return 0;
}

/* Whether a line that starts with s[0..n) may still turn out to end a document. */
static int may_separate(const DocSplitter *d, const char *s, size_t n) {
    if (d->mode == DOCS_BLANK) return all_blank(s, n);
    if (d->mode != DOCS_SEPARATOR) return 0;
    const char *sep = d->opt.separator;
    size_t k = strlen(sep);
    if (n <= k) return !memcmp(s, sep, n);
    return n == k + 1 && s[k] == '\r' && !memcmp(s, sep, k);
}

static int out_text(DocSplitter *d, const char *s, size_t n, Err *err) {
    return n ? d->sink.text(d->sink.ctx, s, n, err) : 0;
}

/* One line's bytes s[0..n), ending in "\n" when complete, in a decided mode. */
static int text_line(DocSplitter *d, const char *s, size_t n, int complete, Err *err) {
    if (d->mode == DOCS_LINES) {
        if (out_text(d, s, n, err)) return -1;
        return complete ? d->sink.end(d->sink.ctx, err) : 0;
    }
    if (d->in_text) {                                   /* the rest of a line known to be text */
        d->in_text = !complete;
        return out_text(d, s, n, err);
    }
    size_t body = complete ? n - 1 : n;
    if (d->len == 0) {                                  /* the line starts here: most often plain text */
        if (!may_separate(d, s, body)) { d->in_text = !complete; return out_text(d, s, n, err); }
        if (!complete) { line_append(d, s, n); return 0; }
        return separates(d, d->mode, s, body) ? d->sink.end(d->sink.ctx, err) : out_text(d, s, n, err);
    }
    line_append(d, s, n);                               /* the line began in an earlier block */
    size_t len = d->len;
    if (!complete) {
        if (may_separate(d, d->line, len)) return 0;
        d->in_text = 1;                                 /* not a separator after all: text to its end */
        d->len = 0;
        return out_text(d, d->line, len, err);
    }
    d->len = 0;
    if (separates(d, d->mode, d->line, len - 1)) return d->sink.end(d->sink.ctx, err);
    return out_text(d, d->line, len, err);
}

static int text_feed(DocSplitter *d, const char *s, size_t n, Err *err) {
    if (d->mode == DOCS_NONE) return out_text(d, s, n, err);
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t k = nl ? (size_t)(nl - s) + 1 : n;
        if (text_line(d, s, k, nl != NULL, err)) return -1;
        s += k;
        n -= k;
    }
    return 0;
}

static int text_finish(DocSplitter *d, Err *err) {
    if (d->len > 0) {                                   /* a last line without its "\n", held as a maybe-separator */
        size_t len = d->len;
        d->len = 0;
        if (!separates(d, d->mode, d->line, len) && out_text(d, d->line, len, err)) return -1;
    }
    return d->sink.end(d->sink.ctx, err);
}

/* DOCS_AUTO: the mode, once the first DOCS_AUTO_PEEK bytes (or all, when fewer) are seen; then what was
   held goes through as it would have. */
static int decide(DocSplitter *d, DocsMode mode, Err *err) {
    d->mode = mode;
    int rc = text_feed(d, d->peek, d->peek_len, err);
    free(d->peek);
    d->peek = NULL;
    d->peek_len = d->peek_cap = 0;
    return rc;
}

static int auto_feed(DocSplitter *d, const char *s, size_t n, Err *err) {
    size_t take = DOCS_AUTO_PEEK - d->peek_len < n ? DOCS_AUTO_PEEK - d->peek_len : n;
    grow(&d->peek, &d->peek_cap, d->peek_len + take);
    memcpy(d->peek + d->peek_len, s, take);
    d->peek_len += take;
    for (;;) {                                           /* the complete lines not yet looked at */
        const char *at = d->peek + d->peek_scan;
        const char *nl = memchr(at, '\n', d->peek_len - d->peek_scan);
        if (!nl) break;
        if (is_separator_line(d->opt.separator, at, (size_t)(nl - at))) d->sep_line = 1;
        d->peek_scan = (size_t)(nl - d->peek) + 1;
        if (d->sep_line) break;
    }
    if (!d->sep_line && d->peek_len < DOCS_AUTO_PEEK) return 0;
    if (decide(d, d->sep_line ? DOCS_SEPARATOR : DOCS_BLANK, err)) return -1;
    return text_feed(d, s + take, n - take, err);
}

/* ---------- JSON lines ---------- */

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: case JSON_REAL: return "number";
    case JSON_TRUE: case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* The fields an object has, for a message: "a, b, c" (the first few). */
static void field_names(const json_t *obj, char *out, size_t size) {
    const char *key;
    json_t *val;
    size_t at = 0, k = 0;
    out[0] = 0;
    json_object_foreach((json_t *)obj, key, val) {
        (void)val;
        if (k++ == 8) { snprintf(out + at, size - at, ", ..."); break; }
        int w = snprintf(out + at, size - at, "%s%s", at ? ", " : "", err_show(key));
        if (w < 0 || (size_t)w >= size - at) break;
        at += (size_t)w;
    }
    if (!k) snprintf(out, size, "none");
}

static int json_line(DocSplitter *d, const char *s, size_t n, Err *err) {
    d->line_no++;
    if (d->line_no == 1 && n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) { s += 3; n -= 3; }   /* a UTF-8 byte order mark */
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
    if (i == n) return 0;                                   /* an empty line */
    if (d->line_no == 1 && s[i] == '[')
        return err_set(err, "%s: line 1: a JSON array; prepare reads JSON lines, one object a line "
                       "(jq -c '.[]' FILE > FILE.jsonl makes them)", err_show(d->name));
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) return err_set(err, "%s: line %zu: not JSON: %s (column %d); prepare reads JSON lines, one object a line", err_show(d->name), d->line_no, je.text, je.column);
    const char *field = d->opt.field;
    int rc = 0;
    json_t *f = json_is_object(v) ? json_object_get(v, field) : NULL;
    if (!json_is_object(v)) {
        rc = err_set(err, "%s: line %zu: a JSON %s, not an object with a \"%s\" string", d->name, d->line_no, json_kind(v), err_show(field));
    } else if (!f) {
        char names[512];
        field_names(v, names, sizeof names);
        rc = err_set(err, "%s: line %zu: no \"%s\" field (it has: %s; --field NAME picks another)", d->name, d->line_no,
                     err_show(field), names);
    } else if (!json_is_string(f)) {
        rc = err_set(err, "%s: line %zu: \"%s\" is a %s, not a string", d->name, d->line_no, err_show(field), json_kind(f));
    } else {
        rc = out_text(d, json_string_value(f), json_string_length(f), err);
        if (rc == 0) rc = d->sink.end(d->sink.ctx, err);
    }
    json_decref(v);
    return rc;
}

static int json_feed(DocSplitter *d, const char *s, size_t n, Err *err) {
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t k = nl ? (size_t)(nl - s) : n;
        if (d->len + k > DOCS_MAX_JSON_LINE)
            return err_set(err, "%s: line %zu: longer than %u MiB, the most a JSON line may hold", err_show(d->name), d->line_no + 1,
                           DOCS_MAX_JSON_LINE >> 20);
        if (!nl) { line_append(d, s, k); return 0; }
        int rc;
        if (d->len == 0) rc = json_line(d, s, k, err);       /* the whole line is here: no copy */
        else {
            line_append(d, s, k);
            rc = json_line(d, d->line, d->len, err);
            d->len = 0;
        }
        if (rc) return -1;
        s += k + 1;
        n -= k + 1;
    }
    return 0;
}

/* ---------- either ---------- */

int docsplit_feed(DocSplitter *d, const char *s, size_t n, Err *err) {
    if (d->kind == CORPUS_JSONL) return json_feed(d, s, n, err);
    if (d->mode == DOCS_AUTO) return auto_feed(d, s, n, err);
    return text_feed(d, s, n, err);
}

int docsplit_finish(DocSplitter *d, Err *err) {
    if (d->kind == CORPUS_JSONL) {
        if (d->len == 0) return 0;
        size_t len = d->len;
        d->len = 0;
        return json_line(d, d->line, len, err);
    }
    if (d->mode == DOCS_AUTO) {
        size_t last = d->peek_len - d->peek_scan;             /* a last line without its "\n" */
        int sep = d->sep_line || (last && is_separator_line(d->opt.separator, d->peek + d->peek_scan, last));
        if (decide(d, sep ? DOCS_SEPARATOR : DOCS_BLANK, err)) return -1;
    }
    return text_finish(d, err);
}
