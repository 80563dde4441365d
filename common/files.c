#include "common/files.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *read_file(const char *path, size_t *len, Err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set(err, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) { cap *= 2; char *nb = realloc(buf, cap); if (!nb) { free(buf); fclose(f); err_set(err, "%s: out of memory", path); return NULL; } buf = nb; }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); err_set(err, "%s: read error", path); return NULL; }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int atomic_open(AtomicFile *af, const char *path, Err *err) {
    af->f = NULL;
    if ((size_t)snprintf(af->path, sizeof af->path, "%s", path) >= sizeof af->path ||
        (size_t)snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof af->tmp)
        return err_set(err, "%.200s...: path too long (at most %zu bytes)", path, sizeof af->tmp - 20);
    af->f = fopen(af->tmp, "wb");
    if (!af->f) return err_set(err, "%s: cannot create: %s", af->tmp, strerror(errno));
    return 0;
}

int atomic_commit(AtomicFile *af, Err *err) {
    int bad = fflush(af->f) != 0 || ferror(af->f);
    if (!bad) bad = fsync(fileno(af->f)) != 0;
    if (fclose(af->f) != 0) bad = 1;
    af->f = NULL;
    if (bad) { remove(af->tmp); return err_set(err, "%s: write failed: %s (the previous file, if any, is untouched)", af->path, strerror(errno)); }
    if (rename(af->tmp, af->path) != 0) { remove(af->tmp); return err_set(err, "%s: cannot rename into place: %s", af->path, strerror(errno)); }
    return 0;
}

void atomic_abort(AtomicFile *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    remove(af->tmp);
}

int write_file_atomic(const char *path, const void *data, size_t len, Err *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    if (fwrite(data, 1, len, af.f) != len) { atomic_abort(&af); return err_set(err, "%s: write failed: %s", path, strerror(errno)); }
    return atomic_commit(&af, err);
}

int mkdir_p(const char *path, Err *err) {
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return err_set(err, "%.200s...: path too long (at most %zu bytes)", path, sizeof buf - 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return err_set(err, "%s: cannot create directory: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

FILE *fopen_regular(const char *path, const char *what, Err *err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* O_NONBLOCK: opening a FIFO does not wait */
    if (fd < 0) { err_set(err, "%s: cannot open %s: %s", path, what, strerror(errno)); return NULL; }
    struct stat st;
    FILE *f = NULL;
    if (fstat(fd, &st) != 0) err_set(err, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) err_set(err, "%s: %s; expected %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file", what);
    else if (fcntl(fd, F_SETFL, 0) != 0 || !(f = fdopen(fd, "rb"))) err_set(err, "%s: cannot open %s: %s", path, what, strerror(errno));
    if (!f) close(fd);
    return f;
}
