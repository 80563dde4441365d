#include "runtime/ranks/launch.h"
#include "common/clock.h"
#include "common/files.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { LAUNCH_MAX_RANKS = 256 };

/* ---------------------------------------------------------------- our own launcher */

static const char *signal_name(int sig) {
    static const struct { int sig; const char *name; } names[] = {
        {SIGHUP, "SIGHUP"}, {SIGINT, "SIGINT"}, {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"}, {SIGTRAP, "SIGTRAP"},
        {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
        {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
        {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) return names[i].name;
    return "?";
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void close_pipes(int (*fds)[2], int n) {
    for (int i = 0; i < n; i++) { close_fd(&fds[i][0]); close_fd(&fds[i][1]); }
}

static void reap(pid_t pid) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}

static void kill_and_reap(const pid_t *pids, int n) {
    for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++) reap(pids[i]);
}

static int write_all(int fd, const void *buf, size_t len) {
    for (size_t done = 0; done < len; ) {
        ssize_t w = write(fd, (const char *)buf + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

/* Child i, just forked: keeps its own pipe's read end, puts back the caller's signal state, asks to die with
   the parent, sets the rank's variables and reads the id. Returns only on success. */
static void child_start(int i, int n, int (*fds)[2], pid_t parent, const struct sigaction *old_chld,
                        const sigset_t *old_mask, size_t len, void *id) {
    for (int j = 0; j < n; j++) { close_fd(&fds[j][1]); if (j != i) close_fd(&fds[j][0]); }
    sigaction(SIGCHLD, old_chld, NULL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(EXIT_FAIL);   /* the parent is gone */
    char v[16];
    snprintf(v, sizeof v, "%d", i);
    setenv("GPT2GEN_RANK", v, 1);
    setenv("GPT2GEN_LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", n);
    setenv("GPT2GEN_WORLD", v, 1);
    for (size_t got = 0; got < len; ) {
        ssize_t r = read(fds[i][0], (char *)id + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            fprintf(stderr, "gpt2gen: rank %d: the launcher stopped before sending the communicator id\n", i);
            _exit(EXIT_FAIL);
        }
        got += (size_t)r;
    }
    close_fd(&fds[i][0]);
}

static void signal_alive(const pid_t *pids, const char *alive, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (alive[i]) kill(pids[i], sig);
}

/* Waits for every child (SIGCHLD and SIGTERM are blocked: sigtimedwait takes them); the run's exit code. */
static int supervise(const pid_t *pids, int n, double grace_s) {
    char *alive = xmalloc((size_t)n);
    memset(alive, 1, (size_t)n);
    int n_alive = n, failed = 0, stopped = 0, killed = 0;
    double deadline = 0;
    sigset_t waitset;
    sigemptyset(&waitset);
    sigaddset(&waitset, SIGCHLD);
    sigaddset(&waitset, SIGTERM);
    while (n_alive > 0) {
        for (int i = 0; i < n; i++) {
            if (!alive[i]) continue;
            int st = 0;
            pid_t r = waitpid(pids[i], &st, WNOHANG);
            if (r == 0 || (r < 0 && errno == EINTR)) continue;
            alive[i] = 0;
            n_alive--;
            int ok = r == pids[i] && WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 130);
            if (ok) { stopped |= WEXITSTATUS(st) == 130; continue; }
            if (failed) continue;
            failed = 1;
            char what[160];
            if (r != pids[i]) snprintf(what, sizeof what, "could not be waited for: %s", strerror(errno));
            else if (WIFEXITED(st)) snprintf(what, sizeof what, "exited with code %d", WEXITSTATUS(st));
            else snprintf(what, sizeof what, "was killed by signal %d (%s)%s", WTERMSIG(st), signal_name(WTERMSIG(st)),
                          WCOREDUMP(st) ? ", core dumped" : "");
            fprintf(stderr, "gpt2gen: rank %d (pid %d) %s%s\n", i, (int)pids[i], what,
                    n_alive ? "; stopping the other ranks" : "");
            signal_alive(pids, alive, n, SIGTERM);
            deadline = now_seconds() + (grace_s > 0 ? grace_s : 0);
        }
        if (!n_alive) break;
        double wait = 0.5;   /* a lost SIGCHLD costs at most this */
        if (failed && !killed) {
            double left = deadline - now_seconds();
            if (left <= 0) { signal_alive(pids, alive, n, SIGKILL); killed = 1; }
            else if (left < wait) wait = left;
        }
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        if (sigtimedwait(&waitset, NULL, &ts) == SIGTERM && !killed) signal_alive(pids, alive, n, SIGTERM);
    }
    free(alive);
    return failed ? EXIT_FAIL : stopped ? 130 : EXIT_OK;
}

/* A pipe a rank, for the ID; -1 + err (none left open) */
static int open_pipes(int (*fds)[2], int n, Err *err) {
    for (int i = 0; i < n; i++) fds[i][0] = fds[i][1] = -1;
    for (int i = 0; i < n; i++)
        if (pipe2(fds[i], O_CLOEXEC) != 0) {
            err_set(err, "cannot launch %d ranks: pipe: %s", n, strerror(errno));
            close_pipes(fds, n);
            return -1;
        }
    return 0;
}

/* The parent, once the n children run: the ID made and written to each one's pipe, then the children supervised
   (Ctrl-C is theirs meanwhile). The parent's exit code. */
static int hand_id(pid_t *pids, int (*fds)[2], int n, double grace_s, size_t len, LaunchMakeId make_id, void *ctx,
                   void *id, Err *err) {
    struct sigaction ign, old_int, old_pipe;
    memset(&ign, 0, sizeof ign);
    sigemptyset(&ign.sa_mask);
    ign.sa_handler = SIG_IGN;
    /* Ctrl-C is the children's: they save and exit 130. Unblocked, as a blocked signal is kept even when ignored. */
    sigaction(SIGINT, &ign, &old_int);
    sigset_t just_int;
    sigemptyset(&just_int);
    sigaddset(&just_int, SIGINT);
    sigprocmask(SIG_UNBLOCK, &just_int, NULL);
    for (int i = 0; i < n; i++) close_fd(&fds[i][0]);
    int code;
    if (make_id(id, len, ctx, err) != 0) {
        fprintf(stderr, "gpt2gen: %s\n", err->msg);
        kill_and_reap(pids, n);          /* killed before their pipes close, so they print nothing */
        close_pipes(fds, n);
        code = EXIT_FAIL;
    } else {
        sigaction(SIGPIPE, &ign, &old_pipe);   /* a child already gone: supervise names it */
        for (int i = 0; i < n; i++) { write_all(fds[i][1], id, len); close_fd(&fds[i][1]); }
        sigaction(SIGPIPE, &old_pipe, NULL);
        code = supervise(pids, n, grace_s);
    }
    sigaction(SIGINT, &old_int, NULL);
    return code;
}

int launch_local(int n, double grace_s, size_t len, LaunchMakeId make_id, void *ctx, int *rank, void *id, Err *err) {
    if (n < 1 || n > LAUNCH_MAX_RANKS) return err_set(err, "cannot launch %d ranks: 1 to %d on one node", n, LAUNCH_MAX_RANKS);
    int (*fds)[2] = xmalloc((size_t)n * sizeof *fds);
    pid_t *pids = xcalloc((size_t)n, sizeof *pids);
    if (open_pipes(fds, n, err)) { free(fds); free(pids); return -1; }
    /* SIGINT, SIGTERM and SIGCHLD wait, blocked, until the parent is ready for them; a child puts back the
       caller's mask and SIGCHLD. SIGCHLD is the default while we supervise, so exited children stay to be reaped. */
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    struct sigaction dfl, old_chld;
    memset(&dfl, 0, sizeof dfl);
    sigemptyset(&dfl.sa_mask);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, &old_chld);
    fflush(NULL);
    pid_t parent = getpid();
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            child_start(i, n, fds, parent, &old_chld, &old_mask, len, id);
            free(fds); free(pids);
            *rank = i;
            return LAUNCH_CHILD;
        }
        if (pids[i] < 0) {
            err_set(err, "cannot start rank %d of %d: fork: %s", i, n, strerror(errno));
            kill_and_reap(pids, i);
            close_pipes(fds, n);
            sigaction(SIGCHLD, &old_chld, NULL);
            sigprocmask(SIG_SETMASK, &old_mask, NULL);
            free(fds); free(pids);
            return -1;
        }
    }
    int code = hand_id(pids, fds, n, grace_s, len, make_id, ctx, id, err);
    sigaction(SIGCHLD, &old_chld, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    free(fds); free(pids);
    return code;
}
