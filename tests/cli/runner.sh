#!/bin/sh
# tests/run.sh itself (a copy, in a scratch repository of stand-in tests): with TEST_JOBS=2 the tests run at once,
# yet each one's lines print in the fixed order (test programs, then shell tests), whole, with its time, a failing
# program's stderr, one failure for a crash, the SKIP_TESTS skips and the summary line; a test in ALONE runs with
# nothing beside it; TEST_JOBS=1 prints the same lines; a bad TEST_JOBS is refused; the exit code says a test failed.
. "$(dirname "$0")/../lib.sh"
scratch
R=$WORK/r
mkdir -p "$R/tests/cli" "$R/build/tests" "$R/live" && cp "$ROOT/tests/run.sh" "$ROOT/tests/lib.sh" "$R/tests/" || { fail copy; finish; }
# test_e runs alone (ALONE is run.sh's list)
sed 's/^ALONE=""$/ALONE="test_e"/' "$ROOT/tests/run.sh" > "$R/tests/run.sh"
grep -q '^ALONE="test_e"$' "$R/tests/run.sh" || fail alone_list "run.sh has no line ALONE=\"\""
# a stand-in test: NAME, then its body; it notes itself in live/ while it runs, and says who ran beside it at its start
prog() {
    { printf '#!/bin/sh\nL=%s/live; n=%s; beside=$(ls "$L" | tr "\\n" " "); touch "$L/$n"\n' "$R" "$1"; cat
      printf 'rm -f "$L/$n"\n'; } > "$2"
    chmod +x "$2"
}
# test_a: ends after test_b (which it waits for, when WAIT=1), yet prints before it
prog a "$R/build/tests/test_a" <<'EOF'
echo "ok   a1"
if [ "$WAIT" = 1 ]; then i=0; while [ ! -f "$L/../b.done" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; sleep 0.3; fi
[ -f "$L/../b.done" ] && echo "ok   a_after_b" || echo "ok   a_alone"
echo "RESULT 2 0 0"
EOF
prog b "$R/build/tests/test_b" <<'EOF'
echo "FAIL b_broke: on purpose"; echo "b's stderr" >&2; echo "RESULT 0 1 0"; touch "$L/../b.done"; rm -f "$L/$n"; exit 1
EOF
prog c "$R/build/tests/test_c" <<'EOF'
echo "FAIL c_ran: it is in SKIP_TESTS"; echo "RESULT 0 1 0"
EOF
prog d "$R/build/tests/test_d" <<'EOF'
echo "ok   d1"; rm -f "$L/$n"; exit 3
EOF
prog e "$R/build/tests/test_e" <<'EOF'
sleep 0.3; echo "ok   e_beside [$beside]"; echo "RESULT 1 0 0"
EOF
prog x "$R/tests/cli/x.sh" <<'EOF'
. "$(dirname "$0")/../lib.sh"
ok x1 "beside [$beside]"; skip x2 why; rm -f "$L/$n"; finish
EOF

runs() {   # TEST_JOBS WAIT: the runner's output in $WORK/out.$1 (times as N), its exit code in $WORK/rc.$1
    rm -f "$R"/live/* "$R/b.done"
    (cd "$R" && TEST_JOBS=$1 WAIT=$2 TEST_DIR=build/tests SKIP_TESTS="test_c=not here" sh tests/run.sh) > "$WORK/raw.$1" 2>&1
    echo $? > "$WORK/rc.$1"
    sed 's/: [0-9]* s)$/: N s)/' "$WORK/raw.$1" > "$WORK/out.$1"
}
expect() {   # A_LINE: the output expected, with test_a's line A_LINE
    cat <<EOF
== test_a
ok   a1
$1
   (test_a: N s)
== test_b
FAIL b_broke: on purpose
   (test_b: N s)
    b's stderr
== test_c
skip test_c: not here
== test_d
ok   d1
   (test_d: N s)
FAIL test_d: crashed or printed no RESULT line (see build/test-logs/test_d.out)
== test_e
ok   e_beside []
   (test_e: N s)
== cli/x
ok   x1 (beside [])
skip x2: why
   (cli/x: N s)
4 passed, 2 failed, 2 skipped
EOF
}
t0=$(date +%s); runs 2 1; dt=$(( $(date +%s) - t0 ))
expect "ok   a_after_b" > "$WORK/want.2"
if cmp -s "$WORK/want.2" "$WORK/out.2" && [ "$(cat "$WORK/rc.2")" -eq 1 ]; then ok parallel_in_order "$dt s"
else fail parallel_in_order "rc $(cat "$WORK/rc.2"), output differs: $(diff "$WORK/want.2" "$WORK/out.2" | tr '\n' '|')"; fi

runs 1 0
expect "ok   a_alone" > "$WORK/want.1"
if cmp -s "$WORK/want.1" "$WORK/out.1" && [ "$(cat "$WORK/rc.1")" -eq 1 ]; then ok serial_same_lines
else fail serial_same_lines "rc $(cat "$WORK/rc.1"), output differs: $(diff "$WORK/want.1" "$WORK/out.1" | tr '\n' '|')"; fi

# all passing: exit code 0, no skipped part in the summary
rm -f "$R/build/tests/test_b" "$R/build/tests/test_c" "$R/build/tests/test_d"
out=$(cd "$R" && TEST_JOBS=3 TEST_DIR=build/tests SKIP_TESTS="" sh tests/run.sh 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | tail -1)" = "4 passed, 0 failed, 1 skipped" ]; then ok all_pass_exit_0
else fail all_pass_exit_0 "rc $rc: $(printf '%s' "$out" | tail -3 | tr '\n' '|')"; fi

out=$(cd "$R" && TEST_JOBS=x TEST_DIR=build/tests sh tests/run.sh 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "TEST_JOBS=x: expected a whole number"; then ok bad_jobs_refused
else fail bad_jobs_refused "rc $rc: $out"; fi
finish
