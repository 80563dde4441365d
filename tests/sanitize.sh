#!/bin/sh
# tests/sanitize.sh: what `make sanitize` runs after building every program under AddressSanitizer and
# UndefinedBehaviorSanitizer into build/asan/: the CPU suite (tests/run.sh) with those programs. Every
# sanitizer report goes to a file under build/asan/reports as well as failing its program (exit code 99), so a
# finding in a run whose exit code a test does not check still fails the suite here.
cd "$(dirname "$0")/.." || exit 1
reports="$PWD/build/asan/reports"
rm -rf "$reports"; mkdir -p "$reports"
export GPT2GEN_BIN="$PWD/build/asan/gpt2gen" TEST_DIR=build/asan/tests
export ASAN_OPTIONS="detect_leaks=1:exitcode=99:log_path=$reports/asan"
export UBSAN_OPTIONS="print_stacktrace=1:exitcode=99:log_path=$reports/ubsan"
sh tests/run.sh; status=$?
if [ -n "$(ls -A "$reports")" ]; then
    echo "sanitizer reports (build/asan/reports):"
    for f in "$reports"/*; do echo "== $f"; head -30 "$f"; done
    echo "FAIL sanitize: $(ls "$reports" | wc -l) sanitizer report(s)"
    status=1
fi
exit $status
