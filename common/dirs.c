/* dirs: folders replaced as a whole, trees removed, folders synced, lock files (see dirs.h). */
#include "common/dirs.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int dir_swap(const char *new_dir, const char *dir, const char *aside) {
    if (renameat2(AT_FDCWD, new_dir, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) return 0;
    if (errno == ENOENT && rename(new_dir, dir) == 0) return 1;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return -1;
    if (rename(dir, aside) != 0) return -1;
    if (rename(new_dir, dir) != 0) {
        int e = errno;
        rename(aside, dir);
        errno = e;
        return -1;
    }
    rename(aside, new_dir);
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

int dir_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    if (lstat(path, &st) == 0) { errno = ENOTEMPTY; return -1; }
    return 0;
}

int dir_sync(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* The pid in a lock file, or 0 if it holds none (yet: a holder writes it just after locking). */
static long read_pid(int fd, int patient) {
    for (int tries = 0; tries < (patient ? 20 : 1); tries++) {
        char buf[32] = {0};
        ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
        long pid = got > 0 ? strtol(buf, NULL, 10) : 0;
        if (pid > 0) return pid;
        if (patient) usleep(10000);
    }
    return 0;
}

int lockfile_try(const char *path, int *fd_out, long *pid, Err *err) {
    for (int attempt = 0; attempt < 10; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) return err_set(err, "%s: cannot open the lock file: %s", path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            *pid = e == EWOULDBLOCK ? read_pid(fd, 1) : 0;
            close(fd);
            if (e != EWOULDBLOCK) return err_set(err, "%s: cannot lock: %s", path, strerror(e));
            return 1;
        }
        /* it counts only while it is still the file at path: a holder may remove it (or a swap replace it) as it
           lets go, and then the next one locks the new file */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *pid = read_pid(fd, 0);
            char buf[32];
            int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
                int e = errno;
                close(fd);
                return err_set(err, "%s: cannot write the lock file: %s", path, strerror(e));
            }
            *fd_out = fd;
            return 0;
        }
        close(fd);
    }
    return err_set(err, "%s: the lock file keeps changing; is another process starting here?", path);
}
