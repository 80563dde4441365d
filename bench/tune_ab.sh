#!/bin/sh
# bench/tune_ab.sh: one kernel family's variants timed by `gpt2gen tune` in two builds, alternated (A B A B ...) in one
# call so that the machine's drift shows as the spread within each, for an A/B comparison of a template change (the
# templates are embedded in the binary: build A, copy it aside, change, build B). Run from the repository root on the
# GPU machine:
#   A=build/carry/gpt2gen-a B=./gpt2gen FAMILY=fc_gemm MODELS="124M 350M" ROUNDS=2 \
#     SETS="--set train.gelu=fused --set tune.fc_gemm.TILE_N={256,128}" sh bench/tune_ab.sh
# Each run uses a scratch tuning database (the real one is left alone) and prints one line per variant: model, build,
# the variant's tunables and its time in us (a layer's work, as the tuner's workload for the family defines it).
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
A=${A:?A=path of build A}
B=${B:-./gpt2gen}
FAMILY=${FAMILY:-fc_gemm}
db=$(mktemp -d)/tune.db
for m in ${MODELS:-124M}; do
    r=0
    while [ $r -lt "${ROUNDS:-2}" ]; do
        for ab in A B; do
            if [ $ab = A ]; then bin=$A; else bin=$B; fi
            rm -f "$db"
            # shellcheck disable=SC2086 # SETS holds several words
            GPT2GEN_TUNE_DB=$db "$bin" tune configs/gpt2-$m.lua --only train --kernels "$FAMILY" --set name=tune-ab-$ab-$m $SETS \
                > build/tune-ab-$ab-$m.log 2>&1 || echo "$m $ab: gpt2gen tune failed (build/tune-ab-$ab-$m.log)"
            grep "tune \[" build/tune-ab-$ab-$m.log | grep " $FAMILY " |
                sed -E "s/^tune \[[0-9]+\/[0-9]+\] [^:]*: $FAMILY /$m $ab /; s/, elapsed.*//"
        done
        r=$((r + 1))
    done
done
