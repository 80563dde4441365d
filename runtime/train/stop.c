/* stop: Ctrl-C, SIGTERM and a standard output that is gone (see stop.h). */
#include "runtime/train/stop.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t requested;
static struct sigaction old_int, old_term;

static void on_stop_signal(int sig) { if (!requested) requested = sig; }

void stop_signals(int on) {
    if (!on) { sigaction(SIGINT, &old_int, NULL); sigaction(SIGTERM, &old_term, NULL); return; }
    requested = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
}

int stop_requested(void) { return requested; }

void stop_by_other_rank(void) { if (!requested) requested = STOP_OTHER_RANK; }

const char *stop_reason(void) {
    return requested == SIGTERM ? "by SIGTERM" : requested == SIGINT ? "by Ctrl-C" : "(another rank was asked to stop)";
}

void stop_check_stdout(int *gone, const char *log_path) {
    int failed = fflush(stdout) != 0, e = errno;
    if (*gone || (!failed && !ferror(stdout))) return;
    *gone = 1;
    fprintf(stderr, "gpt2gen: standard output: %s: no more progress lines there; training goes on, and its progress "
            "goes on in %s\n", failed ? strerror(e) : "a write failed", log_path);
    if (!freopen("/dev/null", "w", stdout)) {
        /* stdout is closed then, and printing to it fails quietly */
    }
}
