#!/bin/sh
# One device call for branch wip-qknorm-rope (QK-norm and RoPE in one pass): its nanochat-shaped GPU tests, then
# nanochat-d12's `gpt2gen test` and its training beside main's build and PyTorch. Carry .bench (gpt2gen: this
# branch's build; gpt2gen.main: main's; test_gpu: this branch's, stripped), data/fortunes, data/gpt2.tiktoken.
# Merge it where the tests pass and nanochat-d12 beats main; then the GPU suite (make test-gpu) at the merged commit.
export NCCL_NVLS_ENABLE=0
cp .bench/gpt2gen ./gpt2gen
mkdir -p build/tests && cp .bench/test_gpu build/tests/
timeout 200 build/tests/test_gpu nano > $OUT/test_gpu_nano.log 2>&1; echo "test_gpu nano: rc=$?"
grep -E "^(FAIL|RESULT)" $OUT/test_gpu_nano.log | head
timeout 150 ./gpt2gen test configs/nanochat-d12.lua > $OUT/test_nanochat.log 2>&1; echo "gpt2gen test nanochat-d12: rc=$?"
grep -E "^(FAIL|RESULT)" $OUT/test_nanochat.log | head
MODELS=nanochat-d12 NO_PROFILE=1 STEPS=20 ATTENTIONS=cudnn BASELINE=.bench/gpt2gen.main timeout 200 sh bench/bench.sh \
    > $OUT/bench.log 2>&1
tail -4 $OUT/bench.log
