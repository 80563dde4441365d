#!/bin/sh
# tools/gpu_bundle.sh: pack this build's programs, unpack them into another copy of the tools, and the unpacked
# gpt2gen and test programs run there (the same --help, every test program back); a damaged bundle or none is one
# clear error, and leaves an existing ./gpt2gen as it was.
. "$(dirname "$0")/../lib.sh"
scratch
if [ ! -x "$ROOT/gpt2gen" ] || [ ! -x "$ROOT/build/tests/test_gpu" ]; then
    skip gpu_bundle "no ./gpt2gen or build/tests here to pack: make gpt2gen tests-bin"; finish
fi
B=$WORK/b.tgz
if GPU_BUNDLE=$B sh "$ROOT/tools/gpu_bundle.sh" pack > "$WORK/pack.out" 2>&1 && [ -s "$B" ]; then ok pack
else fail pack "$(cat "$WORK/pack.out")"; finish; fi
T=$WORK/tree; mkdir -p "$T/tools" && cp "$ROOT/tools/gpu_bundle.sh" "$T/tools/"
if GPU_BUNDLE=$B sh "$T/tools/gpu_bundle.sh" unpack > "$WORK/unpack.out" 2>&1; then ok unpack
else fail unpack "$(cat "$WORK/unpack.out")"; finish; fi
n_here=$(ls "$ROOT/build/tests" | wc -l); n_there=$(ls "$T/build/tests" | wc -l)
"$ROOT/gpt2gen" --help > "$WORK/h1" 2>&1; "$T/gpt2gen" --help > "$WORK/h2" 2>&1; rc=$?
if [ $rc -eq 0 ] && cmp -s "$WORK/h1" "$WORK/h2" && [ "$n_here" -eq "$n_there" ] && [ -x "$T/build/tests/test_gpu" ]
then ok unpacked_programs_run; else fail unpacked_programs_run "rc=$rc, $n_there of $n_here programs"; fi
printf 'not a tar' > "$WORK/bad.tgz"
before=$(cksum < "$T/gpt2gen")
GPU_BUNDLE=$WORK/bad.tgz sh "$T/tools/gpu_bundle.sh" unpack > /dev/null 2> "$WORK/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "bad.tgz: not a gzip'd tar" "$WORK/err" && [ "$(cksum < "$T/gpt2gen")" = "$before" ]; then
    ok damaged_bundle_refused
else fail damaged_bundle_refused "rc=$rc: $(cat "$WORK/err")"; fi
GPU_BUNDLE=$WORK/none.tgz sh "$T/tools/gpu_bundle.sh" unpack > /dev/null 2> "$WORK/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "no bundle .*none.tgz" "$WORK/err"; then ok missing_bundle_refused
else fail missing_bundle_refused "rc=$rc: $(cat "$WORK/err")"; fi
finish
