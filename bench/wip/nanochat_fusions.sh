#!/bin/sh
# One device call for branch wip-nanochat-fusions (wip-qknorm-rope and wip-relu2-fused merged): the nanochat-shaped
# GPU tests, nanochat-d12's `gpt2gen test` on both MLP paths, then its training beside main's build and PyTorch, with
# QK-norm+RoPE alone (train.gelu auto) and with ReLU^2 in fc_gemm too (train.gelu = "fused"). Carry .bench (gpt2gen:
# this branch's build; gpt2gen.main: main's; test_gpu: this branch's, stripped), data/fortunes, data/gpt2.tiktoken.
# About 9 minutes: split it in two calls where the device gives less. Merge what beats main and passes; then the GPU
# suite at the merged commit.
export NCCL_NVLS_ENABLE=0
cp .bench/gpt2gen ./gpt2gen
mkdir -p build/tests && cp .bench/test_gpu build/tests/
timeout 150 build/tests/test_gpu nano > $OUT/test_gpu_nano.log 2>&1; echo "test_gpu nano: rc=$?"
grep -E "^(FAIL|RESULT)" $OUT/test_gpu_nano.log | head
for g in auto fused; do
    timeout 120 ./gpt2gen test configs/nanochat-d12.lua --set train.gelu=$g > $OUT/test_nanochat_$g.log 2>&1
    echo "gpt2gen test nanochat-d12, train.gelu=$g: rc=$?"; grep -E "^(FAIL|RESULT)" $OUT/test_nanochat_$g.log | head
done
MODELS=nanochat-d12 NO_PROFILE=1 STEPS=20 ATTENTIONS=cudnn BASELINE=.bench/gpt2gen.main timeout 200 sh bench/bench.sh \
    > $OUT/bench.log 2>&1
tail -3 $OUT/bench.log
SETS="--set train.gelu=fused" NO_TORCH=1 MODELS=nanochat-d12 NO_PROFILE=1 STEPS=20 ATTENTIONS=cudnn timeout 120 \
    sh bench/bench.sh > $OUT/bench_fused.log 2>&1
tail -2 $OUT/bench_fused.log
