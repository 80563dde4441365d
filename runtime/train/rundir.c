/* rundir: the run directory, its lock, its leftovers and its checkpoint steps (see rundir.h). */
#include "runtime/train/rundir.h"
#include "common/dirs.h"
#include "common/files.h"
#include "runtime/train/metrics.h"
#include "runtime/train/plot.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void rundir_paths(const char *dir, int step, char model[RUNDIR_PATH_MAX], char state[RUNDIR_PATH_MAX]) {
    snprintf(model, RUNDIR_PATH_MAX, "%s/model_%08d.bin", dir, step);
    snprintf(state, RUNDIR_PATH_MAX, "%s/state_%08d.bin", dir, step);
}

void rundir_rank_state(const char *dir, int step, int rank, char path[RUNDIR_PATH_MAX]) {
    if (rank == 0) snprintf(path, RUNDIR_PATH_MAX, "%s/state_%08d.bin", dir, step);
    else snprintf(path, RUNDIR_PATH_MAX, "%s/state_%08d.r%d.bin", dir, step, rank);
}

void rundir_done(const char *dir, int step, char path[RUNDIR_PATH_MAX]) {
    snprintf(path, RUNDIR_PATH_MAX, "%s/done_%08d.bin", dir, step);
}

static void lock_path(const RunDir *rd, char path[RUNDIR_PATH_MAX]) { snprintf(path, RUNDIR_PATH_MAX, "%s/run.lock", rd->dir); }

/* The step of a checkpoint file's name ("model_<digits>.bin", "state_<digits>.bin", a rank's
   "state_<digits>.r<rank>.bin" or the marker "done_<digits>.bin"), or -1. The rest of the name after ".bin" is
   returned in *tail ("", or ".tmp.<pid>.<hex>" for a leftover). */
static int step_of(const char *name, const char **tail) {
    const char *p;
    if (!strncmp(name, "model_", 6) || !strncmp(name, "state_", 6)) p = name + 6;
    else if (!strncmp(name, "done_", 5)) p = name + 5;
    else return -1;
    const char *digits = p;
    long step = 0;
    for (; *p >= '0' && *p <= '9' && step <= 0x7fffffff; p++) step = step * 10 + (*p - '0');
    if (p == digits || step > 0x7fffffff) return -1;
    if (name[0] == 's' && p[0] == '.' && p[1] == 'r' && p[2] >= '0' && p[2] <= '9')
        for (p += 2; *p >= '0' && *p <= '9'; p++) {}
    if (strncmp(p, ".bin", 4)) return -1;
    *tail = p + 4;
    return (int)step;
}

static int desc(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x < y) - (x > y); }

int rundir_steps(const char *dir, int **steps) {
    int n = 0, cap = 16;
    *steps = xmalloc(cap * sizeof **steps);
    DIR *d = opendir(dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *tail;
        int step = step_of(e->d_name, &tail);
        if (step < 0 || *tail) continue;
        if (n == cap) { int *p = xmalloc(2 * cap * sizeof *p); memcpy(p, *steps, n * sizeof *p); free(*steps); *steps = p; cap *= 2; }
        (*steps)[n++] = step;
    }
    closedir(d);
    qsort(*steps, n, sizeof **steps, desc);
    int u = 0;                                /* one entry per step: a pair's two files name it twice */
    for (int i = 0; i < n; i++) if (!u || (*steps)[u - 1] != (*steps)[i]) (*steps)[u++] = (*steps)[i];
    return u;
}

/* Removes the temporary files of saves (model_*.bin.tmp.<pid>.<hex>, state_*.bin.tmp.<pid>.<hex>, ...) that are
   provably a killed save's (atomic_leftover); the caller holds the lock. */
static void remove_leftovers(const RunDir *rd) {
    DIR *d = opendir(rd->dir);
    if (!d) return;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *tail;
        size_t base = atomic_tmp_base(e->d_name);
        if (!base || step_of(e->d_name, &tail) < 0 || tail != e->d_name + base || !atomic_leftover(rd->dir, e->d_name)) continue;
        char path[RUNDIR_PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", rd->dir, e->d_name);
        removed += unlink(path) == 0;
    }
    closedir(d);
    if (removed) printf("removed %d leftover temporary file%s of an interrupted save from %s\n", removed, removed > 1 ? "s" : "", rd->dir);
}

static int take_lock(RunDir *rd, Err *err) {
    char path[RUNDIR_PATH_MAX];
    lock_path(rd, path);
    long pid = 0;
    int rc = lockfile_try(path, &rd->lock_fd, &pid, err), e = errno;
    if (rc < 0) {
        /* the hint fits the cause: a full disk is not a permissions problem */
        const char *hint = e == ENOSPC || e == EDQUOT ? " (the file system of checkpoint.dir is full, or its quota is: "
                                                        "free space there, or use another checkpoint.dir)"
                         : e == EACCES || e == EPERM || e == EROFS ? " (checkpoint.dir must be a directory this user can write)"
                         : "";
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return err_set(err, "%s%s", why, hint);
    }
    if (rc == 1)
        return err_set(err, "%s is in use by another run (pid %ld holds %s); wait for it to finish, or use another checkpoint.dir",
                       rd->dir, pid, path);
    if (pid > 0 && pid != (long)getpid())
        printf("note: %s names pid %ld, which no longer holds it (a run that was stopped without cleaning up); taking it over\n", path, pid);
    return 0;
}

int rundir_held(const char *dir, int *newest) {
    int *steps, n = rundir_steps(dir, &steps);
    *newest = n ? steps[0] : -1;
    free(steps);
    return n;
}

void rundir_held_text(int count, int newest, int steps, char *out, size_t n) {
    char of[32] = "";
    if (steps > 0) snprintf(of, sizeof of, " of %d", steps);
    if (count == 1) snprintf(out, n, "1 checkpoint, at step %d%s", newest, of);
    else snprintf(out, n, "%d checkpoints, the last at step %d%s", count, newest, of);
}

#define FRESH_REMOVES "its checkpoints, metrics.jsonl and plot.svg"
/* a run's own files beside its checkpoints, which starting over (or a run that made nothing) removes */
static const char *const RUN_LOGS[] = {"metrics.jsonl", "plot.svg"};
#define N_RUN_LOGS ((int)(sizeof RUN_LOGS / sizeof RUN_LOGS[0]))

int rundir_refuse(const char *dir, int count, int newest, int steps, Err *err) {
    char held[96];
    rundir_held_text(count, newest, steps, held, sizeof held);
    if (steps > 0 && newest >= steps)
        return err_set(err, "%s holds an earlier run, finished: %s; start it over with --fresh (which removes " FRESH_REMOVES
                       "), train on with --resume and a larger train.steps, or use another checkpoint.dir", dir, held);
    return err_set(err, "%s holds an earlier run: %s; continue it with --resume, start it over with --fresh (which removes "
                   FRESH_REMOVES "), or use another checkpoint.dir", dir, held);
}

/* Without resume, a directory with checkpoints belongs to an earlier run. */
static int refuse_overwrite(const RunDir *rd, Err *err) {
    int newest, n = rundir_held(rd->dir, &newest);
    return n ? rundir_refuse(rd->dir, n, newest, 0, err) : 0;
}

/* Removes an earlier run's files (the caller holds the lock): every checkpoint file (models, states, the ranks'
   state shards, markers), metrics.jsonl and plot.svg; other files stay. Says what it removed. */
static int remove_earlier_run(const RunDir *rd, Err *err) {
    int newest, count = rundir_held(rd->dir, &newest), files = 0;
    char path[RUNDIR_PATH_MAX + 256];
    for (int i = 0; i < N_RUN_LOGS; i++) {   /* a log of the same name that gpt2gen did not write is kept: refused */
        snprintf(path, sizeof path, "%s/%s", rd->dir, RUN_LOGS[i]);
        int ours = i == 0 ? metrics_is_ours(path) : plot_is_ours(path);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && !ours)
            return err_set(err, "%s: not the %s gpt2gen writes, so --fresh does not remove it: move it away, or use "
                           "another checkpoint.dir", err_show(path), i == 0 ? "metrics log" : "plot");
    }
    DIR *d = opendir(rd->dir);
    if (!d) return err_set(err, "checkpoint.dir: %s: cannot list it: %s", rd->dir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; (e = readdir(d)) && !rc;) {
        const char *tail;
        if (step_of(e->d_name, &tail) < 0 || *tail) continue;
        snprintf(path, sizeof path, "%s/%s", rd->dir, e->d_name);
        if (unlink(path) == 0) files++;
        else if (errno != ENOENT) rc = err_set(err, "%s: cannot remove it (to start over): %s", path, strerror(errno));
    }
    closedir(d);
    char also[64] = "";
    for (int i = 0; i < N_RUN_LOGS && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", rd->dir, RUN_LOGS[i]);
        if (unlink(path) == 0) snprintf(also + strlen(also), sizeof also - strlen(also), "%s%s", also[0] ? " and " : "", RUN_LOGS[i]);
        else if (errno != ENOENT) rc = err_set(err, "%s: cannot remove it (to start over): %s", path, strerror(errno));
    }
    if (rc) return -1;
    char held[96] = "";
    if (count) {
        rundir_held_text(count, newest, 0, held, sizeof held);
        snprintf(held + strlen(held), sizeof held - strlen(held), " (%d file%s)%s", files, files == 1 ? "" : "s", also[0] ? ", " : "");
    }
    if (count || also[0]) printf("starting over: removed the earlier run from %s: %s%s\n", rd->dir, held, also);
    return 0;
}

/* The outermost folder of dir that is not there yet (made empty when dir is): what mkdir_p will create. */
static void outermost_missing(const char *dir, char *made, size_t n) {
    char path[RUNDIR_DIR_MAX];
    snprintf(path, sizeof path, "%s", dir);
    made[0] = 0;
    for (size_t i = 1, len = strlen(path); i <= len; i++) {
        if (path[i] != '/' && path[i] != 0) continue;
        char c = path[i];
        struct stat st;
        path[i] = 0;
        int missing = stat(path, &st) != 0 && errno == ENOENT;
        path[i] = c;
        if (missing) { snprintf(made, n, "%.*s", (int)i, path); return; }
    }
}

/* Removes the folders rundir_open created, innermost first, while they are empty (rmdir: never anything in them). */
static void remove_made(RunDir *rd) {
    if (!rd->made[0]) return;
    char path[RUNDIR_DIR_MAX];
    snprintf(path, sizeof path, "%s", rd->dir);
    size_t keep = strlen(rd->made), len = strlen(path);
    while (len > keep && path[len - 1] == '/') path[--len] = 0;
    while (rmdir(path) == 0 && len > keep) {
        while (len > keep && path[len - 1] != '/') len--;   /* the last name off, then the slashes before it */
        while (len > keep && path[len - 1] == '/') len--;
        path[len] = 0;
    }
    rd->made[0] = 0;
}

int rundir_open(RunDir *rd, const char *dir, int mode, Err *err) {
    rd->lock_fd = -1;
    snprintf(rd->dir, sizeof rd->dir, "%s", dir);
    outermost_missing(dir, rd->made, sizeof rd->made);
    struct stat st;
    Err e;
    if (mkdir_p(dir, &e)) { remove_made(rd); return err_set(err, "checkpoint.dir: %s", e.msg); }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(err, "checkpoint.dir: %s: not a directory", dir);
    if (take_lock(rd, err)) { remove_made(rd); return -1; }
    int rc = access(dir, W_OK | X_OK) != 0 ? err_set(err, "checkpoint.dir: %s: cannot write there: %s", dir, strerror(errno)) : 0;
    if (!rc) remove_leftovers(rd);
    if (!rc && mode == RUNDIR_FRESH) rc = remove_earlier_run(rd, err);
    if (!rc && mode == RUNDIR_NEW) rc = refuse_overwrite(rd, err);
    if (rc) { rundir_close(rd); remove_made(rd); }
    return rc;
}

void rundir_discard(RunDir *rd) {
    int newest;
    if (rd->made[0] && rundir_held(rd->dir, &newest) == 0) {
        char path[RUNDIR_PATH_MAX];
        for (int i = 0; i < N_RUN_LOGS; i++) { snprintf(path, sizeof path, "%s/%s", rd->dir, RUN_LOGS[i]); unlink(path); }
    }
    rundir_close(rd);
    remove_made(rd);
}

void rundir_close(RunDir *rd) {
    if (rd->lock_fd < 0) return;
    char path[RUNDIR_PATH_MAX];
    lock_path(rd, path);
    unlink(path);                              /* while still holding it: see lockfile_try (common/dirs.c) */
    close(rd->lock_fd);
    rd->lock_fd = -1;
}

void rundir_sync(const RunDir *rd) {
    if (dir_sync(rd->dir)) {}                  /* some file systems cannot sync a directory; the files are synced */
}
