#!/bin/sh
# Runs every test program (build/tests/test_*) and every shell test (tests/cli/*.sh), adds up the results,
# and ends with one line: "N passed, N failed" (", N skipped" where some were skipped).
# Run from the repository root after `make`; `make test` does both.
cd "$(dirname "$0")/.." || exit 1
passed=0; failed=0; skipped=0
log=build/test-logs; mkdir -p "$log"
count() {   # $1 = name, $2 = output file
    r=$(grep '^RESULT ' "$2" | tail -1)
    if [ -z "$r" ]; then echo "FAIL $1: crashed or printed no RESULT line (see $2)"; failed=$((failed + 1)); return; fi
    set -- $r
    passed=$((passed + $2)); failed=$((failed + $3)); skipped=$((skipped + $4))
}
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    echo "== $n"
    "$t" > "$log/$n.out" 2> "$log/$n.err"
    grep -v '^RESULT ' "$log/$n.out"
    grep -q '^FAIL' "$log/$n.out" && sed 's/^/    /' "$log/$n.err" | tail -20
    count "$n" "$log/$n.out"
done
for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    n=$(basename "$t" .sh)
    echo "== cli/$n"
    sh "$t" > "$log/cli-$n.out" 2> "$log/cli-$n.err"
    grep -v '^RESULT ' "$log/cli-$n.out"
    count "cli/$n" "$log/cli-$n.out"
done
if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"; else echo "$passed passed, $failed failed"; fi
[ "$failed" -eq 0 ]
