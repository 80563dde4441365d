#include "common/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int err_set(Err *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *err_show(const char *s) {
    static _Thread_local char slots[ERR_SHOW_SLOTS][ERR_SHOW_MAX + 4];
    static _Thread_local unsigned next;
    if (!s) return "(null)";
    if (strnlen(s, ERR_SHOW_MAX + 1) <= ERR_SHOW_MAX) return s;
    char *out = slots[next++ % ERR_SHOW_SLOTS];
    const size_t half = ERR_SHOW_MAX / 2, n = strlen(s);
    memcpy(out, s, half);
    memcpy(out + half, "...", 3);
    memcpy(out + half + 3, s + n - half, half + 1);   /* the tail and its terminating 0 */
    return out;
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "gpt2gen: out of host memory (asked for %zu bytes)\n", n); exit(EXIT_FAIL); }
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) { fprintf(stderr, "gpt2gen: out of host memory (asked for %zu x %zu bytes)\n", n, size); exit(EXIT_FAIL); }
    return p;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

void err_reprefix(Err *err, const char *from, const char *to) {
    size_t n = strlen(from);
    if (!n || strncmp(err->msg, from, n)) return;
    char rest[sizeof err->msg];
    memcpy(rest, err->msg + n, strlen(err->msg + n) + 1);
    err_set(err, "%s%s", err_show(to), rest);
}
