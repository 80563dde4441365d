#!/bin/sh
# Runs every test program ($TEST_DIR/test_*, default build/tests) and every shell test (tests/cli/*.sh), adds up the results,
# prints each one's time, and ends with one line: "N passed, N failed" (", N skipped" where some were skipped).
# The shell tests share one CUBIN cache (GPT2GEN_TEST_CACHE, default build/cache, which the test programs use too;
# the tests of the cache itself keep their own: tests/lib.sh, scratch). SKIP_TESTS, lines of NAME=WHY (NAME as
# printed below: test_gpu, cli/build), has tests not to run, each counted as one skip saying why (tests/sanitize.sh).
# Run from the repository root after `make`; `make test` does both.
#
# TEST_JOBS tests run at once (default: the number of CPUs, nproc; TEST_JOBS=1 runs them one after another). Each
# one's output is kept (build/test-logs/) and printed when its turn comes, in the order above, so the output is
# the same whatever the number of jobs but for the times. Tests that run at once must not write the same paths:
# the shell tests work in their own scratch folders (tests/lib.sh, scratch), the test programs in mkdtemp folders
# or in build/<name> folders of names no other test builds (test_gpu: gt-*, golden-*; test_attention: att-*;
# test_tune and test_plan_attention: a name with their pid), and the kernel cache they share takes concurrent
# writers (each entry written whole and renamed into place; a build of one name holds a lock: gen/build.c). A test
# that cannot share the machine goes in ALONE, with the reason: it starts when nothing else runs, and nothing
# starts beside it. Beside others, the GPU's free memory is not checked (GPT2GEN_GPU_SHARED=1, as tests/gpu/pool.sh
# does for its parallel jobs), OpenMP's idle threads sleep (OMP_WAIT_POLICY=passive), and each test starts with
# SIGINT's default action, as it would in the foreground.
ALONE=""
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
log=build/test-logs; mkdir -p "$log"
export GPT2GEN_TEST_CACHE="${GPT2GEN_TEST_CACHE:-$PWD/build/cache}"
JOBS=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
case "$JOBS" in ''|*[!0-9]*|0*) echo "tests/run.sh: TEST_JOBS=$JOBS: expected a whole number of jobs, 1 or more" >&2; exit 2 ;; esac
if [ "$JOBS" -gt 1 ]; then
    export GPT2GEN_GPU_SHARED="${GPT2GEN_GPU_SHARED:-1}"
    # OpenMP's threads sleep when idle instead of spinning, which took the CPUs from the tests beside them (two
    # tests at once on 2 CPUs took longer than one after the other)
    export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
fi
# a background job ignores SIGINT and SIGQUIT (POSIX); GNU env puts them back
fg=""; env --default-signal=INT,QUIT true 2>/dev/null && fg="env --default-signal=INT,QUIT"
not_here() {   # the reason NAME ($1) is in SKIP_TESTS, counted as a skip (status 0), else status 1
    why=$(printf '%s\n' "$SKIP_TESTS" | sed -n "s|^$1=||p" | head -1)
    [ -n "$why" ] && skip "$1" "$why"
}
listed() { printf '%s\n' "$SKIP_TESTS" | grep -q "^$1="; }

# the tests, in the order they print: NAME_i (test_x, cli/x), PATH_i (the program or script), LOG_i (its logs' name)
N=0
add() { N=$((N + 1)); eval "NAME_$N=\$1 PATH_$N=\$2 LOG_$N=\$3"; }
for t in "$TEST_DIR"/test_*; do [ -x "$t" ] && add "$(basename "$t")" "$t" "$(basename "$t")"; done
for t in tests/cli/*.sh; do [ -f "$t" ] && add "cli/$(basename "$t" .sh)" "$t" "cli-$(basename "$t" .sh)"; done

# Each test runs in the background; as it ends it writes "I RC SECONDS" to a FIFO that this shell reads (fd 3).
d=$(mktemp -d "${TMPDIR:-/tmp}/gpt2gen-run.XXXXXX") && mkfifo "$d/done" && exec 3<>"$d/done" || { echo "tests/run.sh: cannot make a FIFO" >&2; exit 1; }
rm -rf "$d"
start() {   # test I in the background
    eval "n=\$NAME_$1 p=\$PATH_$1 f=\$LOG_$1"
    (
        t0=$(date +%s)
        # shellcheck disable=SC2086
        case $n in cli/*) $fg sh "$p" ;; *) $fg "$p" ;; esac > "$log/$f.out" 2> "$log/$f.err" 3>&-
        code=$?
        echo "$1 $code $(( $(date +%s) - t0 ))" >&3
    ) &
    eval "PID_$1=\$!"
}
report() {   # test I's lines, in its turn
    eval "n=\$NAME_$1 f=\$LOG_$1 rc=\$RC_$1 s=\$SECS_$1"
    echo "== $n"
    not_here "$n" && return
    grep -v '^RESULT ' "$log/$f.out"
    echo "   ($n: $s s)"
    case $n in test_*) grep -q '^FAIL' "$log/$f.out" && sed 's/^/    /' "$log/$f.err" | tail -20 ;; esac
    tally "$n" "$log/$f.out" "$rc"
}
alone() { case " $ALONE " in *" $1 "*) return 0 ;; esac; return 1; }

next=1 shown=1 running=0 solo=""
while [ $shown -le $N ]; do
    # start what may start: the next test, unless it must run alone and others run, or one runs alone now
    while [ $next -le $N ] && [ $running -lt "$JOBS" ] && [ -z "$solo" ]; do
        eval "n=\$NAME_$next"
        if listed "$n"; then eval "RC_$next=0 SECS_$next=0 DONE_$next=1"
        else
            if alone "$n"; then [ $running -gt 0 ] && break; solo=$next; fi
            start $next; running=$((running + 1))
        fi
        next=$((next + 1))
    done
    # print the ended tests whose turn it is
    while [ $shown -le $N ] && eval "[ -n \"\$DONE_$shown\" ]"; do report $shown; shown=$((shown + 1)); done
    [ $running -gt 0 ] || continue
    read -r i rc s <&3
    eval "wait \$PID_$i; RC_$i=\$rc SECS_$i=\$s DONE_$i=1"
    running=$((running - 1))
    [ "$solo" = "$i" ] && solo=""
done
exec 3>&-
if [ "$SKIPPED" -gt 0 ]; then echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"; else echo "$PASSED passed, $FAILED failed"; fi
[ "$FAILED" -eq 0 ]
