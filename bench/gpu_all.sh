#!/bin/sh
# bench/gpu_all.sh: everything the GPU machine is for, in one command: `sh bench/gpu_all.sh tests` runs the
# GPU test suite (tests/gpu.sh = make test-gpu), `sh bench/gpu_all.sh bench` the benchmark against PyTorch
# (bench/bench.sh), `sh bench/gpu_all.sh` both. Run from the repository root with ./gpt2gen and the test
# programs built (make gpt2gen tests-bin); prints the summary tables last. Copies the logs to $OUT if set.
# On the H200 (2026-11-30) the tests took about 6 minutes and the benchmark (both attention paths, two models,
# profiles) about 5: give each its own call where a call is limited to 10 minutes. Since cuDNN's second backward
# (2026-12-02) the tests run longer: PARTS (tests/gpu.sh) splits them over calls.
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
what=${1:-all}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "$what" = tests ] || [ "$what" = all ]; then
    sh tests/gpu.sh > build/gpu-tests.log 2>&1 || status=1
    grep -E '^(FAIL|skip)' build/gpu-tests.log | head -40
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    sh bench/bench.sh > build/gpu-bench.log 2>&1 || status=1
fi
if [ -n "$OUT" ]; then
    cp build/gpu-tests.log build/gpu-bench.log "$OUT"/ 2>/dev/null
    cp build/test-logs/gpu-summary.txt "$OUT"/ 2>/dev/null
fi
[ -f build/gpu-tests.log ] && sed -n '/== GPU test summary/,$p' build/gpu-tests.log
[ -f build/gpu-bench.log ] && sed -n '/== benchmark/,$p' build/gpu-bench.log
exit $status
