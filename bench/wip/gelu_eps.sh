#!/bin/sh
# One device call for branch wip-relatives-gelu-eps (LayerNorm at any model.norm_eps and a GELU MLP of any n_ffn on
# the GPU): test_gpu's fp32 variants (GPT-2's LayerNorm kernel tests at the model's eps; gt-gelu-eps-fp32, eps 1e-6
# and n_ffn 3C with the GELU recompute, every kernel and a training step against the CPU backend). Carry .g (this
# branch's test_gpu, stripped). About 2 minutes. Merge where it passes, then run the full GPU suite at the merge.
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p build/tests; cp .g/test_gpu build/tests/
timeout 300 build/tests/test_gpu fp32 > $OUT/test_gpu_fp32.log 2>&1; echo "test_gpu fp32 rc=$?"
grep -E "^(FAIL|RESULT)|gelu_eps" $OUT/test_gpu_fp32.log | tail -20
