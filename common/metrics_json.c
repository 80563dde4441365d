/* metrics_json: JSON lines, their numbers and their strings (see metrics_json.h). */
#include "common/metrics_json.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *metrics_dump(const json_t *record) {
    return json_dumps(record, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
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

json_t *metrics_real(const char *fmt, double v) {
    if (!isfinite(v)) return json_null();
    char buf[64];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(buf, sizeof buf, fmt, v);
#pragma GCC diagnostic pop
    double r = strtod(buf, NULL);
    return json_real(isfinite(r) ? r : v);   /* a format like "%.0e" can round up past DBL_MAX */
}

char *utf8_clean(const void *bytes, size_t n, size_t *len) {
    const uint8_t *s = bytes;
    char *out = xmalloc(3 * n + 1), *o = out;     /* U+FFFD is 3 bytes, for 1 */
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char_len(s + i, n - i);
        if (k == 0) { memcpy(o, "\xef\xbf\xbd", 3); o += 3; i++; continue; }
        memcpy(o, s + i, k);
        o += k;
        i += k;
    }
    *o = 0;
    if (len) *len = (size_t)(o - out);
    return out;
}

json_t *metrics_text(const void *bytes, size_t n) {
    size_t len;
    char *clean = utf8_clean(bytes, n, &len);
    json_t *s = json_stringn(clean, len);
    free(clean);
    return s;
}
