/* The communicator's id through a shared file, for ranks that mpirun or srun started (runtime/ranks/launch.h).
 *
 * The file is text, so that a rank can tell rank 0's file of this job from anything else at that path:
 *
 *     gpt2gen-id-file 1
 *     world 2
 *     job 4242.0
 *     host node17
 *     pid 31337
 *     id 0a1b...        (the id's bytes in hex)
 *
 * Rank 0 never replaces a file that is not an id file (a user's file at GPT2GEN_NCCL_ID_FILE), nor one of a rank
 * 0 that still runs on this host; an id file whose rank 0 is gone, or of another job, is stale and replaced.
 * Every other rank answers rank 0's file of its job beside it, in "<path>.rank<r>": "ok", or "refused" and why (a
 * world size that is not rank 0's), so that rank 0 stops at once too, with the rank's reason, instead of waiting
 * for its timeout. */
#include "runtime/ranks/launch.h"
#include "common/clock.h"
#include "common/files.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ID_FILE_MAGIC "gpt2gen-id-file 1"
enum { ID_MAX = 512 };   /* bytes of id a file may hold: NCCL's is 128 */

typedef struct {
    int world, pid;
    char job[128], host[256];
    unsigned char id[ID_MAX];
    size_t id_len;
} IdFile;

void launch_job_token(const char *job, char *out, size_t cap) {
    size_t i = 0;
    for (; job[i] && i < cap - 1; i++) {
        char c = job[i];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
        out[i] = keep ? c : '_';
    }
    out[i] = 0;
    if (!i) snprintf(out, cap, "-");
}

static void this_host(char *out, size_t cap) {
    if (gethostname(out, cap) != 0) snprintf(out, cap, "unknown");
    out[cap - 1] = 0;
    for (char *p = out; *p; p++) if (*p <= ' ' || *p > '~') *p = '_';
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* 0 when text[0..n) is an id file; -1 otherwise (any bytes: nothing of them is printed) */
static int id_file_parse(const char *text, size_t n, IdFile *f) {
    int at = 0;
    memset(f, 0, sizeof *f);
    if (strlen(text) != n ||
        sscanf(text, ID_FILE_MAGIC "\nworld %d\njob %127s\nhost %255s\npid %d\nid %n", &f->world, f->job, f->host, &f->pid, &at) != 4 ||
        !at || f->world < 1 || f->pid < 1)
        return -1;
    const char *p = text + at;
    for (; hex_digit(p[0]) >= 0 && hex_digit(p[1]) >= 0 && f->id_len < ID_MAX; p += 2)
        f->id[f->id_len++] = (unsigned char)(hex_digit(p[0]) * 16 + hex_digit(p[1]));
    return f->id_len && !strcmp(p, "\n") ? 0 : -1;
}

/* Reads the id file at path: 0 with *f; 1 when there is none; -1 with err when something else is there (rank 0:
   which it does not replace) */
static int id_file_read(const char *path, int rank0, IdFile *f, Err *err) {
    size_t n = 0;
    char *text = read_file_max(path, LAUNCH_ID_FILE_MAX, &n, err);
    if (!text) return errno == ENOENT ? 1 : -1;
    int bad = id_file_parse(text, n, f);
    free(text);
    errno = EINVAL;
    if (bad) return err_set(err, "%s: not an id file of gpt2gen's (%zu bytes that do not start with its \"" ID_FILE_MAGIC
                            "\" line)%s: remove it, or name another path in GPT2GEN_NCCL_ID_FILE", path, n,
                            rank0 ? "; rank 0 does not replace it" : "");
    return 0;
}

/* Whether f's rank 0 runs on this host (a file from another host: it cannot be asked) */
static int id_file_alive(const IdFile *f) {
    char host[256];
    this_host(host, sizeof host);
    return strcmp(f->host, host) ? -1 : kill(f->pid, 0) == 0 || errno == EPERM;
}

int launch_id_file_claim(const char *path, char *note, size_t cap, Err *err) {
    IdFile f;
    if (cap) note[0] = 0;
    int rc = id_file_read(path, 1, &f, err);
    if (rc) return rc > 0 ? 0 : -1;
    if (f.pid == (int)getpid() && id_file_alive(&f) == 1) return 0;   /* our own */
    if (id_file_alive(&f) == 1)
        return err_set(err, "%s: the id file of job %s, whose rank 0 (pid %d) still runs: one id file per job (set "
                       "GPT2GEN_NCCL_ID_FILE to another path)", path, f.job, f.pid);
    if (unlink(path) != 0 && errno != ENOENT) return err_set(err, "%s: cannot remove the stale id file: %s", path, strerror(errno));
    snprintf(note, cap, "%s: replacing a stale id file (job %s, rank 0 was pid %d on %s, which is gone)", path, f.job, f.pid, f.host);
    return 0;
}

/* "<path>.rank<r>": rank r's answer to rank 0's id file */
static int answer_path(const char *path, int rank, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s.rank%d", path, rank);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static void answer(const char *path, int rank, const char *text) {
    char p[LAUNCH_ID_FILE_MAX + 32];
    Err ignore;
    if (answer_path(path, rank, p, sizeof p) == 0) write_file_atomic(p, text, strlen(text), &ignore);
}

static void answers_remove(const char *path, int world) {
    char p[LAUNCH_ID_FILE_MAX + 32];
    for (int r = 1; r < world; r++)
        if (answer_path(path, r, p, sizeof p) == 0) unlink(p);
}

int launch_id_file_answers(const char *path, int world, double timeout_s, Err *err) {
    char *seen = xcalloc((size_t)world, 1), p[LAUNCH_ID_FILE_MAX + 32];
    int got = 1, rc = 0;
    double t0 = now_seconds();
    while (got < world && rc == 0) {
        for (int r = 1; r < world && rc == 0; r++) {
            size_t n;
            Err why;
            char *text = seen[r] || answer_path(path, r, p, sizeof p) ? NULL : read_file_max(p, LAUNCH_ID_FILE_MAX, &n, &why);
            if (!text) continue;
            seen[r] = 1;
            got++;
            if (strncmp(text, "ok", 2)) rc = err_set(err, "rank %d refused the id file %s: %s", r, path, text);
            free(text);
        }
        if (got < world && rc == 0 && now_seconds() - t0 >= timeout_s) {
            int r = 1;
            while (seen[r]) r++;
            rc = err_set(err, "%s: %d of the %d other ranks did not read the id file within %g s (rank %d first): did they "
                         "start, with this path on a file system they share?", path, world - got, world - 1, timeout_s, r);
        }
        if (got < world && rc == 0) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    answers_remove(path, world);
    free(seen);
    return rc;
}

static int id_file_write(const char *path, const LaunchEnv *le, const void *id, size_t len, Err *err) {
    if (len > ID_MAX) return err_set(err, "an id of %zu bytes: at most %d", len, ID_MAX);
    char note[1];
    if (launch_id_file_claim(path, note, 0, err)) return -1;
    char job[sizeof le->job], host[256], text[LAUNCH_ID_FILE_MAX];
    launch_job_token(le->job, job, sizeof job);
    this_host(host, sizeof host);
    int n = snprintf(text, sizeof text, ID_FILE_MAGIC "\nworld %d\njob %s\nhost %s\npid %d\nid ", le->world, job, host, (int)getpid());
    for (size_t i = 0; i < len; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%02x", ((const unsigned char *)id)[i]);
    n += snprintf(text + n, sizeof text - (size_t)n, "\n");
    answers_remove(path, le->world);   /* an earlier run's */
    return write_file_atomic(path, text, (size_t)n, err);
}

/* A file that came before this rank started and names another job, or whose rank 0 is gone: rank 0 replaces it */
static int id_file_stale(const IdFile *f, const char *job, const struct stat *st, time_t started) {
    return id_file_alive(f) == 0 || (strcmp(f->job, job) && st->st_mtime < started);
}

int launch_share_id_file(const char *path, const LaunchEnv *le, void *id, size_t len, double timeout_s, Err *err) {
    if (le->rank == 0) return id_file_write(path, le, id, len, err);
    double t0 = now_seconds();
    time_t started = time(NULL);
    char job[sizeof le->job], stale[512] = "";
    launch_job_token(le->job, job, sizeof job);
    for (;;) {
        struct stat st;
        IdFile f;
        int rc = stat(path, &st) == 0 ? id_file_read(path, 0, &f, err) : 1;
        if (rc < 0 && errno != ENOENT) return -1;   /* gone between stat and open: look again */
        if (rc == 0 && id_file_stale(&f, job, &st, started))
            snprintf(stale, sizeof stale, "; the file there is a stale one (job %s, rank 0 pid %d on %s)", f.job, f.pid, f.host);
        else if (rc == 0 && strcmp(f.job, job))
            return err_set(err, "%s: rank 0 is of job %s, this rank (%d) of job %s: the ranks of one run must share the "
                           "job", path, f.job, le->rank, job);
        else if (rc == 0 && (f.world != le->world || f.id_len != len)) {   /* rank 0 of this job: it is told why */
            if (f.world != le->world)
                err_set(err, "%s: rank 0 was started in a world of %d ranks, this rank (%d) in one of %d (%s): every rank "
                        "must be started with the same world size", path, f.world, le->rank, le->world, le->how);
            else err_set(err, "%s: an id of %zu bytes, not %zu", path, f.id_len, len);
            char why[sizeof err->msg + 16];
            snprintf(why, sizeof why, "refused: %s", err->msg);
            if (le->rank < f.world) answer(path, le->rank, why);   /* a rank past rank 0's world has no place there */
            return -1;
        } else if (rc == 0) {
            memcpy(id, f.id, len);
            answer(path, le->rank, "ok");
            return 0;
        }
        if (now_seconds() - t0 >= timeout_s) break;
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    return err_set(err, "%s: rank 0 did not write the id file within %g s (is the path on a file system every node "
                   "shares?)%s", path, timeout_s, stale);
}

void launch_id_file_remove(const char *path) {
    IdFile f;
    Err err;
    /* only our own: a later job's rank 0 may have taken the path since */
    if (id_file_read(path, 0, &f, &err) == 0 && f.pid == (int)getpid() && id_file_alive(&f) == 1) unlink(path);
}

int launch_id_file_path(const LaunchEnv *le, const char *id_file, const char *dir, char *out, size_t cap, Err *err) {
    int n;
    if (id_file && *id_file) n = snprintf(out, cap, "%s", id_file);
    else if (!le->job[0])
        return err_set(err, "%s gives no job id to name the NCCL id file after; set GPT2GEN_NCCL_ID_FILE to a path "
                       "on a file system every node shares", le->how);
    else {
        char job[sizeof le->job];
        launch_job_token(le->job, job, sizeof job);
        n = snprintf(out, cap, "%s/.nccl-id-%s", dir && *dir ? dir : ".", job);
    }
    if (n < 0 || (size_t)n >= cap) return err_set(err, "the NCCL id file's path is too long (at most %zu bytes)", cap ? cap - 1 : 0);
    return 0;
}
