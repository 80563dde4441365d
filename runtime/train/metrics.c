/* metrics: metrics.jsonl and its records through Jansson (see metrics.h; the JSON strings and numbers are
   common/metrics_json.c's). */
#include "runtime/train/metrics.h"
#include "common/files.h"
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
        return err_set(err, "%s: its last line was cut short, and cutting it off failed: %s", err_show(m->path), strerror(errno));
    printf("note: %s: its last line was cut short (%lld bytes without an end of line, from a run that stopped while "
           "writing it): removed\n", m->path, size - keep);
    return 0;
}

int metrics_is_ours(const char *path) {
    static const char start[] = "{\"event\":\"";   /* every record's first key (metrics_record) */
    char head[sizeof start];
    long n = file_head(path, head, sizeof head);   /* a file shorter than that: a record cut short, as it began */
    return n > 0 && !memcmp(head, start, (size_t)n);
}

int metrics_open(Metrics *m, const char *dir, Err *err) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s/metrics.jsonl", dir);
    /* read too, for the last line; O_NONBLOCK so that a FIFO is refused below, not waited on */
    m->fd = open(m->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (m->fd < 0) return err_set(err, "%s: cannot open the metrics log: %s", err_show(m->path), strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(m->fd, &st) != 0 || fcntl(m->fd, F_SETFL, O_APPEND) != 0)
        rc = err_set(err, "%s: cannot open the metrics log: %s", err_show(m->path), strerror(errno));
    else if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
        rc = err_set(err, "%s: expected a file for the metrics log, found %s", err_show(m->path),
                     S_ISFIFO(st.st_mode) ? "a FIFO" : "something else (a socket?)");
    else if ((m->regular = S_ISREG(st.st_mode)) && st.st_size > 0 && !metrics_is_ours(m->path))
        rc = err_set(err, "%s: exists and is not a metrics log gpt2gen wrote (its first line is not a record "
                     "{\"event\":...}): it is kept; move it away, or use another checkpoint.dir", err_show(m->path));
    else if (m->regular) rc = repair_last_line(m, (long long)st.st_size, err);
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

void metrics_write(Metrics *m, json_t *record) {
    if (!m->open || m->failed || !record) { json_decref(record); return; }
    char *text = metrics_dump(record);
    json_decref(record);
    if (!text) {   /* only out of memory: the strings are valid UTF-8, the numbers finite */
        fprintf(stderr, "gpt2gen: %s: a record could not be made: it is left out\n", m->path);
        return;
    }
    size_t n = strlen(text);
    char *line = xmalloc(n + 1);
    memcpy(line, text, n);
    line[n] = '\n';
    free(text);
    if (append_whole(m, line, n + 1) != 0) {
        m->failed = 1;
        fprintf(stderr, "gpt2gen: %s: %s: later records are lost; training goes on\n", m->path, strerror(errno));
    }
    free(line);
}

static json_t *record_of(const char *event, va_list ap) {
    json_t *o = json_object();
    json_object_set_new(o, "event", json_string(event));
    for (const char *key; (key = va_arg(ap, const char *));) {
        json_t *v = va_arg(ap, json_t *);
        if (v) json_object_set_new(o, key, v);
    }
    return o;
}

json_t *metrics_record(const char *event, ...) {
    va_list ap;
    va_start(ap, event);
    json_t *o = record_of(event, ap);
    va_end(ap);
    return o;
}

void metrics_event(Metrics *m, const char *event, ...) {
    va_list ap;
    va_start(ap, event);
    json_t *o = record_of(event, ap);
    va_end(ap);
    metrics_write(m, o);
}

void metrics_close(Metrics *m) {
    if (m->open) close(m->fd);
    m->open = 0;
}
