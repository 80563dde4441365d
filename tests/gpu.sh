#!/bin/sh
# tests/gpu.sh: what `make test-gpu` runs on the GPU machine. First the per-variant GPU tests on small configs
# (build/tests/test_gpu: every kernel against the CPU reference, a full training step against the CPU
# backend), then both attention paths over a range of shapes (build/tests/test_attention), then `gpt2gen test` on
# every config in configs/ (the kernel tests at that config's real shapes; the parts whose CPU reference would be
# too slow say "skip"), then a summary table. PARTS picks parts: "programs" (the test programs but test_attention,
# gpt2gen sample and eval, hf.py), "attention" (test_attention, with cuDNN's two backwards), "configs" (`gpt2gen
# test` on the configs, tune, ranks, e2e). On the H200 (2026-12-02) programs and attention together ran past 370 s
# and configs took 390 s: give each part its own call where a call is limited to 10 minutes. The default runs all.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
export NCCL_NVLS_ENABLE=0
log=build/test-logs; mkdir -p "$log"
summary="$log/gpu-summary.txt"; : > "$summary"
row() { printf "%-28s %5s %5s %5s %5s  %s\n" "$1" "$2" "$3" "$4" "$5" "$6" >> "$summary"; }   # ... seconds note
last=$(date +%s)
took() { now=$(date +%s); TOOK=$((now - last)); last=$now; }   # TOOK: seconds since the last row
count() {   # $1 = name, $2 = output file, $3 = exit code
    tally "$1" "$2" "$3"
    took
    row "$1" "$TALLY_P" "$TALLY_F" "$TALLY_S" "$TOOK" "$TALLY_NOTE"
}
PARTS=${PARTS:-"programs attention configs"}
case " $PARTS " in *" programs "*) ;; *) skip_programs=1 ;; esac
case " $PARTS " in *" attention "*) ;; *) skip_attention=1 ;; esac
case " $PARTS " in *" configs "*) ;; *) skip_configs=1 ;; esac
if [ -z "$skip_programs" ]; then
echo "== test_gpu (small configs: fp32/bf16/fp16, head size 32/64, recompute 0/1/2; golden 10 steps; fp16 overflow)"
build/tests/test_gpu > "$log/test_gpu.out" 2>&1; rc=$?
cat "$log/test_gpu.out"
count test_gpu "$log/test_gpu.out" $rc
echo "== test_sample (decode against the full forward in fp32/bf16/fp16, rows independent, greedy CPU = GPU, seeds)"
build/tests/test_sample > "$log/test_sample.out" 2>&1; rc=$?
cat "$log/test_sample.out"
count test_sample "$log/test_sample.out" $rc
echo "== tests/cli/sample.sh on the GPU (gpt2gen sample --backend cuda)"
SAMPLE_BACKEND=cuda sh tests/cli/sample.sh > "$log/gpu-sample-cli.out" 2>&1; rc=$?
cat "$log/gpu-sample-cli.out"
count sample_cli "$log/gpu-sample-cli.out" $rc
echo "== test_eval (multiple-choice scores against a CPU reference, fp32 and bf16)"
build/tests/test_eval > "$log/test_eval.out" 2>&1; rc=$?
cat "$log/test_eval.out"
count test_eval "$log/test_eval.out" $rc
echo "== tests/cli/eval.sh on the GPU (gpt2gen eval --backend cuda, eval.hellaswag in training)"
EVAL_BACKEND=cuda sh tests/cli/eval.sh > "$log/gpu-eval-cli.out" 2>&1; rc=$?
cat "$log/gpu-eval-cli.out"
count eval_cli "$log/gpu-eval-cli.out" $rc
echo "== test_hopper_probe (wgmma m64n64k16 in the forms a Hopper attention needs, against an fp64 product)"
build/tests/test_hopper_probe > "$log/test_hopper_probe.out" 2>&1; rc=$?
cat "$log/test_hopper_probe.out"
count hopper_probe "$log/test_hopper_probe.out" $rc
echo "== tests/gpu/hf.py (Hugging Face: transformers loads gpt2gen export's folder; its GPT2LMHeadModel imports)"
python3 tests/gpu/hf.py > "$log/gpu-hf.out" 2>&1; rc=$?
cat "$log/gpu-hf.out"
count hf "$log/gpu-hf.out" $rc
fi
if [ -z "$skip_attention" ]; then
echo "== test_attention (flash template and cuDNN's two backwards against fp64: head size 64/128, T 64..2048, B 1..64)"
build/tests/test_attention > "$log/test_attention.out" 2>&1; rc=$?
cat "$log/test_attention.out"
count test_attention "$log/test_attention.out" $rc
fi
if [ -z "$skip_configs" ]; then
# CONFIGS="gpt2-124M tiny" limits the `gpt2gen test` runs to those configs (default: every one in configs/)
list=$(ls configs/*.lua)
[ -n "$CONFIGS" ] && list=$(for n in $CONFIGS; do echo configs/$n.lua; done)
for c in $list; do
    name=$(basename "$c" .lua)
    [ "$name" = defaults ] && continue
    echo "== gpt2gen test $c"
    ./gpt2gen test "$c" > "$log/gpu-$name.out" 2>&1; rc=$?
    cat "$log/gpu-$name.out"
    if grep -q "out of GPU memory" "$log/gpu-$name.out"; then took; row "$name" - - - "$TOOK" "does not fit"; continue; fi
    count "$name" "$log/gpu-$name.out" $rc
done
echo "== tests/gpu/tune.sh (gpt2gen tune on tiny, bf16 and fp32: tuned step = untuned step, tuned variants pass gpt2gen test, resume)"
sh tests/gpu/tune.sh > "$log/gpu-tune.out" 2>&1; rc=$?
cat "$log/gpu-tune.out"
count tune "$log/gpu-tune.out" $rc
echo "== tests/gpu/ranks.sh (2 GPUs: = 1 GPU with accumulation, ZeRO-0 = ZeRO-1, exact resume, mpirun, a killed rank; skips on 1 GPU)"
sh tests/gpu/ranks.sh > "$log/gpu-ranks.out" 2>&1; rc=$?
cat "$log/gpu-ranks.out"
count ranks "$log/gpu-ranks.out" $rc
echo "== tests/gpu/e2e.sh (CPU checkpoint -> 10 steps on CPU and GPU; gpt2-124M on the default data)"
sh tests/gpu/e2e.sh > "$log/gpu-e2e.out" 2>&1; rc=$?
cat "$log/gpu-e2e.out"
count e2e "$log/gpu-e2e.out" $rc
fi
echo
echo "== GPU test summary"
printf "%-28s %5s %5s %5s %5s  %s\n" config ok FAIL skip s note
cat "$summary"
[ "$FAILED" -eq 0 ]
