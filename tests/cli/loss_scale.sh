#!/bin/sh
# The dynamic loss scaler in the training loop (precision fp16; runtime/train/loss_scale.h), on the CPU backend (fp32
# math, the same scaler and loop as the GPU; needs data/fortunes, `make data`):
#  - scaling by a power of two is exact: an fp16 run without overflows has the fp32 run's losses, norms, AdamW
#    state and weights, bit for bit;
#  - an overflow injected at step 3 (GPT2GEN_TEST_OVERFLOW, a test hook) skips the update: on one batch
#    (overfit_batch) step 4 sees the same weights, so the same loss; the scale halves, grows again after
#    train.loss_scale_interval clean steps, and the log and metrics say so;
#  - resume across a skipped step gives the same bits as the run that never stopped (the scale, the clean and
#    skipped counts are in the resume state);
#  - an overflow without the scaler (fp32) still stops the run, and a bad hook value is one clear error.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
run() { "$GPT2GEN" train $M --backend cpu -q "$@"; }
# steps FILE KEY: the values of KEY in the step records of metrics.jsonl FILE, on one line
steps() { grep -F '"event":"step"' "$1" | sed -n "s/.*\"$2\":\([-+0-9.a-z]*\).*/\1/p" | tr '\n' ' '; }

# exact: fp16 (scale 65536) == fp32, without overflows
run --set checkpoint.dir="$WORK/fp32" --set eval.val_every=0 > /dev/null 2>&1
run --set checkpoint.dir="$WORK/fp16" --set eval.val_every=0 --set precision=fp16 > /dev/null 2>&1; rc=$?
a=$(steps "$WORK/fp32/metrics.jsonl" loss)$(steps "$WORK/fp32/metrics.jsonl" norm)
b=$(steps "$WORK/fp16/metrics.jsonl" loss)$(steps "$WORK/fp16/metrics.jsonl" norm)
if [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && [ "$(steps "$WORK/fp16/metrics.jsonl" loss_scale)" = "65536 65536 65536 65536 65536 65536 65536 65536 " ] \
   && cmp -s -i 1024 "$WORK/fp32/state_00000008.bin" "$WORK/fp16/state_00000008.bin"; then ok scaling_is_exact
else fail scaling_is_exact "rc=$rc; fp32 losses and norms: $a; fp16: $b"; fi

# an injected overflow on one batch: skipped, halved, grown back after 2 clean steps
GPT2GEN_TEST_OVERFLOW=3 "$GPT2GEN" train $M --backend cpu --set checkpoint.dir="$WORK/skip" --set precision=fp16 --set train.overfit_batch=true \
    --set train.loss_scale_interval=2 --set eval.val_every=0 > "$WORK/skip.log" 2>&1; rc=$?
loss=$(steps "$WORK/skip/metrics.jsonl" loss); scale=$(steps "$WORK/skip/metrics.jsonl" loss_scale); skipped=$(steps "$WORK/skip/metrics.jsonl" skipped)
set -- $loss
if [ $rc -eq 0 ] && [ "$skipped" = "false false true false false false false false " ] && [ "$3" = "$4" ] && [ "$2" != "$3" ] \
   && awk "BEGIN{exit !($8 < $4)}" && [ "$scale" = "65536 131072 65536 65536 131072 131072 262144 262144 " ] \
   && grep -q "^step     3/8 .* | skipped (gradient overflow), loss scale now 65536$" "$WORK/skip.log" \
   && grep -q '"step":3,.*"norm":null,.*"loss_scale":65536,"skipped":true' "$WORK/skip/metrics.jsonl"; then
    ok "overflow_skipped_and_recovered (losses $loss; scales $scale)"
else fail overflow_skipped_and_recovered "rc=$rc; losses $loss; scales $scale; skipped $skipped: $(grep '^step ' "$WORK/skip.log" | sed -n 3p)"; fi

# resume across a skipped step: 8 steps in one go == 4 steps (overflow at 3, scale grown at 5 in both), resume for 4
export GPT2GEN_TEST_OVERFLOW=3
run --set checkpoint.dir="$WORK/straight" --set precision=fp16 --set train.loss_scale_interval=2 > /dev/null 2>&1
run --set checkpoint.dir="$WORK/resumed" --set precision=fp16 --set train.loss_scale_interval=2 --set checkpoint.every=4 > /dev/null 2>&1
rm -f "$WORK"/resumed/model_00000008.bin "$WORK"/resumed/state_00000008.bin
out=$(run --set checkpoint.dir="$WORK/resumed" --set precision=fp16 --set train.loss_scale_interval=2 --resume 2>&1); rc=$?
unset GPT2GEN_TEST_OVERFLOW
s1=$(steps "$WORK/straight/metrics.jsonl" loss_scale); s2=$(steps "$WORK/resumed/metrics.jsonl" loss_scale)
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "(step 4)" && [ "$(steps "$WORK/straight/metrics.jsonl" skipped)" = "false false true false false false false false " ] \
   && cmp -s "$WORK/straight/model_00000008.bin" "$WORK/resumed/model_00000008.bin" \
   && cmp -s "$WORK/straight/state_00000008.bin" "$WORK/resumed/state_00000008.bin"; then ok "exact_resume_across_a_skipped_step (scales $s1)"
else fail exact_resume_across_a_skipped_step "rc=$rc; scales straight $s1, resumed $s2: $out"; fi

# without the scaler an overflow stops the run, as any non-finite gradient norm does; a bad hook value is refused
out=$(GPT2GEN_TEST_OVERFLOW=2 run --set checkpoint.dir="$WORK/fp32-overflow" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "step 2: the gradient norm is -*nan; stopping"; then ok overflow_without_scaler_stops
else fail overflow_without_scaler_stops "rc=$rc: $out"; fi
out=$(GPT2GEN_TEST_OVERFLOW=3, run --set checkpoint.dir="$WORK/bad-hook" --set precision=fp16 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -qF 'GPT2GEN_TEST_OVERFLOW: "3,": expected step numbers >= 1 separated by commas'; then ok bad_hook_value
else fail bad_hook_value "rc=$rc: $out"; fi
finish
