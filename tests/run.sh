#!/bin/sh
# Runs every test program ($TEST_DIR/test_*, default build/tests) and every shell test (tests/cli/*.sh), adds up the results,
# prints each one's time, and ends with one line: "N passed, N failed" (", N skipped" where some were skipped).
# Run from the repository root after `make`; `make test` does both.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
log=build/test-logs; mkdir -p "$log"
for t in "$TEST_DIR"/test_*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    echo "== $n"
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
    t0=$(date +%s)
    sh "$t" > "$log/cli-$n.out" 2> "$log/cli-$n.err"; rc=$?
    grep -v '^RESULT ' "$log/cli-$n.out"
    echo "   (cli/$n: $(( $(date +%s) - t0 )) s)"
    tally "cli/$n" "$log/cli-$n.out" $rc
done
if [ "$SKIPPED" -gt 0 ]; then echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"; else echo "$PASSED passed, $FAILED failed"; fi
[ "$FAILED" -eq 0 ]
