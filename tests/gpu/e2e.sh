#!/bin/sh
# End to end on the GPU (run by tests/gpu.sh, i.e. `make test-gpu`; needs data/fortunes from `make data`):
#  1. a checkpoint written by the CPU backend, then 10 training steps from it on the CPU backend and on the
#     CUDA backend in fp32, bf16 and fp16: the per-step losses agree (fp32 to 2e-3, bf16 to 5e-2, fp16 to 1e-2
#     absolute, on losses of about 10: a summation order changes fp32 in the 6th digit, bf16 keeps 8 bits of
#     mantissa, fp16 11). fp16 runs at loss scale 1024, where no step overflows: at the default 65536 the
#     gradient norm spike of step 8 (about 12.8) overflows fp16, the scaler rightly skips that step, and the run
#     leaves the CPU's path (an overflow is tested below);
#  2. exact resume on the GPU in fp32, bf16 and fp16 (same bits as a run that never stopped; in fp16 across a
#     step skipped by an injected overflow, GPT2GEN_TEST_OVERFLOW), and the loss scaler on the GPU: an injected
#     overflow skips its step (the next step's loss on the same batch is the same) and halves the scale;
#  3. the attention path: the template without cuDNN (hidden), an error when cuDNN is asked for and missing;
#  4. gpt2-124M trains from fresh init on the default data with validation, sampling and checkpoints, and
#     its loss falls (on cuDNN's attention where it loads: the log says which).
. "$(dirname "$0")/../lib.sh"
scratch
cd "$ROOT" || exit 1
export NCCL_NVLS_ENABLE=0
M=tests/configs/micro.lua
if ! "$GPT2GEN" build $M -q >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then skip gpu_e2e "no GPU here"; finish; fi
if [ ! -f data/fortunes/train_000000.bin ]; then fail gpu_e2e "data/fortunes is missing (make data)"; finish; fi

"$GPT2GEN" train $M --backend cpu -q --set train.steps=2 --set checkpoint.dir="$WORK/seed" > "$WORK/seed.log" 2>&1
init="$WORK/seed/model_00000002.bin"
steps10() {   # name, backend, options...
    name=$1; be=$2; shift 2
    "$GPT2GEN" train $M --backend $be -q --set checkpoint.init="$init" --set train.steps=10 --set eval.val_every=0 \
        --set checkpoint.dir="$WORK/$name" "$@" > "$WORK/$name.log" 2>&1
}
steps10 cpu cpu; steps10 cuda32 cuda; steps10 cuda16 cuda --set precision=bf16; steps10 cudafp16 cuda --set precision=fp16 --set train.loss_scale=1024
compare() {   # name, tolerance
    python3 - "$WORK/cpu/metrics.jsonl" "$WORK/$1/metrics.jsonl" "$2" <<'PY'
import json, sys
steps = lambda p: [json.loads(l) for l in open(p) if '"event":"step"' in l]
losses = lambda p: [e["loss"] for e in steps(p)]
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if len(a) != 10 or len(b) != 10: print(f"expected 10 losses each, got {len(a)} and {len(b)}"); sys.exit(1)
if any(e.get("skipped") for e in steps(sys.argv[2])): print("a step was skipped (loss scale overflow)"); sys.exit(1)
d = max(abs(x - y) for x, y in zip(a, b))
print(f"max |loss diff| {d:.2e} over 10 steps (cpu {a[0]:.4f}..{a[-1]:.4f}, gpu {b[0]:.4f}..{b[-1]:.4f})")
sys.exit(0 if d <= tol else 1)
PY
}
for v in "cuda32 2e-3" "cuda16 5e-2" "cudafp16 1e-2"; do
    set -- $v
    out=$(compare $1 $2 2>&1); rc=$?
    if [ $rc -eq 0 ]; then ok "cpu_checkpoint_then_10_steps_$1 ($out)"; else fail "cpu_checkpoint_then_10_steps_$1" "$out; $(tail -3 "$WORK/$1.log")"; fi
done

# exact resume on the GPU, fp32, bf16 (with fp32 master weights and stochastic rounding) and fp16 (with a step
# skipped at 3): 8 steps in one go == 4 steps, stop, resume for 4, bit for bit
for prec in fp32 bf16 fp16; do
    if [ $prec = fp16 ]; then export GPT2GEN_TEST_OVERFLOW=3; else unset GPT2GEN_TEST_OVERFLOW; fi
    "$GPT2GEN" train $M --backend cuda -q --set precision=$prec --set checkpoint.dir="$WORK/straight-$prec" > /dev/null 2>&1
    "$GPT2GEN" train $M --backend cuda -q --set precision=$prec --set checkpoint.dir="$WORK/resumed-$prec" --set checkpoint.every=4 > /dev/null 2>&1
    rm -f "$WORK"/resumed-$prec/model_00000008.bin "$WORK"/resumed-$prec/state_00000008.bin
    "$GPT2GEN" train $M --backend cuda -q --set precision=$prec --set checkpoint.dir="$WORK/resumed-$prec" --resume > "$WORK/resume-$prec.log" 2>&1; rc=$?
    if [ $rc -eq 0 ] && cmp -s "$WORK/straight-$prec/model_00000008.bin" "$WORK/resumed-$prec/model_00000008.bin" \
       && cmp -s "$WORK/straight-$prec/state_00000008.bin" "$WORK/resumed-$prec/state_00000008.bin"; then ok gpu_exact_resume_${prec}_bitwise
    else fail gpu_exact_resume_${prec}_bitwise "rc=$rc; model or state differs after resume: $(tail -2 "$WORK/resume-$prec.log")"; fi
done
unset GPT2GEN_TEST_OVERFLOW

# the loss scaler on the GPU: on one batch (overfit_batch), an overflow injected at step 3 skips its update, so
# step 4 sees the same weights and the same loss; the scale halves (65536 -> 32768), and the loss falls after
GPT2GEN_TEST_OVERFLOW=3 "$GPT2GEN" train $M --backend cuda -q --set precision=fp16 --set train.overfit_batch=true \
    --set eval.val_every=0 --set checkpoint.dir="$WORK/skip" > "$WORK/skip.log" 2>&1; rc=$?
out=$(python3 - "$WORK/skip/metrics.jsonl" <<'PY' 2>&1
import json, sys
st = [json.loads(l) for l in open(sys.argv[1]) if '"event":"step"' in l]
print("skipped", [e["step"] for e in st if e["skipped"]], "scales", [e["loss_scale"] for e in st], "losses", [round(e["loss"], 4) for e in st])
sys.exit(0 if [e["step"] for e in st if e["skipped"]] == [3] and st[2]["loss_scale"] == 32768 and st[1]["loss_scale"] == 65536
         and st[3]["loss"] == st[2]["loss"] and st[7]["loss"] < st[3]["loss"] else 1)
PY
); rc2=$?
if [ $rc -eq 0 ] && [ $rc2 -eq 0 ]; then ok "gpu_fp16_overflow_skipped_and_recovered ($out)"
else fail gpu_fp16_overflow_skipped_and_recovered "rc=$rc: $out $(tail -2 "$WORK/skip.log")"; fi

# the attention path: without cuDNN (the library hidden) training runs on the flash template and says so; asking
# for cuDNN then is an error naming it; the template asked for by name is used
out=$(GPT2GEN_CUDNN_LIBRARY=none "$GPT2GEN" train $M --backend cuda --set precision=bf16 --set train.steps=2 \
      --set checkpoint.dir="$WORK/nocudnn" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "^attention: flash template.*GPT2GEN_CUDNN_LIBRARY=none"; then ok attention_without_cudnn_runs_the_template
else fail attention_without_cudnn_runs_the_template "rc=$rc: $(printf '%s' "$out" | grep -i attention | head -3)"; fi
out=$(GPT2GEN_CUDNN_LIBRARY=none "$GPT2GEN" train $M --backend cuda --set precision=bf16 --set attention=cudnn \
      --set train.steps=2 --set checkpoint.dir="$WORK/nocudnn2" 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'attention = "cudnn", but cuDNN is hidden'; then ok attention_cudnn_missing_is_an_error
else fail attention_cudnn_missing_is_an_error "rc=$rc: $(printf '%s' "$out" | tail -2)"; fi
out=$("$GPT2GEN" train $M --backend cuda --set precision=bf16 --set attention=flash --set train.steps=2 \
      --set checkpoint.dir="$WORK/flash" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q '^attention: flash template (templates/attention.cu), as the config asks'; then ok attention_flash_by_name
else fail attention_flash_by_name "rc=$rc: $(printf '%s' "$out" | grep -i attention | head -3)"; fi

# kernels built for another arch are rebuilt for the GPU at hand
out=$("$GPT2GEN" train $M --backend cuda -q --arch sm_80 --set train.steps=2 --set checkpoint.dir="$WORK/arch" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "instead of sm_80"; then ok rebuild_for_the_gpus_arch; else fail rebuild_for_the_gpus_arch "rc=$rc: $out"; fi

# gpt2-124M from fresh init on the default data: 20 steps of 0.5M tokens, validation, a sample, a checkpoint
"$GPT2GEN" configs/gpt2-124M.lua --set train.steps=20 --set train.warmup=5 \
    --set "data.train=data/fortunes/train_*.bin" --set "data.val=data/fortunes/val_*.bin" --set data.tokenizer=data/fortunes/tokenizer.bin \
    --set eval.val_every=10 --set eval.val_batches=2 --set eval.sample_every=20 --set eval.sample_tokens=48 \
    --set checkpoint.every=20 --set checkpoint.dir="$WORK/g124" > "$WORK/g124.log" 2>&1; rc=$?
cat "$WORK/g124.log" | grep -vE '^step +[0-9]+/' ; grep -E '^step +(1|5|10|15|20)/' "$WORK/g124.log"
first=$(grep -m1 '"event":"step"' "$WORK/g124/metrics.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
last=$(grep '"event":"step"' "$WORK/g124/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([0-9.]*\).*/\1/')
if [ $rc -eq 0 ] && [ -n "$last" ] && awk "BEGIN{exit !($last < $first - 2)}" && grep -q "sample at step 20" "$WORK/g124.log" \
   && grep -q "val loss" "$WORK/g124.log" && [ -f "$WORK/g124/model_00000020.bin" ] && grep -q "^attention: " "$WORK/g124.log"; then
    ok "gpt2_124M_trains ($first -> $last; $(grep -m1 '^attention: ' "$WORK/g124.log"))"
else fail gpt2_124M_trains "rc=$rc loss $first -> $last"; fi
finish
