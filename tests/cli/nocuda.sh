#!/bin/sh
# A gpt2gen built without the CUDA toolkit (make CUDA_HOME=/nonexistent, with every CUDA header on the compiler's
# path replaced by one that stops the build, so a machine with the toolkit installed elsewhere tests the same
# thing): it builds, links nothing of CUDA, trains configs/tiny.lua on the CPU (the automatic backend choice, saying
# why) with the same losses as the regular binary; `gpt2gen build` without NVRTC writes the sources and says it
# cannot compile them (exit 0 in this build, 1 in a CUDA build); --backend cuda and `gpt2gen test` say what is
# missing. The build takes ~20 s on 2 cores; under `make sanitize` (tests/sanitize.sh) only the Makefile's plan
# is checked, the plain suite runs the rest.
. "$(dirname "$0")/../lib.sh"
scratch
cd "$ROOT" || exit 1
# make as from a shell, whatever make (or the caller's environment) runs this test with
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u CFLAGS -u WERROR make "$@" 2>&1; }
NB=$WORK/gpt2gen
where="OBJ_DIR=$WORK/obj TEST_DIR=$WORK/tests BIN=$NB"

# the plan: no runtime/cuda/, the stand-ins, GPT2GEN_NO_CUDA naming what is missing, no NVRTC at link time
out=$(mk -n -B CUDA_HOME=/nonexistent $where "$NB")
if printf '%s' "$out" | grep -q "no /nonexistent/include/cuda.h: building without the CUDA backend" \
   && printf '%s' "$out" | grep -q -- "-DGPT2GEN_NO_CUDA=" && printf '%s' "$out" | grep -q "runtime/nocuda.c" \
   && printf '%s' "$out" | grep -q "tune/nocuda.c" && ! printf '%s' "$out" | grep -q "runtime/cuda/\|tune/harness.c\|-lnvrtc"
then ok makefile_plan; else fail makefile_plan "$(printf '%s' "$out" | grep -v "^cc \|^gcc " | head -5)"; fi
out=$(mk -n -B gpt2gen | grep -- "-o gpt2gen")
if [ -n "$out" ] && ! printf '%s' "$out" | grep -q -- "-lnvrtc"; then ok no_nvrtc_at_link_time
else fail no_nvrtc_at_link_time "the link line: $out"; fi
if [ -n "${ASAN_OPTIONS:-}" ]; then
    skip build_and_train "under the sanitizers (make sanitize): the plain suite builds the CPU-only binary"; finish
fi

# the build, with the CUDA headers poisoned
mkdir -p "$WORK/poison"
for h in cuda.h cublasLt.h cudnn.h cudnn_graph.h nvrtc.h cuda_runtime.h; do
    echo "#error \"$h: the CPU-only build must not include it\"" > "$WORK/poison/$h"
done
t0=$(date +%s)
out=$(mk -j"$(nproc 2>/dev/null || echo 2)" CUDA_HOME=/nonexistent CC="${CC:-cc} -I$WORK/poison" $where "$NB"); rc=$?
secs=$(( $(date +%s) - t0 ))
if [ $rc -ne 0 ] || [ ! -x "$NB" ]; then
    fail build "rc=$rc: $(printf '%s' "$out" | grep -i "error" | head -5)"; finish
fi
libs=$(ldd "$NB" 2>&1)
if printf '%s' "$libs" | grep -qi "nvrtc\|cuda\|cublas\|cudnn"; then fail build "links CUDA libraries: $libs"
else ok build "$secs s, CUDA headers unreachable, nothing of CUDA linked"; fi

# training: tiny, shrunk to seconds, on the CPU backend the automatic choice picks
cd "$WORK" || exit 1
cp -r "$ROOT/configs" configs
if [ ! -f "$ROOT/data/fortunes/train_000000.bin" ]; then
    fail default_data "data/fortunes is missing: run \`make data\` first"; finish
fi
ln -s "$ROOT/data" data
small="--set train.batch_size=2 --set train.seq_len=32 --set train.total_batch_size=64 --set train.steps=3"
small="$small --set eval.val_every=0 --set eval.sample_every=0 --set checkpoint.every=0"
# shellcheck disable=SC2086
out=$("$NB" train configs/tiny.lua $small --set checkpoint.dir="$WORK/run" 2>&1); rc=$?
losses=$(printf '%s\n' "$out" | sed -n 's/^step *\([0-9]*\)\/3 | loss \([0-9.]*\) .*/\1 \2/p')
first=$(printf '%s\n' "$losses" | sed -n '1s/.* //p')
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$losses" | grep -c .)" -eq 3 ] && printf '%s\n' "$losses" | head -1 | grep -q "^1 " \
   && awk "BEGIN{exit !($first > 10.5 && $first < 11.2)}" \
   && printf '%s' "$out" | grep -q "built without the CUDA toolkit (no /nonexistent/include/cuda.h at build time).*: training on the CPU backend"
then ok trains_tiny_on_cpu "losses $(printf '%s' "$losses" | tr '\n' ' ')"
else fail trains_tiny_on_cpu "rc=$rc, losses '$losses': $(printf '%s' "$out" | tail -5)"; fi
# the same steps with the regular binary: the same CPU code, so the same losses to the digit
if [ -x "$GPT2GEN" ]; then
    # shellcheck disable=SC2086
    ref=$("$GPT2GEN" train configs/tiny.lua --backend cpu $small --set checkpoint.dir="$WORK/ref" 2>&1 \
          | sed -n 's/^step *\([0-9]*\)\/3 | loss \([0-9.]*\) .*/\1 \2/p')
    if [ -n "$ref" ] && [ "$ref" = "$losses" ]; then ok losses_match_regular_binary
    else fail losses_match_regular_binary "CPU-only '$losses', $GPT2GEN '$ref'"; fi
else skip losses_match_regular_binary "no $GPT2GEN (run make)"; fi

# --backend cuda: one clear error, no training
out=$("$NB" train configs/tiny.lua --backend cuda $small --set checkpoint.dir="$WORK/cuda" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q -- "--backend cuda: this gpt2gen was built without the CUDA toolkit" \
   && ! printf '%s' "$out" | grep -q "^step "; then ok backend_cuda_refused
else fail backend_cuda_refused "rc=$rc: $out"; fi

# gpt2gen build without NVRTC: the sources, plan and config, no CUBINs, and what it cannot do
out=$(GPT2GEN_NVRTC_LIBRARY=none "$NB" build configs/tiny.lua 2>&1); rc=$?
ncu=$(ls build/tiny/kernels/*.cu 2>/dev/null | wc -l); ncubin=$(find build/tiny -name '*.cubin' | wc -l)
if [ $rc -eq 0 ] && [ "$ncu" -gt 0 ] && [ "$ncubin" -eq 0 ] && [ -f build/tiny/plan.txt ] && [ -f build/tiny/config.lua ] \
   && printf '%s' "$out" | grep -qF "gpt2gen build: generated the sources in build/tiny/ but cannot compile them: NVRTC not found" \
   && printf '%s' "$out" | grep -q "note: this gpt2gen was built without the CUDA toolkit"
then ok build_sources_without_nvrtc "$ncu sources"
else fail build_sources_without_nvrtc "rc=$rc, $ncu sources, $ncubin CUBINs: $out"; fi
out=$(GPT2GEN_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13 "$NB" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -qF "NVRTC not found: GPT2GEN_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13 cannot be loaded"
then ok nvrtc_library_named; else fail nvrtc_library_named "rc=$rc: $out"; fi
out=$(GPT2GEN_NVRTC_LIBRARY=none "$NB" test configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "^skip tiny/gpu: this gpt2gen was built without the CUDA toolkit" \
   && printf '%s' "$out" | grep -q "^RESULT 0 0 1"; then ok gpu_test_skips
else fail gpu_test_skips "rc=$rc: $out"; fi
out=$("$NB" tune configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "gpt2gen tune: needs a GPU: this gpt2gen was built without the CUDA toolkit"
then ok tune_refused; else fail tune_refused "rc=$rc: $out"; fi

# the regular binary without NVRTC: the same sources, and an error where it has the CUDA backend
if [ -x "$GPT2GEN" ]; then
    rm -rf build/tiny
    out=$(GPT2GEN_NVRTC_LIBRARY=none "$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
    ncu=$(ls build/tiny/kernels/*.cu 2>/dev/null | wc -l)
    want=1; printf '%s' "$out" | grep -q "note: this gpt2gen was built without the CUDA toolkit" && want=0
    if [ $rc -eq $want ] && [ "$ncu" -gt 0 ] \
       && printf '%s' "$out" | grep -qF "gpt2gen build: generated the sources in build/tiny/ but cannot compile them: NVRTC not found"
    then ok regular_binary_without_nvrtc "exit code $rc"; else fail regular_binary_without_nvrtc "rc=$rc (expected $want), $ncu sources: $out"; fi
fi
finish
