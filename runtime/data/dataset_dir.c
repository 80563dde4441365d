/* dataset_dir: a data set folder replaced as a whole (see dataset_dir.h). */
#include "runtime/data/dataset_dir.h"
#include "common/dirs.h"
#include "common/files.h"
#include "runtime/data/shard.h"
#include "runtime/data/tokenizer.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dataset_file_name(const char *name) {
    char base[256];
    snprintf(base, sizeof base, "%s", name);
    size_t tmp = atomic_tmp_base(base);                /* AtomicFile's temporary name: path.tmp.<pid>.<hex> */
    if (tmp) base[tmp] = 0;
    size_t n = strlen(base);
    if (!strcmp(base, "tokenizer.bin")) return 1;
    if (n < 4 || strcmp(base + n - 4, ".bin")) return 0;
    return !strncmp(base, "train_", 6) || !strncmp(base, "val_", 4);
}

static int is_dot(const char *name) { return !strcmp(name, ".") || !strcmp(name, ".."); }

const char *dataset_dir_problem(const char *dir) {
    char parent[4096], name[256];
    if (strlen(dir) >= 3800) return "path too long";
    dir_split_path(dir, parent, sizeof parent, name, sizeof name);
    if (!name[0] || is_dot(name)) return "give the data set a folder of its own (prepare replaces the folder as a whole)";
    return NULL;
}

/* The folder, through symbolic links when it exists, and where it lies. */
static int resolve(DatasetDir *d, Err *err) {
    const char *problem = dataset_dir_problem(d->given);
    if (problem) return err_set(err, "%s: %s", err_show(d->given), problem);
    if (!realpath(d->given, d->dir)) {
        if (errno != ENOENT) return err_set(err, "%s: %s", err_show(d->given), strerror(errno));
        snprintf(d->dir, sizeof d->dir, "%s", d->given);
        for (size_t n = strlen(d->dir); n > 1 && d->dir[n - 1] == '/'; n--) d->dir[n - 1] = 0;
    }
    if ((problem = dataset_dir_problem(d->dir))) return err_set(err, "%s (%s): %s", err_show(d->given), d->dir, problem);
    dir_split_path(d->dir, d->parent, sizeof d->parent, d->name, sizeof d->name);
    return 0;
}

/* The process id in a leftover's name ".NAME.KIND-PID"; 0 when name is not one. */
static long leftover_pid(const DatasetDir *d, const char *name, const char *kind) {
    char want[300];
    int n = snprintf(want, sizeof want, ".%s.%s-", d->name, kind);
    if (n <= 0 || (size_t)n >= sizeof want || strncmp(name, want, (size_t)n)) return 0;
    char *end;
    long pid = strtol(name + n, &end, 10);
    return *end || pid <= 0 ? 0 : pid;
}

/* Finishes what killed runs left beside the folder: an old data set set aside goes back when the folder
   is missing (a kill between the two renames of a swap); everything else of theirs is removed. The
   leftovers of runs still going are left alone. */
static void clean_leftovers(const DatasetDir *d) {
    DIR *dh = opendir(d->parent);
    if (!dh) return;
    char path[8192];
    for (struct dirent *e; (e = readdir(dh));) {
        long old = leftover_pid(d, e->d_name, "old"), tmp = leftover_pid(d, e->d_name, "prepare");
        if (!(old && pid_gone(old)) && !(tmp && pid_gone(tmp))) continue;
        snprintf(path, sizeof path, "%s/%s", d->parent, e->d_name);
        if (old && !file_exists(d->dir) && rename(path, d->dir) == 0) {
            printf("note: %s: put back the data set that a killed run had set aside\n", d->given);
            continue;
        }
        if (dir_remove_tree(path)) fprintf(stderr, "warning: cannot remove %s, left by a killed run: %s\n", path, strerror(errno));
    }
    closedir(dh);
}

/* Whether the file name in folder dir is one prepare wrote: a token shard or a tokenizer file by its name and its
   first bytes (the format's magic), or what a killed write of one left (atomic_leftover). A user's file that
   only looks like one by its name (train_my_notes.bin) is not. */
static int ours(const char *dir, const char *name) {
    if (!dataset_file_name(name)) return 0;
    if (atomic_tmp_base(name)) return atomic_leftover(dir, name);
    char path[8192], head[5];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    int32_t magic;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || file_head(path, head, sizeof head) != 4) return 0;
    memcpy(&magic, head, 4);
    return magic == (strcmp(name, "tokenizer.bin") ? SHARD_MAGIC : TOKENIZER_MAGIC);
}

/* An existing folder may be replaced: a folder, not a mount point, holding only data set files. */
static int check_folder(DatasetDir *d, Err *err) {
    struct stat st, up;
    if (stat(d->dir, &st) != 0) return errno == ENOENT ? 0 : err_set(err, "%s: %s", err_show(d->given), strerror(errno));
    if (!S_ISDIR(st.st_mode)) return err_set(err, "%s: exists and is not a folder", err_show(d->given));
    if (stat(d->parent, &up) == 0 && up.st_dev != st.st_dev)
        return err_set(err, "%s: is a mount point; prepare replaces the folder as a whole, so give a folder inside it", err_show(d->given));
    d->mode = (int)(st.st_mode & 07777);
    DIR *dh = opendir(d->dir);
    if (!dh) return err_set(err, "%s: cannot read the folder: %s", err_show(d->given), strerror(errno));
    char path[8192];
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(dh));) {
        if (is_dot(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", d->dir, e->d_name);
        if (!dataset_file_name(e->d_name) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            rc = err_set(err, "%s: holds %s, which is not part of a data set (train_*.bin, val_*.bin, tokenizer.bin); "
                         "prepare replaces the folder as a whole, so move it out or give another folder",
                         err_show(d->given), err_show(e->d_name));
        else if (!ours(d->dir, e->d_name))
            rc = err_set(err, "%s: holds %s, which is named like a data set's file but is not one prepare wrote (not %s); "
                         "prepare replaces the folder as a whole, so move it out or give another folder",
                         err_show(d->given), err_show(e->d_name),
                         atomic_tmp_base(e->d_name) ? "what a killed write left" :
                         strcmp(e->d_name, "tokenizer.bin") ? "a token shard" : "a tokenizer file");
    }
    closedir(dh);
    return rc;
}

/* Lets go of the lock (removing its file while still holding it: common/dirs.c's lockfile_try). */
static void unlock(DatasetDir *d) {
    if (d->lock_fd < 0) return;
    unlink(d->lock);
    close(d->lock_fd);
    d->lock_fd = -1;
}

/* .NAME.lock beside the folder: one prepare into a folder at a time */
static int lock(DatasetDir *d, Err *err) {
    snprintf(d->lock, sizeof d->lock, "%s/.%s.lock", d->parent, d->name);
    long pid = 0;
    int rc = lockfile_try(d->lock, &d->lock_fd, &pid, err);
    if (rc == 1)
        return err_set(err, "%s: another prepare is writing this data set (pid %ld holds %s): wait for it to finish, "
                       "or give another folder", err_show(d->given), pid, err_show(d->lock));
    return rc;
}

int dataset_dir_begin(DatasetDir *d, const char *dir, Err *err) {
    *d = (DatasetDir){.given = dir, .lock_fd = -1};
    if (resolve(d, err) || mkdir_p(d->parent, err) || lock(d, err)) return -1;
    clean_leftovers(d);
    if (check_folder(d, err)) { unlock(d); return -1; }
    snprintf(d->tmp, sizeof d->tmp, "%s/.%s.prepare-%d", d->parent, d->name, (int)getpid());
    dir_remove_tree(d->tmp);                         /* an earlier run of this process that stopped halfway */
    if (mkdir(d->tmp, 0755) != 0) {
        err_set(err, "%s: cannot create a temporary folder: %s", err_show(d->tmp), strerror(errno));
        unlock(d);
        return -1;
    }
    if (d->mode) chmod(d->tmp, (mode_t)d->mode);
    return 0;
}

void dataset_dir_abort(DatasetDir *d) {
    if (d->tmp[0] && dir_remove_tree(d->tmp) != 0)
        fprintf(stderr, "warning: cannot remove the temporary folder %s: %s\n", d->tmp, strerror(errno));
    d->tmp[0] = 0;
    unlock(d);
}


/* Puts the new folder in the old one's place (common/dirs.c); aside gets where the old one is now ("" when
   there was none). The set-aside name is the one clean_leftovers recovers from. On failure the folder is as it
   was. */
static int swap_in(const DatasetDir *d, char *aside, size_t size, Err *err) {
    char set_aside[4400];
    snprintf(set_aside, sizeof set_aside, "%s/.%s.old-%d", d->parent, d->name, (int)getpid());
    int rc = dir_swap(d->tmp, d->dir, set_aside);
    if (rc < 0) return err_set(err, "%s: cannot put the new data set in place: %s", err_show(d->given), strerror(errno));
    snprintf(aside, size, "%s", rc == 0 ? d->tmp : "");
    return 0;
}

int dataset_dir_commit(DatasetDir *d, Err *err) {
    char aside[4400];
    if (dir_sync(d->tmp) != 0) {
        err_set(err, "%s: cannot sync the new data set: %s", err_show(d->tmp), strerror(errno));
        dataset_dir_abort(d);
        return -1;
    }
    if (swap_in(d, aside, sizeof aside, err)) { dataset_dir_abort(d); return -1; }
    d->tmp[0] = 0;
    if (dir_sync(d->parent) != 0) fprintf(stderr, "warning: %s: cannot sync the folder: %s\n", d->parent, strerror(errno));
    if (aside[0] && dir_remove_tree(aside) != 0)
        fprintf(stderr, "warning: cannot remove the old data set at %s: %s (the next prepare will)\n", aside, strerror(errno));
    unlock(d);
    return 0;
}
