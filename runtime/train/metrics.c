/* metrics: metrics.jsonl and JSON strings (see metrics.h). */
#include "runtime/train/metrics.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where fd's contents end after their last end of line (0 where they have none), reading back from size; -1 on a
   read error. */
static long long last_line_end(int fd, long long size) {
    char buf[65536];
    for (long long at = size; at > 0;) {
        size_t n = at < (long long)sizeof buf ? (size_t)at : sizeof buf;
        at -= (long long)n;
        if (pread(fd, buf, n, (off_t)at) != (ssize_t)n) return -1;
        for (size_t i = n; i > 0; i--) if (buf[i - 1] == '\n') return at + (long long)i;
    }
    return 0;
}

/* A last line without its end of line (a run stopped while writing it) is cut off, so the next record starts a line. */
static int repair_last_line(Metrics *m, long long size, Err *err) {
    long long keep = last_line_end(m->fd, size);
    if (keep == size) return 0;
    if (keep < 0 || ftruncate(m->fd, (off_t)keep) != 0)
        return err_set(err, "%s: its last line was cut short, and cutting it off failed: %s", m->path, strerror(errno));
    printf("note: %s: its last line was cut short (%lld bytes without an end of line, from a run that stopped while "
           "writing it): removed\n", m->path, size - keep);
    return 0;
}

int metrics_open(Metrics *m, const char *dir, Err *err) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s/metrics.jsonl", dir);
    /* read too, for the last line; O_NONBLOCK so that a FIFO is refused below, not waited on */
    m->fd = open(m->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (m->fd < 0) return err_set(err, "%s: cannot open the metrics log: %s", m->path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(m->fd, &st) != 0 || fcntl(m->fd, F_SETFL, O_APPEND) != 0)
        rc = err_set(err, "%s: cannot open the metrics log: %s", m->path, strerror(errno));
    else if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
        rc = err_set(err, "%s: expected a file for the metrics log, found %s", m->path,
                     S_ISFIFO(st.st_mode) ? "a FIFO" : "something else (a socket?)");
    else if ((m->regular = S_ISREG(st.st_mode))) rc = repair_last_line(m, (long long)st.st_size, err);
    if (rc) { close(m->fd); return -1; }
    m->open = 1;
    return 0;
}

/* Writes the n bytes at p at the end, all of them or none: a write that stops part way is cut back off. On an
   error, errno says which. */
static int append_whole(Metrics *m, const char *p, size_t n) {
    off_t start = m->regular ? lseek(m->fd, 0, SEEK_END) : 0;
    for (size_t done = 0; done < n;) {
        ssize_t k = write(m->fd, p + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            if (done > 0 && start >= 0 && m->regular && ftruncate(m->fd, start) != 0) e = errno;
            errno = e;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}

void metrics_line(Metrics *m, const char *fmt, ...) {
    if (!m->open || m->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    char *line = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(line, (size_t)n + 1, fmt, ap);
    va_end(ap);
    line[n] = '\n';                      /* in place of the terminating 0 */
    if (append_whole(m, line, (size_t)n + 1) != 0) {
        m->failed = 1;
        fprintf(stderr, "gpt2gen: %s: %s: later records are lost; training goes on\n", m->path, strerror(errno));
    }
    free(line);
}

void metrics_close(Metrics *m) {
    if (m->open) close(m->fd);
    m->open = 0;
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

char *json_quote(const void *bytes, size_t n) {
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
