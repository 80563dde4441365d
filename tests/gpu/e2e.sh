#!/bin/sh
# End to end on the GPU (run by tests/gpu.sh, i.e. `make test-gpu`; needs data/fortunes from `make data`):
#  1. a checkpoint written by the CPU backend, then 10 training steps from it on the CPU backend and on the
#     CUDA backend in fp32 and in bf16: the per-step losses agree (fp32 to 2e-3, bf16 to 5e-2 absolute, on
#     losses of about 10: a summation order changes fp32 in the 6th digit, bf16 keeps 8 bits of mantissa);
#  2. exact resume on the GPU in fp32 and bf16 (same bits as a run that never stopped);
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
steps10 cpu cpu; steps10 cuda32 cuda; steps10 cuda16 cuda --set precision=bf16
compare() {   # name, tolerance
    python3 - "$WORK/cpu/metrics.jsonl" "$WORK/$1/metrics.jsonl" "$2" <<'PY'
import json, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"event":"step"' in l]
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if len(a) != 10 or len(b) != 10: print(f"expected 10 losses each, got {len(a)} and {len(b)}"); sys.exit(1)
d = max(abs(x - y) for x, y in zip(a, b))
print(f"max |loss diff| {d:.2e} over 10 steps (cpu {a[0]:.4f}..{a[-1]:.4f}, gpu {b[0]:.4f}..{b[-1]:.4f})")
sys.exit(0 if d <= tol else 1)
PY
}
for v in "cuda32 2e-3" "cuda16 5e-2"; do
    set -- $v
    out=$(compare $1 $2 2>&1); rc=$?
    if [ $rc -eq 0 ]; then ok "cpu_checkpoint_then_10_steps_$1 ($out)"; else fail "cpu_checkpoint_then_10_steps_$1" "$out; $(tail -3 "$WORK/$1.log")"; fi
done

# exact resume on the GPU, fp32 and bf16 (with fp32 master weights and stochastic rounding): 8 steps in one go
# == 4 steps, stop, resume for 4, bit for bit
for prec in fp32 bf16; do
    "$GPT2GEN" train $M --backend cuda -q --set precision=$prec --set checkpoint.dir="$WORK/straight-$prec" > /dev/null 2>&1
    "$GPT2GEN" train $M --backend cuda -q --set precision=$prec --set checkpoint.dir="$WORK/resumed-$prec" --set checkpoint.every=4 > /dev/null 2>&1
    rm -f "$WORK"/resumed-$prec/model_00000008.bin "$WORK"/resumed-$prec/state_00000008.bin
    "$GPT2GEN" train $M --backend cuda -q --set precision=$prec --set checkpoint.dir="$WORK/resumed-$prec" --resume > "$WORK/resume-$prec.log" 2>&1; rc=$?
    if [ $rc -eq 0 ] && cmp -s "$WORK/straight-$prec/model_00000008.bin" "$WORK/resumed-$prec/model_00000008.bin" \
       && cmp -s "$WORK/straight-$prec/state_00000008.bin" "$WORK/resumed-$prec/state_00000008.bin"; then ok gpu_exact_resume_${prec}_bitwise
    else fail gpu_exact_resume_${prec}_bitwise "rc=$rc; model or state differs after resume: $(tail -2 "$WORK/resume-$prec.log")"; fi
done

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
