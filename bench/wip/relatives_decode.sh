#!/bin/sh
# One device call for branch wip-relatives-decode (the decode linears for GPT-2's relatives, QK-norm and RoPE inside
# the decode attention, the decode classifier's soft-cap, one soft-cap helper): the GPU tests its kernels touch, then
# the decode benchmark beside main's build. Carry .bench (gpt2gen: this branch's build; gpt2gen.main: main's;
# test_gpu, test_sample: this branch's, stripped), data/fortunes, data/gpt2.tiktoken. About 9 minutes: split it where
# the device gives less. Merge where every test passes (then the GPU suite at the merged commit) and the relatives'
# decode is faster; GPT-2's decode must be unchanged.
export NCCL_NVLS_ENABLE=0
cp .bench/gpt2gen ./gpt2gen; mkdir -p build/tests; cp .bench/test_gpu .bench/test_sample build/tests/
timeout 120 build/tests/test_sample > $OUT/test_sample.log 2>&1; echo "test_sample rc=$?"
grep -E "^(FAIL|RESULT)|decode vs" $OUT/test_sample.log
for f in llama nano bf16_fused; do
    timeout 120 build/tests/test_gpu $f > $OUT/test_gpu_$f.log 2>&1; echo "test_gpu $f rc=$?"; grep -E "^(FAIL|RESULT)" $OUT/test_gpu_$f.log | tail -3
done
for c in llama-124M nanochat-d12; do
    timeout 120 ./gpt2gen test configs/$c.lua > $OUT/test_$c.log 2>&1; echo "test $c rc=$?"; grep -E "^(FAIL|RESULT)" $OUT/test_$c.log
done
MODELS="124M llama-124M" BATCHES="1 8" TORCH_MODES=compile+graph NO_NOCACHE=1 NO_PREFILL=1 RUNS=2 timeout 300 sh bench/sample.sh > $OUT/sample.log 2>&1
tail -6 build/bench-logs/sample-summary.md
OURS=.bench/gpt2gen.main MODELS="124M llama-124M" BATCHES="1 8" NO_HF=1 NO_TORCH=1 NO_NOCACHE=1 NO_PREFILL=1 RUNS=2 timeout 120 sh bench/sample.sh > $OUT/sample_main.log 2>&1
tail -6 build/bench-logs/sample-summary.md
