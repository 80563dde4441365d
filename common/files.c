#include "common/files.h"
#include "common/dirs.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* dirfd/path opened for reading if it is a regular file; a directory, a FIFO (whose open would wait for a
   writer) or a device is refused at once. -1 with err (and errno) when not. what: e.g. "a token shard". */
static int open_regular(int dirfd, const char *path, const char *what, Err *err) {
    int fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* O_NONBLOCK: opening a FIFO does not wait */
    struct stat st;
    int e = errno;
    if (fd < 0) err_set(err, "%s: cannot open%s%s: %s", err_show(path), what ? " " : "", what ? what : "", strerror(e));
    else if (fstat(fd, &st) != 0) { e = errno; err_set(err, "%s: cannot stat: %s", err_show(path), strerror(e)); }
    else if (!S_ISREG(st.st_mode)) {
        e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        err_set(err, "%s: %s; expected %s", err_show(path), S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file",
                what ? what : "a regular file");
    } else if (fcntl(fd, F_SETFL, 0) != 0) { e = errno; err_set(err, "%s: %s", err_show(path), strerror(e)); }
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
    if (fstat(fd, &st) != 0) err_set(err, "%s: cannot stat: %s", err_show(path), strerror(errno));
    else if (max && (unsigned long long)st.st_size > max) {
        err_set(err, "%s: %lld bytes, more than the %s such a file may have", err_show(path), (long long)st.st_size, size_words(max));
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
        if (got != want) { free(buf); buf = NULL; err_set(err, "%s: read error (or the file shrank while being read)", err_show(path)); }
        else { buf[got] = 0; if (len) *len = got; }
    }
    close(fd);
    if (!buf) errno = EIO;
    return buf;
}

char *read_file(const char *path, size_t *len, Err *err) { return read_file_at(AT_FDCWD, path, 0, len, err); }

char *read_file_max(const char *path, size_t max, size_t *len, Err *err) { return read_file_at(AT_FDCWD, path, max, len, err); }

/* ---------------------------------------------------------------- the one way gpt2gen writes a file */

const char *file_not_regular(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return NULL;
    if (S_ISREG(st.st_mode)) return NULL;
    if (S_ISLNK(st.st_mode)) return "a symbolic link";
    if (S_ISDIR(st.st_mode)) return "a folder";
    if (S_ISFIFO(st.st_mode)) return "a FIFO";
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
    return "a socket";
}

/* The refusal of a write to path, which is what (file_not_regular). */
static int refuse_not_regular(const char *path, const char *what, Err *err) {
    return err_set(err, "%s: is %s, not a regular file: gpt2gen writes only regular files and never replaces anything "
                   "else (give another path)", err_show(path), what);
}

/* 16 hex digits from the kernel's random source (the clock and the stack's address where it has none) */
static void random_hex(char out[ATOMIC_RANDOM_HEX + 1]) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts ^ ((uint64_t)getpid() << 40);
    }
    snprintf(out, ATOMIC_RANDOM_HEX + 1, "%016llx", (unsigned long long)r);
}

int atomic_open(AtomicFile *af, const char *path, Err *err) {
    af->f = NULL;
    af->tmp[0] = 0;
    if ((size_t)snprintf(af->path, sizeof af->path, "%s", path) >= sizeof af->path - ATOMIC_SUFFIX_MAX)
        return err_set(err, "%s: path too long (at most %zu bytes)", err_show(path), sizeof af->path - ATOMIC_SUFFIX_MAX - 1);
    const char *what = file_not_regular(path);
    if (what) return refuse_not_regular(path, what, err);
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {   /* a name taken (EEXIST) is never opened: another is drawn */
        char hex[ATOMIC_RANDOM_HEX + 1];
        random_hex(hex);
        snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%d.%s", path, (int)getpid(), hex);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !(af->f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) { close(fd); unlink(af->tmp); }
        af->tmp[0] = 0;
        return err_set(err, "%s: cannot create a temporary file beside it: %s", err_show(path), strerror(e));
    }
    af->dev = st.st_dev;
    af->ino = st.st_ino;
    return 0;
}

/* Removes the temporary file, if the name still is the file this process made (never what someone put there). */
static void remove_tmp(AtomicFile *af) {
    struct stat st;
    if (af->tmp[0] && lstat(af->tmp, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == af->dev && st.st_ino == af->ino)
        unlink(af->tmp);
    af->tmp[0] = 0;
}

/* fsync of the folder that holds path, so that its rename is on the disk too (best effort: some file systems refuse) */
static void sync_folder_of(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) { if (fsync(fd)) {} close(fd); }
}

int atomic_commit(AtomicFile *af, Err *err) {
    int e = 0;
    errno = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) e = errno ? errno : EIO;
    if (!e && fsync(fileno(af->f)) != 0) e = errno;
    if (fclose(af->f) != 0 && !e) e = errno ? errno : EIO;
    af->f = NULL;
    const char *what = e ? NULL : file_not_regular(af->path);   /* made since atomic_open */
    if (e || what) {
        remove_tmp(af);
        if (what) return refuse_not_regular(af->path, what, err);
        return err_set(err, "%s: write failed: %s (the previous file, if any, is untouched)", err_show(af->path), strerror(e));
    }
    if (rename(af->tmp, af->path) != 0) {
        e = errno;
        remove_tmp(af);
        return err_set(err, "%s: cannot rename into place: %s", err_show(af->path), strerror(e));
    }
    af->tmp[0] = 0;
    sync_folder_of(af->path);
    return 0;
}

void atomic_abort(AtomicFile *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    remove_tmp(af);
}

int atomic_write(AtomicFile *af, const void *data, size_t len, Err *err) {
    errno = 0;
    if (len && fwrite(data, 1, len, af->f) != len) {
        int e = errno ? errno : EIO;
        atomic_abort(af);
        return err_set(err, "%s: write failed: %s (the previous file, if any, is untouched)", err_show(af->path), strerror(e));
    }
    return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len, Err *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err) || atomic_write(&af, data, len, err)) return -1;
    return atomic_commit(&af, err);
}

size_t atomic_tmp_base(const char *name) {
    size_t n = strlen(name);
    if (n <= ATOMIC_RANDOM_HEX + 1) return 0;
    const char *hex = name + n - ATOMIC_RANDOM_HEX;
    if (strspn(hex, "0123456789abcdef") != ATOMIC_RANDOM_HEX || hex[-1] != '.') return 0;
    const char *pid = hex - 1;                              /* back over the pid's digits to ".tmp." */
    while (pid > name && pid[-1] >= '0' && pid[-1] <= '9') pid--;
    if (pid == hex - 1 || pid - name < 6 || strncmp(pid - 5, ".tmp.", 5)) return 0;
    return (size_t)(pid - 5 - name);
}

int atomic_leftover(const char *dir, const char *name) {
    size_t base = atomic_tmp_base(name);
    if (!base) return 0;
    long pid = strtol(name + base + 5, NULL, 10);
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return 0;
    return pid_gone(pid);
}

int file_may_replace(const char *path, int force, int (*ours)(const char *path), const char *what, Err *err) {
    const char *kind = file_not_regular(path);
    if (kind) return refuse_not_regular(path, kind, err);
    if (force || !file_exists(path) || (ours && ours(path))) return 0;
    return err_set(err, "%s exists and is not %s that gpt2gen wrote: give --force to replace it (or another path)",
                   err_show(path), what);
}

long file_head(const char *path, char *buf, size_t n) {
    Err ignore;
    int fd = open_regular(AT_FDCWD, path, NULL, &ignore);
    if (fd < 0 || n == 0) { if (fd >= 0) close(fd); return -1; }
    size_t got = 0;
    while (got < n - 1) {
        ssize_t r = read(fd, buf + got, n - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    return (long)got;
}

int mkdir_p(const char *path, Err *err) {
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return err_set(err, "%.200s...: path too long (at most %zu bytes)", path, sizeof buf - 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return err_set(err, "%s: cannot create directory: %s", err_show(buf), strerror(errno));
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
    if (!f) { err_set(err, "%s: cannot open %s: %s", err_show(path), what, strerror(errno)); close(fd); }
    return f;
}
