/* utf8_stream: token bytes printed as they come (sampled text), a UTF-8 character split across tokens held
 * back until it is complete (see tokenizer.h). */
#include "runtime/data/tokenizer.h"
#include <stdio.h>

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
