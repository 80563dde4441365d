#!/bin/sh
# tests/gpu.sh: what `make test-gpu` runs on the GPU machine, in one call: the test programs, both attention paths
# over a range of shapes, `gpt2gen test` on the configs, the tuner, several ranks and end to end, as parallel
# processes on the one GPU (tests/gpu/pool.sh), then the jobs that must run alone. PARTS picks parts:
#   programs   test_gpu (the per-variant GPU tests on small configs: every kernel against the CPU reference, a full
#              training step against the CPU backend; the golden 10 steps), test_sample, sample and eval on the GPU
#              (tests/cli/sample.sh, eval.sh), test_eval, test_hopper_probe, tests/gpu/hf.py
#   attention  test_attention: the flash template and cuDNN's two backwards against fp64, by groups of shapes
#   configs    `gpt2gen test` on the configs in configs/ (CONFIGS="gpt2-124M ..." picks them), tests/gpu/tune.sh,
#              ranks.sh, e2e.sh
# The default runs all three. Each job's output is in build/gpu-tests/<part>/<name>.log; its result lines are printed
# as it ends, then a summary table (also build/test-logs/gpu-summary.txt), each part's wall time, the counts
# ("N passed, N failed, N skipped") and the whole run's wall time. Exit code 1 when a test failed.
#
# Run alone, with no other process on the GPU: the jobs whose checks another process would disturb.
# tests/gpu/tune.sh's `gpt2gen test` runs hold the GPU memory that creating a backend takes, read as the GPU's free
# memory before and after (tune/step_test.c, "plan memory"), to the plan's arena (the parallel jobs run with
# GPT2GEN_GPU_SHARED=1, which leaves that reading out: test_gpu's variants are checked against their arenas); and
# tune.sh times variants against its --budget and then expects a second tune to find everything measured. The
# rest check results, not times (their timing lines are informational), and share the GPU.
# Not in the default list of configs: tiny (tests/gpu/tune.sh runs `gpt2gen test configs/tiny.lua` in fp32 and
# bf16 on its tuned variants, and test_gpu's gt-fp32 is tiny with recompute 0) and gpt3-125M (gpt2-124M's widths,
# heads, layers and B*T rows, so every row kernel and matmul at 124M's shape; its T = 2048 is the attention's,
# which test_attention runs at T = 2048 on the same sm_90 kernels, cuDNN's too), and nanochat-d12 (its kernels, at
# its head size of 128, are test_gpu's gt-nano variants; llama-124M stays, for a relative at full size): the suite
# must fit one call of 8 minutes. CONFIGS names them to run them.
#
# Environment: GPT2GEN_GPU_JOBS (parallel jobs, default 6), GPT2GEN_GPU_GIB (their estimated GPU memory together,
# default 90% of GPU 0's), GPT2GEN_GPU_JOB_TIMEOUT (seconds a job may run, default 450), GPT2GEN_GPU_DEADLINE
# (seconds after which no job starts and running ones are stopped, so that the summary comes within a limited
# call; default none), GPT2GEN_GPU_OMP (OMP_NUM_THREADS of the parallel jobs' CPU references, default 4),
# GPT2GEN_GPU_FORCE=1 (run the jobs without a GPU: each skips its GPU tests; a check of this script).
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. tests/gpu/pool.sh
export NCCL_NVLS_ENABLE=0
# one kernel cache for every job (tests/run.sh's): the shell tests' scratch folders use it too
export GPT2GEN_TEST_CACHE="${GPT2GEN_TEST_CACHE:-$PWD/build/cache}"
t_start=$(date +%s)
log=build/test-logs; mkdir -p "$log"
summary="$log/gpu-summary.txt"; : > "$summary"
pool_row() { printf "%-28s %5s %5s %5s %5s  %s\n" "$1" "$2" "$3" "$4" "$5" "$6" >> "$summary"; }   # ... seconds note
PARTS=${PARTS:-"programs attention configs"}
for p in $PARTS; do
    case $p in programs|attention|configs) ;; *) echo "tests/gpu.sh: PARTS: unknown part '$p' (programs, attention, configs)" >&2; exit 2 ;; esac
done
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -eq 0 ] && [ "$GPT2GEN_GPU_FORCE" != 1 ]; then
    echo "== GPU test summary"
    skip gpu_suite "no GPU here (nvidia-smi lists none); \`make test\` runs these programs' parts that need no GPU"
    echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
    exit 0
fi
mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
case "$mib" in ''|*[!0-9]*) mib=65536 ;; esac
POOL_JOBS=${GPT2GEN_GPU_JOBS:-6}
POOL_GIB=${GPT2GEN_GPU_GIB:-$((mib * 9 / 10 / 1024))}
POOL_TIMEOUT=${GPT2GEN_GPU_JOB_TIMEOUT:-450}
POOL_DEADLINE=${GPT2GEN_GPU_DEADLINE:-0}
POOL_OMP=${GPT2GEN_GPU_OMP:-4}
for v in "$POOL_JOBS" "$POOL_GIB" "$POOL_TIMEOUT" "$POOL_DEADLINE" "$POOL_OMP"; do
    case "$v" in ''|*[!0-9]*) echo "tests/gpu.sh: GPT2GEN_GPU_*: expected whole numbers, got '$v'" >&2; exit 2 ;; esac
done
[ "$POOL_JOBS" -ge 1 ] || POOL_JOBS=1
pool_init build/gpu-tests
for p in $PARTS; do rm -rf "build/gpu-tests/$p"; done
echo "== GPU tests: parts $PARTS; $POOL_JOBS jobs at a time within $POOL_GIB GiB of GPU memory (GPU 0: $mib MiB), logs in build/gpu-tests/"
T=build/tests

# pool_add PART NAME MODE GIB SECONDS CMD: GIB the job's GPU memory at its peak, SECONDS about how long it takes
# alone on the H200 (the longest start first); see tests/gpu/pool.sh
if want programs; then
    # test_gpu whole, beside the others (its "plan memory" then checks each arena against the plan but not the GPU's
    # free memory: GPT2GEN_GPU_SHARED; tune_test's `gpt2gen test` runs, alone, check that too): its GPU tests use the
    # variants its builds made in the same process (a process of its GPU tests alone skips them all, "did not
    # build"), so it is not split by filter. About 200 s alone on the H100, its builds cached.
    pool_add programs test_gpu par 4 260 "$T/test_gpu"
    pool_add programs test_sample par 4 35 "$T/test_sample"
    pool_add programs sample_cli par 2 20 "SAMPLE_BACKEND=cuda sh tests/cli/sample.sh"
    pool_add programs test_eval par 2 6 "$T/test_eval"
    pool_add programs eval_cli par 2 6 "EVAL_BACKEND=cuda sh tests/cli/eval.sh"
    pool_add programs hopper_probe par 1 2 "$T/test_hopper_probe"
    pool_add programs hf par 1 40 "python3 tests/gpu/hf.py"
fi
if want attention; then
    # test_attention by its tests' names (a test added there needs its group here)
    pool_add attention test_attention.reference par 0 2 "$T/test_attention test_reference"
    pool_add attention test_attention.cudnn par 1 2 "$T/test_attention test_cudnn_"
    pool_add attention test_attention.bf16 par 3 40 "$T/test_attention test_flash_bf16_"
    pool_add attention test_attention.fp16 par 3 20 "$T/test_attention test_flash_fp16_"
    pool_add attention test_attention.fp32 par 1 8 "$T/test_attention test_flash_fp32_"
    pool_add attention test_attention.wgmma par 3 90 "$T/test_attention test_flash_wgmma"
    pool_add attention test_attention.odd_t par 2 70 "$T/test_attention test_flash_backward_tiles_odd_t"
    pool_add attention test_attention.gqa par 2 40 "$T/test_attention test_flash_gqa"
    pool_add attention test_attention.gpt2_124m par 6 40 "$T/test_attention test_flash_tiles_gpt2_124m"
fi
if want configs; then
    list=$(ls configs/*.lua | grep -v -e '/defaults.lua$' -e '/tiny.lua$' -e '/gpt3-125M.lua$' -e '/nanochat-d12.lua$')
    [ -n "$CONFIGS" ] && list=$(for n in $CONFIGS; do echo configs/$n.lua; done)
    for c in $list; do
        name=$(basename "$c" .lua)
        # the arena of its training plan (build/<name>/plan.txt) and the tests' buffers beside it
        case $name in gpt2-1558M) gib=44 s=200 ;; gpt2-774M) gib=34 s=150 ;; gpt2-350M) gib=26 s=120 ;;
                      gpt2-124M|gpt3-125M) gib=21 s=100 ;; llama-124M) gib=24 s=120 ;; nanochat-d12) gib=28 s=120 ;;
                      *) gib=40 s=150 ;; esac
        mode=par
        [ "$name" = tiny ] && mode=alone   # small enough for its training step against the CPU's: "plan memory"
        pool_add configs "$name" $mode $gib $s "./gpt2gen test $c"
    done
    pool_oom_is_skip configs
    # the tunes share the GPU; `gpt2gen test` on their variants ("plan memory") runs alone after them (alone jobs
    # start when every parallel one has ended), from the database they left in build/gpu-tests/tune-work
    rm -rf build/gpu-tests/tune-work
    pool_add configs tune par 2 210 "TUNE_PHASE=tune TUNE_WORK=$PWD/build/gpu-tests/tune-work sh tests/gpu/tune.sh"
    pool_add configs tune_test alone 2 25 "TUNE_PHASE=test TUNE_WORK=$PWD/build/gpu-tests/tune-work sh tests/gpu/tune.sh"
    pool_add configs ranks par 4 15 "sh tests/gpu/ranks.sh"
    pool_add configs e2e par 21 60 "sh tests/gpu/e2e.sh"
fi
pool_run

echo
echo "== GPU test summary"
printf "%-28s %5s %5s %5s %5s  %s\n" config ok FAIL skip s note
cat "$summary"
pool_parts_report
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
echo "GPU tests took $(( $(date +%s) - t_start )) s in all (parts: $PARTS)"
[ "$FAILED" -eq 0 ]
