#!/bin/sh
# One device call for branch wip-relu2-fused (ReLU^2 inside fc_gemm's matmuls, train.gelu = "fused"): nanochat-d12's
# `gpt2gen test` with the fused path (fc_gemm's kernels against the CPU, the training step), then its training with
# and without it beside main's build and PyTorch. Carry .bench (gpt2gen: this branch's build; gpt2gen.main: main's),
# data/fortunes, data/gpt2.tiktoken. Merge it where the tests pass and the fused path beats main; then make it
# "auto"'s choice for ReLU^2 on Hopper, and the GPU suite at the merged commit.
export NCCL_NVLS_ENABLE=0
cp .bench/gpt2gen ./gpt2gen
timeout 150 ./gpt2gen test configs/nanochat-d12.lua --set train.gelu=fused > $OUT/test_nanochat_fused.log 2>&1
echo "gpt2gen test nanochat-d12, fused: rc=$?"; grep -E "^(FAIL|RESULT)" $OUT/test_nanochat_fused.log | head
SETS="--set train.gelu=fused" MODELS=nanochat-d12 NO_PROFILE=1 STEPS=20 ATTENTIONS=cudnn BASELINE=.bench/gpt2gen.main \
    timeout 200 sh bench/bench.sh > $OUT/bench.log 2>&1
tail -4 $OUT/bench.log
