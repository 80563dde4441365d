#include "common/files.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dirfd/path opened for reading if it is a regular file; a directory, a FIFO (whose open would wait for a
   writer) or a device is refused at once. -1 with err (and errno) when not. what: e.g. "a token shard". */
static int open_regular(int dirfd, const char *path, const char *what, Err *err) {
    int fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* O_NONBLOCK: opening a FIFO does not wait */
    struct stat st;
    int e = errno;
    if (fd < 0) err_set(err, "%s: cannot open%s%s: %s", path, what ? " " : "", what ? what : "", strerror(e));
    else if (fstat(fd, &st) != 0) { e = errno; err_set(err, "%s: cannot stat: %s", path, strerror(e)); }
    else if (!S_ISREG(st.st_mode)) {
        e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        err_set(err, "%s: %s; expected %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file",
                what ? what : "a regular file");
    } else if (fcntl(fd, F_SETFL, 0) != 0) { e = errno; err_set(err, "%s: %s", path, strerror(e)); }
    else return fd;
    if (fd >= 0) close(fd);
    errno = e;
    return -1;
}

/* max in words for the messages: "64 MiB", "4 KiB" (a static buffer: messages only) */
static const char *size_words(size_t max) {
    static char buf[32];
    if (max >= (1u << 20) && max % (1u << 20) == 0) snprintf(buf, sizeof buf, "%zu MiB", max >> 20);
    else if (max >= 1024 && max % 1024 == 0) snprintf(buf, sizeof buf, "%zu KiB", max >> 10);
    else snprintf(buf, sizeof buf, "%zu bytes", max);
    return buf;
}

char *read_file_at(int dirfd, const char *path, size_t max, size_t *len, Err *err) {
    int fd = open_regular(dirfd, path, NULL, err);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) err_set(err, "%s: cannot stat: %s", path, strerror(errno));
    else if (max && (unsigned long long)st.st_size > max) {
        err_set(err, "%s: %lld bytes, more than the %s such a file may have", path, (long long)st.st_size, size_words(max));
        close(fd);
        errno = EFBIG;
        return NULL;
    } else {
        size_t want = (size_t)st.st_size, got = 0;
        buf = xmalloc(want + 1);
        while (got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (got != want) { free(buf); buf = NULL; err_set(err, "%s: read error (or the file shrank while being read)", path); }
        else { buf[got] = 0; if (len) *len = got; }
    }
    close(fd);
    if (!buf) errno = EIO;
    return buf;
}

char *read_file(const char *path, size_t *len, Err *err) { return read_file_at(AT_FDCWD, path, 0, len, err); }

char *read_file_max(const char *path, size_t max, size_t *len, Err *err) { return read_file_at(AT_FDCWD, path, max, len, err); }

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

const char *file_missing_why(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) return "";
    if (errno == ENOENT) return "no such file";
    if (errno == ENAMETOOLONG) return "a name in the path is longer than the file system allows (255 bytes a name, 4095 in all)";
    if (errno == ENOTDIR) return "a part of the path is not a folder";
    return strerror(errno);
}

FILE *fopen_regular(const char *path, const char *what, Err *err) {
    int fd = open_regular(AT_FDCWD, path, what, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) { err_set(err, "%s: cannot open %s: %s", path, what, strerror(errno)); close(fd); }
    return f;
}
