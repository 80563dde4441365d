/* Launching ranks (runtime/ranks/launch.h): our own launcher's children (the id, the rank and its variables; how
   a failure, a signal, Ctrl-C, SIGTERM or a failing make_id ends the run; children dying with their parent), and
   the id file: test_id_file.c. Children end with _exit only. The launchers' variables: test_launch_env.c. */
#include "runtime/ranks/launch.h"
#include "common/clock.h"
#include "common/files.h"
#include "tests/check.h"
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/launch_env.h"

/* ---------------------------------------------------------------- our own launcher */

enum { ID_LEN = 128 };

typedef struct { int calls; unsigned char seed; int fail; } IdCtx;

static int make_pattern(void *id, size_t len, void *ctx, Err *err) {
    IdCtx *c = ctx;
    c->calls++;
    if (c->fail) return err_set(err, "no id today");
    for (size_t i = 0; i < len; i++) ((unsigned char *)id)[i] = (unsigned char)(c->seed + 7 * i);
    return 0;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* No child of ours is left, running or a zombie. */
static int no_children(void) { return waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD; }

typedef void (*ChildFn)(int rank, const unsigned char *id, void *arg);

/* launch_local with make_pattern (failing if fail); each child runs fn (which must _exit). The parent's
   stderr goes to a file meanwhile: its text comes back in stderr_text (free it). */
typedef struct { int rc, calls; double seconds; char *stderr_text; Err err; } Run;

static Run run_local(int n, double grace, int fail, ChildFn fn, void *arg) {
    Run r = {0};
    IdCtx ctx = {0, 5, fail};
    unsigned char id[ID_LEN];
    int rank = -1;
    char path[] = "/tmp/gpt2gen-launch-err-XXXXXX";
    fflush(stderr);
    int fd = mkstemp(path), saved = dup(2);
    dup2(fd, 2);
    close(fd);
    double t0 = now_seconds();
    r.rc = launch_local(n, grace, ID_LEN, make_pattern, &ctx, &rank, id, &r.err);
    if (r.rc == LAUNCH_CHILD) { fn(rank, id, arg); _exit(99); }
    r.seconds = now_seconds() - t0;
    r.calls = ctx.calls;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    Err rerr;
    r.stderr_text = read_file(path, NULL, &rerr);
    if (!r.stderr_text) r.stderr_text = xstrdup("");
    unlink(path);
    return r;
}

/* Checks what it was given, writes its rank to <dir>/rank<i>, and exits 0 (10+ if anything was wrong). */
static void child_checks(int rank, const unsigned char *id, void *arg) {
    const char *dir = arg;
    for (int i = 0; i < ID_LEN; i++)
        if (id[i] != (unsigned char)(5 + 7 * i)) _exit(10);
    char v[16];
    snprintf(v, sizeof v, "%d", rank);
    const char *r = getenv("GPT2GEN_RANK"), *w = getenv("GPT2GEN_WORLD"), *l = getenv("GPT2GEN_LOCAL_RANK");
    if (!r || strcmp(r, v) || !w || strcmp(w, "4") || !l || strcmp(l, v)) _exit(11);
    LaunchEnv le;
    Err err;
    if (launch_env(&le, &err) || le.rank != rank || le.world != 4 || le.local_rank != rank || strcmp(le.how, "gpt2gen")) _exit(12);
    char path[600];
    snprintf(path, sizeof path, "%s/rank%d", dir, rank);
    if (write_file_atomic(path, v, strlen(v), &err)) _exit(13);
    _exit(0);
}

static void test_local_runs_ranks(void) {
    env_clear();
    char dir[] = "/tmp/gpt2gen-launch-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); env_restore(); return; }
    Run r = run_local(4, 1.0, 0, child_checks, dir);
    CHECK(r.rc == 0, "rc %d: %s", r.rc, r.stderr_text);
    CHECK(r.calls == 1, "make_id called %d times in the parent", r.calls);
    CHECK(!getenv("GPT2GEN_RANK"), "the parent's environment got GPT2GEN_RANK");
    for (int i = 0; i < 4; i++) {
        Err err;
        char path[600];
        snprintf(path, sizeof path, "%s/rank%d", dir, i);
        char *s = read_file(path, NULL, &err);
        CHECK(s && atoi(s) == i, "rank %d's file: %s", i, s ? s : err.msg);
        free(s);
        unlink(path);
    }
    CHECK(no_children(), "children left");
    rmdir(dir);
    free(r.stderr_text);
    env_restore();
}

static void child_exit3(int rank, const unsigned char *id, void *arg) {
    (void)id; (void)arg;
    if (rank == 1) { usleep(50 * 1000); _exit(3); }
    sleep(10);
    _exit(0);
}

/* A rank that exits 3 ends the run: named in one line, the sleeping ranks stopped at once. */
static void test_local_failure_stops_others(void) {
    Run r = run_local(3, 1.0, 0, child_exit3, NULL);
    const char *msg = r.stderr_text;
    CHECK(r.rc == 1, "rc %d", r.rc);
    CHECK(r.seconds < 1.0 + 5, "took %.2f s", r.seconds);
    CHECK(strstr(msg, "gpt2gen: rank 1 (pid ") && strstr(msg, "exited with code 3; stopping the other ranks\n") &&
          count(msg, "gpt2gen:") == 1, "message: %s", msg);
    CHECK(no_children(), "children left");
    free(r.stderr_text);
}

/* A pipe made before the launch: children that have set up their signals write a byte to it, and the one that
   acts first reads them, so a loaded machine cannot reorder the two. */
static int ready[2];

static void ready_wait(int n) {
    char c;
    for (int i = 0; i < n; i++)
        if (read(ready[0], &c, 1) != 1) _exit(20);
}

static void ready_say(void) {
    if (write(ready[1], "r", 1) != 1) _exit(21);
}

static void child_ignores_term(int rank, const unsigned char *id, void *arg) {
    (void)id; (void)arg;
    if (rank == 1) { ready_wait(1); usleep(100 * 1000); _exit(2); }
    signal(SIGTERM, SIG_IGN);
    ready_say();
    sleep(10);
    _exit(0);
}

/* A rank that ignores SIGTERM is SIGKILLed after the grace time. */
static void test_local_grace_then_kill(void) {
    if (pipe(ready)) { CHECK(0, "pipe"); return; }
    Run r = run_local(2, 0.3, 0, child_ignores_term, NULL);
    close(ready[0]); close(ready[1]);
    CHECK(r.rc == 1, "rc %d", r.rc);
    CHECK(r.seconds >= 0.1 + 0.3 && r.seconds < 0.3 + 5, "took %.2f s (rank 1 exits after 0.1 s, grace 0.3 s)", r.seconds);
    CHECK(strstr(r.stderr_text, "rank 1 (pid ") && strstr(r.stderr_text, "exited with code 2"), "message: %s", r.stderr_text);
    CHECK(no_children(), "children left");
    free(r.stderr_text);
}

static void child_sigkill(int rank, const unsigned char *id, void *arg) {
    (void)id; (void)arg;
    if (rank == 1) raise(SIGKILL);
    sleep(10);
    _exit(0);
}

static void test_local_killed_by_signal(void) {
    Run r = run_local(2, 1.0, 0, child_sigkill, NULL);
    CHECK(r.rc == 1, "rc %d", r.rc);
    CHECK(strstr(r.stderr_text, "gpt2gen: rank 1 (pid ") &&
          strstr(r.stderr_text, "was killed by signal 9 (SIGKILL); stopping the other ranks"), "message: %s", r.stderr_text);
    CHECK(no_children(), "children left");
    free(r.stderr_text);
}

static void child_exit_arg(int rank, const unsigned char *id, void *arg) {
    (void)id;
    const int *codes = arg;
    usleep(20 * 1000 * rank);
    _exit(codes[rank]);
}

static volatile sig_atomic_t got_sigint;
static void on_sigint(int sig) { (void)sig; got_sigint = 1; }

static void child_sends_sigint(int rank, const unsigned char *id, void *arg) {
    (void)id; (void)arg;
    if (rank == 0) kill(getppid(), SIGINT);
    usleep(100 * 1000);
    _exit(130);
}

/* 130 (stopped by Ctrl-C after saving) from every rank, or from some with 0 from the others, is 130; the
   parent ignores a SIGINT meanwhile and puts the caller's handler back. */
static void test_local_ctrl_c(void) {
    int codes[3][3] = {{130, 130, 130}, {0, 130, 0}, {0, 0, 0}}, want[3] = {130, 130, 0};
    for (int i = 0; i < 3; i++) {
        Run r = run_local(3, 1.0, 0, child_exit_arg, codes[i]);
        CHECK(r.rc == want[i] && !r.stderr_text[0], "codes %d %d %d: rc %d, stderr '%s'", codes[i][0], codes[i][1],
              codes[i][2], r.rc, r.stderr_text);
        free(r.stderr_text);
    }
    struct sigaction sa, old, now;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    got_sigint = 0;
    Run r = run_local(2, 1.0, 0, child_sends_sigint, NULL);
    free(r.stderr_text);
    sigaction(SIGINT, NULL, &now);
    CHECK(r.rc == 130 && !got_sigint, "SIGINT to the parent: rc %d, handler ran %d", r.rc, (int)got_sigint);
    CHECK(now.sa_handler == on_sigint, "the SIGINT handler was not put back");
    sigaction(SIGINT, &old, NULL);
    CHECK(no_children(), "children left");
}

static void on_sigterm_exit130(int sig) { (void)sig; _exit(130); }

static void child_sends_sigterm(int rank, const unsigned char *id, void *arg) {
    (void)id; (void)arg;
    signal(SIGTERM, on_sigterm_exit130);
    if (rank == 0) { ready_wait(2); kill(getppid(), SIGTERM); }
    else ready_say();
    sleep(10);
    _exit(0);
}

/* A SIGTERM to the parent reaches every child (here they exit 130 on it); the parent lives on. */
static void test_local_sigterm_forwarded(void) {
    if (pipe(ready)) { CHECK(0, "pipe"); return; }
    Run r = run_local(3, 1.0, 0, child_sends_sigterm, NULL);
    close(ready[0]); close(ready[1]);
    free(r.stderr_text);
    CHECK(r.rc == 130 && r.seconds < 5, "rc %d after %.2f s", r.rc, r.seconds);
    sigset_t mask;
    sigprocmask(SIG_SETMASK, NULL, &mask);
    CHECK(!sigismember(&mask, SIGTERM) && !sigismember(&mask, SIGCHLD), "the signal mask was not put back");
    CHECK(no_children(), "children left");
}

static void child_never_runs(int rank, const unsigned char *id, void *arg) {
    (void)rank; (void)id; (void)arg;
    _exit(0);
}

/* A failing make_id is printed; the children are killed (and print nothing) and reaped. */
static void test_local_make_id_fails(void) {
    Run r = run_local(3, 1.0, 1, child_never_runs, NULL);
    CHECK(r.rc == 1 && r.calls == 1, "rc %d, %d calls", r.rc, r.calls);
    CHECK(!strcmp(r.stderr_text, "gpt2gen: no id today\n"), "message: %s", r.stderr_text);
    CHECK(no_children(), "children left");
    free(r.stderr_text);
}

static void test_local_bad_n(void) {
    const int ns[] = {0, 257, -1};
    for (int i = 0; i < 3; i++) {
        char want[32];
        snprintf(want, sizeof want, "launch %d ranks", ns[i]);
        Run r = run_local(ns[i], 1.0, 0, child_never_runs, NULL);
        CHECK(r.rc == -1 && strstr(r.err.msg, want) && r.calls == 0 && !r.stderr_text[0], "%d: rc %d, %s", ns[i], r.rc, r.err.msg);
        free(r.stderr_text);
    }
    CHECK(no_children(), "something was forked");
}

static void child_writes_pid_and_waits(int rank, const unsigned char *id, void *arg) {
    (void)id;
    char path[600], v[32];
    snprintf(path, sizeof path, "%s/pid%d", (const char *)arg, rank);
    snprintf(v, sizeof v, "%d", (int)getpid());
    Err err;
    if (write_file_atomic(path, v, strlen(v), &err)) _exit(1);
    sleep(10);
    _exit(0);
}

/* The children get SIGTERM when their parent is SIGKILLed (the test process is their subreaper, so it
   reaps them). */
static void test_local_children_die_with_parent(void) {
    char dir[] = "/tmp/gpt2gen-launch-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    fflush(NULL);
    pid_t helper = fork();
    if (helper == 0) {
        IdCtx ctx = {0, 5, 0};
        unsigned char id[ID_LEN];
        int rank;
        Err err;
        if (launch_local(2, 1.0, ID_LEN, make_pattern, &ctx, &rank, id, &err) == LAUNCH_CHILD)
            child_writes_pid_and_waits(rank, id, dir);
        _exit(1);
    }
    pid_t kids[2] = {0, 0};
    double t0 = now_seconds();
    while ((!kids[0] || !kids[1]) && now_seconds() - t0 < 10) {
        for (int i = 0; i < 2; i++) {
            char path[600];
            snprintf(path, sizeof path, "%s/pid%d", dir, i);
            Err err;
            char *s = file_exists(path) ? read_file(path, NULL, &err) : NULL;
            if (s) kids[i] = atoi(s);
            free(s);
        }
        usleep(10 * 1000);
    }
    CHECK(kids[0] > 0 && kids[1] > 0, "the children did not start");
    kill(helper, SIGKILL);
    waitpid(helper, NULL, 0);
    for (int i = 0; i < 2; i++) {
        if (kids[i] <= 0) continue;
        int st = 0;
        pid_t r = 0;
        for (t0 = now_seconds(); (r = waitpid(kids[i], &st, WNOHANG)) == 0 && now_seconds() - t0 < 5; ) usleep(10 * 1000);
        if (r == 0) { kill(kids[i], SIGKILL); waitpid(kids[i], NULL, 0); }
        CHECK(r == kids[i] && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "rank %d: r %d, status %#x", i, (int)r, st);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    for (int i = 0; i < 2; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/pid%d", dir, i);
        unlink(path);
    }
    rmdir(dir);
    CHECK(no_children(), "children left");
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_local_runs_ranks);
    RUN(test_local_failure_stops_others);
    RUN(test_local_grace_then_kill);
    RUN(test_local_killed_by_signal);
    RUN(test_local_ctrl_c);
    RUN(test_local_sigterm_forwarded);
    RUN(test_local_make_id_fails);
    RUN(test_local_bad_n);
    RUN(test_local_children_die_with_parent);
    return check_summary();
}
