# tests/lib.sh: the shell side of the one test reporter (tune/report.h is the C side). Sourced by the shell
# tests (tests/cli/*.sh, tests/gpu/e2e.sh) and by the runners that add their results up (tests/run.sh,
# tests/gpu.sh). The lines are the C reporter's:
#
#   ok NAME [DETAIL]   prints "ok   NAME" (or "ok   NAME (DETAIL)") and counts a pass
#   fail NAME WHY      prints "FAIL NAME: WHY" and counts a failure
#   skip NAME WHY      prints "skip NAME: WHY" and counts a skip
#   finish             prints "RESULT <passed> <failed> <skipped>", removes $WORK, exits (1 if anything failed)
#   scratch [own-cache] makes $WORK, a fresh scratch folder, for the test to work in. Its CUBIN cache is the suite's
#                      ($GPT2GEN_TEST_CACHE, which tests/run.sh sets: a kernel compiled once serves every test and
#                      both passes of CI) where that is set, else its own; `own-cache` (the tests of the cache
#                      itself) always gives it its own, empty one.
#   tally NAME FILE RC adds one sub-run's results (its output in FILE, its exit code RC) to the counts: those of
#                      its last "RESULT p f s" line. A sub-run without one crashed or stopped early, and one that
#                      exited non-zero with no failure counted went wrong outside its tests: each is one more
#                      failure, "FAIL NAME: why (see FILE)". Sets TALLY_P, TALLY_F, TALLY_S (this sub-run's
#                      counts) and TALLY_NOTE (why it failed as a whole, or empty).
#   wait_steps DIR N   waits (60 s at most) until a run's DIR/metrics.jsonl holds N step records; 1 if it never does
# PASSED, FAILED and SKIPPED hold the counts; ROOT is the repository root and GPT2GEN its binary ($GPT2GEN_BIN
# when set: `make sanitize` runs the suite with the sanitizer build), TEST_DIR the folder of the test programs.

ROOT=$(cd "$(dirname "$0")" && while [ ! -f tests/lib.sh ] && [ "$PWD" != / ]; do cd ..; done; pwd)
GPT2GEN=${GPT2GEN_BIN:-$ROOT/gpt2gen}
TEST_DIR=${TEST_DIR:-build/tests}
PASSED=0; FAILED=0; SKIPPED=0
WORK=""

ok() {
    PASSED=$((PASSED + 1))
    if [ -n "$2" ]; then echo "ok   $1 ($2)"; else echo "ok   $1"; fi
}
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1${2:+: $2}"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "skip $1${2:+: $2}"; }
finish() {
    echo "RESULT $PASSED $FAILED $SKIPPED"
    [ -n "$WORK" ] && rm -rf "$WORK"
    [ "$FAILED" -eq 0 ] && exit 0
    exit 1
}

scratch() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpt2gen-test.XXXXXX") || { echo "cannot make a scratch folder" >&2; exit 1; }
    if [ "$1" != own-cache ] && [ -n "$GPT2GEN_TEST_CACHE" ]; then export GPT2GEN_CACHE="$GPT2GEN_TEST_CACHE"
    else export GPT2GEN_CACHE="$WORK/cache"; fi
    unset GPT2GEN_TEMPLATES
}

tally() {
    TALLY_P=0; TALLY_F=0; TALLY_S=0; TALLY_NOTE=""
    # shellcheck disable=SC2046
    set -- "$1" "$2" "$3" $(grep '^RESULT ' "$2" | tail -1)
    if [ "$4" = RESULT ]; then TALLY_P=$5; TALLY_F=$6; TALLY_S=$7; else TALLY_NOTE="crashed or printed no RESULT line"; fi
    [ -z "$TALLY_NOTE" ] && [ "$3" -ne 0 ] && [ "$TALLY_F" -eq 0 ] && TALLY_NOTE="exit code $3"
    PASSED=$((PASSED + TALLY_P)); FAILED=$((FAILED + TALLY_F)); SKIPPED=$((SKIPPED + TALLY_S))
    if [ -n "$TALLY_NOTE" ]; then TALLY_F=$((TALLY_F + 1)); fail "$1" "$TALLY_NOTE (see $2)"; fi
}

wait_steps() {
    i=0
    while [ $i -lt 600 ]; do
        n=$(grep -c '"event":"step"' "$1/metrics.jsonl" 2>/dev/null)
        [ "${n:-0}" -ge "$2" ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
