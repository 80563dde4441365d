/* metrics: metrics.jsonl and JSON strings (see metrics.h). */
#include "runtime/train/metrics.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int metrics_open(Metrics *m, const char *dir, Err *err) {
    char path[2200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    m->f = fopen(path, "a");
    if (!m->f) return err_set(err, "%s: cannot open the metrics log: %s", path, strerror(errno));
    return 0;
}

void metrics_line(Metrics *m, const char *fmt, ...) {
    if (!m->f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(m->f, fmt, ap);
    va_end(ap);
    fputc('\n', m->f);
    fflush(m->f);
}

void metrics_close(Metrics *m) {
    if (m->f) fclose(m->f);
    m->f = NULL;
}

/* The length (1..4) of the valid UTF-8 character at s, or 0 where s does not start one (RFC 3629: the
   second byte's range rules out overlong forms, surrogates and code points past U+10FFFF). */
static size_t utf8_char_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (need < 2) return need;
    if (need > n) return 0;
    uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < need; k++) if ((s[k] & 0xC0) != 0x80) return 0;
    return need;
}

const char *json_number(char buf[32], const char *fmt, double v) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    if (isfinite(v)) snprintf(buf, 32, fmt, v);
    else snprintf(buf, 32, "null");
#pragma GCC diagnostic pop
    return buf;
}

char *json_string(const void *bytes, size_t n) {
    const uint8_t *s = bytes;
    char *out = xmalloc(6 * n + 3), *o = out;     /* the longest escape, \u00XX or \ufffd, is 6 per byte */
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char_len(s + i, n - i);
        uint8_t c = s[i];
        if (k == 0) { o += sprintf(o, "\\ufffd"); i++; continue; }
        if (k > 1) { memcpy(o, s + i, k); o += k; i += k; continue; }
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c == '\n') o += sprintf(o, "\\n");
        else if (c == '\r') o += sprintf(o, "\\r");
        else if (c == '\t') o += sprintf(o, "\\t");
        else if (c < 0x20) o += sprintf(o, "\\u%04x", c);
        else *o++ = (char)c;
        i++;
    }
    *o++ = '"';
    *o = 0;
    return out;
}
