#!/bin/sh
# `gpt2gen tune` on the GPU (run by tests/gpu.sh, i.e. `make test-gpu`), on a small config in bf16 and fp32, with
# its own tuning database: the tune finishes and reports every family and matmul, and times the GELU's paths
# (train.gelu: four on Hopper in 16 bits, else three), whose first losses agree; its tuned training step
# matches the untuned one (the tune itself holds the first three losses to the precision's tolerance: its line
# "ok tuned step matches the untuned one"); `gpt2gen test` then builds from the database (its one line says so)
# and every chosen variant passes the per-kernel regression tests; a second tune resumes from the database
# without measuring again. Skips without a GPU. TUNE_PRECISIONS (default "bf16 fp32") picks the precisions.
. "$(dirname "$0")/../lib.sh"
scratch
cd "$ROOT" || exit 1
export NCCL_NVLS_ENABLE=0
export GPT2GEN_TUNE_DB="$WORK/tune-db.txt"
if ! nvidia-smi >/dev/null 2>&1; then skip gpu_tune "no GPU here"; finish; fi
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | head -1)
for prec in ${TUNE_PRECISIONS:-bf16 fp32}; do
    log="$WORK/tune-$prec.log"
    "$GPT2GEN" tune configs/tiny.lua --set precision=$prec --budget 120 > "$log" 2> "$WORK/tune-$prec.err"; rc=$?
    fams=$(grep -c '^kernel ' "$log"); mms=$(grep -c '^matmul ' "$log")
    if [ $rc -eq 0 ] && [ "$fams" -ge 8 ] && [ "$mms" -ge 15 ] && [ -f build/tiny/tune_report.txt ]; then
        ok "tune_tiny_$prec" "$fams families, $mms matmuls, $(grep '^tune took' "$log")"
    else fail "tune_tiny_$prec" "rc=$rc, $fams families, $mms matmuls: $(tail -5 "$WORK/tune-$prec.err") $(tail -3 "$log")"; fi
    # train.gelu = "auto": the four paths timed as whole steps, the fastest recorded (tune/gelu_path.c); "fused"
    # (our fc matmuls with the GELU) runs on Hopper in 16 bits only, elsewhere its time is printed as -1.00
    fused='[0-9.]*'
    [ "$prec" = fp32 ] || [ "$cc" != 9.0 ] && fused='-1\.00'
    gl=$(grep "^gelu path: epilogues [0-9.]* ms/step, kernels [0-9.]*, split (kernel forward, epilogue backward) [0-9.]*, fused $fused:" "$log")
    # the other paths compute the same step: their first losses agree with the epilogues' (else rejected)
    rejected=$(grep '^gelu path: path=[a-z]* rejected' "$log")
    if [ -n "$gl" ] && [ -z "$rejected" ] && grep -q '^best gelu path path=' "$GPT2GEN_TUNE_DB"; then ok "gelu_path_timed_$prec" "$gl"
    else fail "gelu_path_timed_$prec" "no gelu path line with 'fused $fused' (GPU compute capability $cc) in $log, or no best record, or $rejected: $(grep '^gelu path' "$log" | head -5) $(grep '^tune \[.*gelu' "$WORK/tune-$prec.err" | head -4)"; fi
    line=$(grep 'tuned step matches the untuned one' "$log")
    case "$line" in ok*) ok "tuned_step_matches_$prec" "$(grep '^step ' "$log" | sed 's/  */ /g'); ${line#ok }" ;;
                    *) fail "tuned_step_matches_$prec" "${line:-no such line in $log}" ;; esac
    out="$WORK/test-$prec.log"
    "$GPT2GEN" test configs/tiny.lua --set precision=$prec > "$out" 2>&1; rc=$?
    used=$(grep '^tune db' "$out")
    if [ $rc -eq 0 ] && grep -q '^RESULT [0-9]* 0 ' "$out" && printf '%s' "$used" | grep -q 'from the database'; then
        ok "tuned_variants_pass_$prec" "$(grep '^RESULT' "$out"); $used"
    else fail "tuned_variants_pass_$prec" "rc=$rc, $used: $(grep -E '^FAIL' "$out" | head -5)"; fi
done
# resume: everything measured is in the database, so a second tune measures nothing again
"$GPT2GEN" tune configs/tiny.lua --set precision=bf16 > "$WORK/again.log" 2> "$WORK/again.err"; rc=$?
fresh=$(grep '^tune \[' "$WORK/again.err" | grep -vc 'from the database\|path=')
if [ $rc -eq 0 ] && [ "$fresh" -eq 0 ]; then ok tune_resumes "$(grep -c 'from the database' "$WORK/again.err") results reused"
else fail tune_resumes "rc=$rc, $fresh results measured again: $(grep '^tune \[' "$WORK/again.err" | grep -v 'from the database' | head -3)"; fi
cp "$WORK"/*.log "$WORK"/*.err "$GPT2GEN_TUNE_DB" "$ROOT/build/test-logs/" 2>/dev/null
finish
