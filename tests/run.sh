#!/bin/sh
# Runs every test program ($TEST_DIR/test_*, default build/tests) and every shell test (tests/cli/*.sh), adds up the results,
# prints each one's time, and ends with one line: "N passed, N failed" (", N skipped" where some were skipped).
# The shell tests share one CUBIN cache (GPT2GEN_TEST_CACHE, default build/cache, which the test programs use too;
# the tests of the cache itself keep their own: tests/lib.sh, scratch). SKIP_TESTS, lines of NAME=WHY (NAME as
# printed below: test_gpu, cli/build), has tests not to run, each counted as one skip saying why (tests/sanitize.sh).
# Run from the repository root after `make`; `make test` does both.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
log=build/test-logs; mkdir -p "$log"
export GPT2GEN_TEST_CACHE="${GPT2GEN_TEST_CACHE:-$PWD/build/cache}"
not_here() {   # the reason NAME ($1) is in SKIP_TESTS, counted as a skip (status 0), else status 1
    why=$(printf '%s\n' "$SKIP_TESTS" | sed -n "s|^$1=||p" | head -1)
    [ -n "$why" ] && skip "$1" "$why"
}
for t in "$TEST_DIR"/test_*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    echo "== $n"
    not_here "$n" && continue
    t0=$(date +%s)
    "$t" > "$log/$n.out" 2> "$log/$n.err"; rc=$?
    grep -v '^RESULT ' "$log/$n.out"
    echo "   ($n: $(( $(date +%s) - t0 )) s)"
    grep -q '^FAIL' "$log/$n.out" && sed 's/^/    /' "$log/$n.err" | tail -20
    tally "$n" "$log/$n.out" $rc
done
for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    n=$(basename "$t" .sh)
    echo "== cli/$n"
    not_here "cli/$n" && continue
    t0=$(date +%s)
    sh "$t" > "$log/cli-$n.out" 2> "$log/cli-$n.err"; rc=$?
    grep -v '^RESULT ' "$log/cli-$n.out"
    echo "   (cli/$n: $(( $(date +%s) - t0 )) s)"
    tally "cli/$n" "$log/cli-$n.out" $rc
done
if [ "$SKIPPED" -gt 0 ]; then echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"; else echo "$PASSED passed, $FAILED failed"; fi
[ "$FAILED" -eq 0 ]
