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
# Not run here (make test runs them), to keep CI within its time: tests whose time goes to programs that are not
# instrumented, while the C paths they take are taken by others here: cli/build (NVRTC compiling every config;
# cli/cache_safety and the config tests build under the sanitizers), cli/quickstart (a clone and make),
# cli/gpu_bundle (strip and tar of the uninstrumented build); cli/ranks,
# whose time is the model's arithmetic (the ranks' shards, collectives and state files are test_ranks's, here);
# and, without a GPU, the GPU test programs, which then only compile their kernels.
SKIP_TESTS="cli/build=NVRTC compiling every config (not instrumented): make test runs it; cli/cache_safety and the config tests build here
cli/quickstart=a clone and make (not instrumented): make test runs it
cli/gpu_bundle=strip and tar of the uninstrumented build: make test runs it
cli/ranks=its time is the model's arithmetic: make test runs it; test_ranks runs runtime/ranks here"
if ! nvidia-smi -L >/dev/null 2>&1; then
    SKIP_TESTS="$SKIP_TESTS
test_gpu=no GPU: here it would only compile its kernels (NVRTC, not instrumented), as make test does
test_attention=no GPU: here it would only compile its kernels (NVRTC, not instrumented), as make test does"
fi
export SKIP_TESTS
# one test at a time unless TEST_JOBS says otherwise: under the sanitizers, beside another test on a loaded machine,
# the config sandbox's 2 s wall-clock limit (gen/sandbox.h) once fired before its 64 MiB one in cli/config_hostile
export TEST_JOBS="${TEST_JOBS:-1}"
sh tests/run.sh; status=$?
if [ -n "$(ls -A "$reports")" ]; then
    echo "sanitizer reports (build/asan/reports):"
    for f in "$reports"/*; do echo "== $f"; head -30 "$f"; done
    echo "FAIL sanitize: $(ls "$reports" | wc -l) sanitizer report(s)"
    status=1
fi
exit $status
