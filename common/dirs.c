/* dirs: folders replaced as a whole, trees removed, folders synced, lock files (see dirs.h). */
#include "common/dirs.h"
#include "common/files.h"
#include <dirent.h>
#include <limits.h>
#include <signal.h>
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

int pid_gone(long pid) {
    return pid <= 0 || pid > INT_MAX || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* Copies the regular file src to dst (for where a hard link cannot be made). */
static int copy_file(const char *src, const char *dst, mode_t mode, Err *err) {
    size_t len;
    char *data = read_file(src, &len, err);
    if (!data) return -1;
    int rc = write_file_atomic(dst, data, len, err);
    free(data);
    if (rc == 0) chmod(dst, mode & 07777);
    return rc;
}

/* Makes dst a symbolic link to where the symbolic link src points (for where a hard link cannot be made).
   The target is read into this function's own array, which is never NULL. (Into a buffer from xmalloc, which
   gcc cannot see never returns NULL, -fsanitize=undefined's NULL check before readlink made a path on which
   -Wnonnull saw a NULL buffer.) */
static int copy_symlink(const char *src, const char *dst, Err *err) {
    char to[4096];
    ssize_t n = readlink(src, to, sizeof to - 1);
    if (n >= 0) to[n] = 0;
    if (n < 0 || symlink(to, dst) != 0) return err_set(err, "%s: cannot copy the symbolic link: %s", err_show(dst), strerror(errno));
    return 0;
}

static int skipped(const char *name, const char *const *skip) {
    for (; skip && *skip; skip++) if (!strcmp(name, *skip)) return 1;
    return 0;
}

int dir_link_tree(const char *src, const char *dst, const char *const *skip, Err *err) {
    struct stat st;
    if (lstat(src, &st) != 0) return err_set(err, "%s: %s", err_show(src), strerror(errno));
    if (mkdir(dst, st.st_mode & 07777) != 0) return err_set(err, "%s: cannot create directory: %s", err_show(dst), strerror(errno));
    DIR *d = opendir(src);
    if (!d) return err_set(err, "%s: cannot read: %s", err_show(src), strerror(errno));
    enum { N = 4096 };
    char *s = xmalloc(N), *t = xmalloc(N);
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || skipped(e->d_name, skip)) continue;
        if (snprintf(s, N, "%s/%s", src, e->d_name) >= N - ATOMIC_SUFFIX_MAX || snprintf(t, N, "%s/%s", dst, e->d_name) >= N - ATOMIC_SUFFIX_MAX) {
            rc = err_set(err, "%s/%s: path too long", err_show(src), err_show(e->d_name));
            break;
        }
        if (lstat(s, &st) != 0) { rc = err_set(err, "%s: %s", err_show(s), strerror(errno)); break; }
        if (S_ISDIR(st.st_mode)) rc = dir_link_tree(s, t, NULL, err);
        else if (link(s, t) == 0) continue;
        else if (S_ISREG(st.st_mode)) rc = copy_file(s, t, st.st_mode, err);
        else if (S_ISLNK(st.st_mode)) rc = copy_symlink(s, t, err);
        else rc = err_set(err, "%s: cannot carry it over to the new folder (not a file, folder or link): %s", err_show(s), strerror(errno));
    }
    closedir(d);
    free(s);
    free(t);
    return rc;
}

void dir_split_path(const char *path, char *parent, size_t psize, char *name, size_t nsize) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    char *slash = strrchr(buf, '/');
    snprintf(name, nsize, "%s", slash ? slash + 1 : buf);
    if (!slash) snprintf(parent, psize, ".");
    else if (slash == buf) snprintf(parent, psize, "/");
    else { *slash = 0; snprintf(parent, psize, "%s", buf); }
}

/* Removes parent/.NAME.KIND-PID folders whose process is gone and that belong to this user (what killed runs left). */
static void remove_stale_stages(const DirStage *st) {
    DIR *d = opendir(st->parent);
    if (!d) return;
    char want[300], path[4600];
    int n = snprintf(want, sizeof want, ".%s.%s-", st->name, st->kind);
    for (struct dirent *e; n > 0 && (size_t)n < sizeof want && (e = readdir(d));) {
        char *end;
        long pid = strncmp(e->d_name, want, (size_t)n) ? 0 : strtol(e->d_name + n, &end, 10);
        struct stat sb;
        if (pid <= 0 || *end || !pid_gone(pid)) continue;
        snprintf(path, sizeof path, "%s/%s", st->parent, e->d_name);
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid()) dir_remove_tree(path);
    }
    closedir(d);
}

/* PARENT/.NAME.KIND.lock: one writer of the folder at a time (two exports into one folder would each swap theirs in,
   and the later would win silently) */
static int stage_lock(DirStage *st, const char *given, Err *err) {
    snprintf(st->lock, sizeof st->lock, "%s/.%s.%s.lock", st->parent, st->name, st->kind);
    long pid = 0;
    int rc = lockfile_try(st->lock, &st->lock_fd, &pid, err);
    if (rc == 1)
        return err_set(err, "%s: another %s is writing this folder (pid %ld holds %s): wait for it to finish, or give "
                       "another folder", err_show(given), st->kind, pid, err_show(st->lock));
    return rc;
}

int dir_stage_begin(DirStage *st, const char *dir, const char *kind, const char *const *skip, Err *err) {
    memset(st, 0, sizeof *st);
    st->lock_fd = -1;
    snprintf(st->kind, sizeof st->kind, "%s", kind);
    if (strlen(dir) >= 3800) return err_set(err, "%s: path too long", err_show(dir));
    if (!realpath(dir, st->dir)) {   /* a folder given through a symbolic link is the link's target */
        if (errno != ENOENT) return err_set(err, "%s: %s", err_show(dir), strerror(errno));
        snprintf(st->dir, sizeof st->dir, "%s", dir);
    }
    dir_split_path(st->dir, st->parent, sizeof st->parent, st->name, sizeof st->name);
    if (!st->name[0] || !strcmp(st->name, ".") || !strcmp(st->name, "..") || !strcmp(st->dir, "/"))
        return err_set(err, "%s: give a folder of its own (it is replaced as a whole)", err_show(dir));
    struct stat sb;
    st->existed = lstat(st->dir, &sb) == 0;
    if (st->existed && !S_ISDIR(sb.st_mode)) return err_set(err, "%s: exists and is not a folder", err_show(dir));
    if (mkdir_p(st->parent, err) || stage_lock(st, dir, err)) return -1;
    remove_stale_stages(st);
    snprintf(st->stage, sizeof st->stage, "%s/.%s.%s-%d", st->parent, st->name, kind, (int)getpid());
    dir_remove_tree(st->stage);                      /* an earlier one of this process that stopped halfway */
    if (st->existed) return dir_link_tree(st->dir, st->stage, skip, err) ? (dir_stage_abort(st), -1) : 0;
    if (mkdir(st->stage, 0755) != 0) {
        err_set(err, "%s: cannot create a folder: %s", err_show(st->stage), strerror(errno));
        st->stage[0] = 0;
        dir_stage_abort(st);
        return -1;
    }
    return 0;
}

int dir_stage_commit(DirStage *st, Err *err) {
    char aside[4600];
    snprintf(aside, sizeof aside, "%s/.%s.%s-%d.old", st->parent, st->name, st->kind, (int)getpid());
    int rc = dir_sync(st->stage);
    if (rc == 0) rc = dir_swap(st->stage, st->dir, aside);
    if (rc < 0) {
        err_set(err, "%s: cannot put the new folder in place: %s (the folder is as it was)", err_show(st->dir), strerror(errno));
        dir_stage_abort(st);
        return -1;
    }
    if (dir_sync(st->parent)) {}                     /* best effort: some file systems cannot sync a folder */
    dir_stage_abort(st);                             /* swapped: the stage holds the old folder; moved in: nothing */
    return 0;
}

void dir_stage_abort(DirStage *st) {
    if (st->stage[0]) dir_remove_tree(st->stage);
    st->stage[0] = 0;
    if (st->lock_fd >= 0) {   /* removed while still held: see lockfile_try */
        unlink(st->lock);
        close(st->lock_fd);
        st->lock_fd = -1;
    }
}
