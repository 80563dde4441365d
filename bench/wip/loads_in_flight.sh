#!/bin/sh
# One device call for branch wip-decode-loads-in-flight (the decode linears' weight packets loaded into registers
# before griddepcontrol.wait, every load branch-free): the GPU tests its kernels touch, then the decode benchmark
# beside main's build. Before the call, here: `make && make tests-bin`, then copy into .w (git-ignored) this branch's
# gpt2gen, build/tests/test_gpu and test_sample, stripped, and main's gpt2gen as gpt2gen.main; carry .w,
# data/fortunes and data/gpt2.tiktoken. About 6 minutes. Merge where every test passes and batch 1 is faster (then
# the GPU suite at the merge); the math is the same sums in the same order, so the tests must pass unchanged.
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name --format=csv,noheader
cp .w/gpt2gen ./gpt2gen; mkdir -p build/tests; cp .w/test_gpu .w/test_sample build/tests/
timeout 120 build/tests/test_sample > $OUT/test_sample.log 2>&1; echo "test_sample rc=$?"
grep -E "^(FAIL|RESULT)|decode vs" $OUT/test_sample.log
for f in bf16 llama nano; do
    timeout 150 build/tests/test_gpu $f > $OUT/test_gpu_$f.log 2>&1; echo "test_gpu $f rc=$?"; grep -E "^(FAIL|RESULT)" $OUT/test_gpu_$f.log | tail -3
done
for b in ./gpt2gen ./.w/gpt2gen.main; do
    OURS=$b MODELS="124M llama-124M 350M" BATCHES="1 2" NO_HF=1 NO_TORCH=1 NO_NOCACHE=1 NO_PREFILL=1 RUNS=2 \
        timeout 150 sh bench/sample.sh > $OUT/sample_$(basename $b).log 2>&1
    echo "== $b"; grep -E "^\| (gpt2|llama)" build/bench-logs/sample-summary.md
done
