#!/bin/sh
# bench/gpu_x2.sh: everything the 2-GPU machine is for, in one command: the several-GPU tests (tests/gpu/ranks.sh:
# 2 GPUs = 1 GPU with accumulation, ZeRO-0 = ZeRO-1, overlap = no overlap, exact resume, mpirun, killed ranks) and
# the scaling benchmark beside PyTorch DDP (bench/ranks.sh). Run from the repository root with ./gpt2gen built and
# data/fortunes made; prints both summaries last and copies the logs to $OUT if set. About 2 + 4 minutes.
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
mkdir -p build/test-logs build/bench-logs
sh tests/gpu/ranks.sh > build/test-logs/gpu-ranks.out 2>&1; status=$?
sh bench/ranks.sh > build/bench-logs/ranks.log 2>&1 || status=1
[ -n "$OUT" ] && cp build/test-logs/gpu-ranks.out build/bench-logs/ranks*.log build/bench-logs/ranks-summary.txt "$OUT"/ 2>/dev/null
echo "== tests/gpu/ranks.sh"
grep -E '^(ok|FAIL|skip|RESULT)' build/test-logs/gpu-ranks.out
sed -n '/== data parallel scaling/,$p' build/bench-logs/ranks.log
exit $status
