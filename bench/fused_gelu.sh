#!/bin/sh
# bench/fused_gelu.sh: train.gelu = "fused" (templates/fc_gemm.cu) on the GPU machine, from the repository root with
# ./gpt2gen and build/tests/test_gpu built. PARTS (default "tests tune steps model-test") picks what runs, in order:
#   tests  test_gpu's fused variant (the kernels against the CPU, whole steps against the CPU, the graph and the two
#          streams) and its wgmma variant (the Hopper helpers both templates share)
#   model-test  `gpt2gen test` at MODEL with the fused path (every kernel at the model's B and T)
#   tune   the fc_gemm family's variants and the cuBLASLt matmuls they replace, at MODEL (default 124M), into a
#          scratch tuning database (the real one is left alone)
#   steps  whole steps of the fused path at the family's defaults against the same build's cuBLASLt epilogues and GELU
#          kernels, and the fused path with a tile for each consumer warpgroup (pingpong: TILE_WARPGROUPS 1, TILE_N
#          128, STAGES 4) (bench/bench.sh, NO_TORCH=1 unless TORCH=1), at MODELS (default "124M 350M")
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
PARTS=${PARTS:-"tests tune steps model-test"}
MODEL=${MODEL:-124M}
logs=build/fused-logs
mkdir -p "$logs"
for part in $PARTS; do
    case $part in
    tests)
        ./build/tests/test_gpu fused 2>&1 | tee "$logs/test_gpu-fused.log" | grep -E "^(ok|FAIL|skip|RESULT)|FAIL" | tail -40
        ./build/tests/test_gpu wgmma 2>&1 | tee "$logs/test_gpu-wgmma.log" | grep -E "^(FAIL|RESULT)|FAIL" | tail -20 ;;
    model-test)
        ./gpt2gen test configs/gpt2-$MODEL.lua --set train.gelu=fused --set name=fused-test-$MODEL 2>&1 |
            tee "$logs/test-$MODEL.log" | grep -E "fc_gemm|fused|FAIL|RESULT" | tail -20 ;;
    tune)
        db=build/fused-logs/tune.db; rm -f "$db"
        GPT2GEN_TUNE_DB=$db ./gpt2gen tune configs/gpt2-$MODEL.lua --only train --set train.gelu=fused --set name=fused-tune-$MODEL \
            --kernels 'fc_gemm' > "$logs/tune-fc_gemm-$MODEL.log" 2>&1
        GPT2GEN_TUNE_DB=$db ./gpt2gen tune configs/gpt2-$MODEL.lua --only train --set train.gelu=epilogue --set name=epi-tune-$MODEL \
            --kernels 'fc*,bias' > "$logs/tune-matmuls-$MODEL.log" 2>&1
        cat build/fused-tune-$MODEL/tune_report.txt build/epi-tune-$MODEL/tune_report.txt ;;
    steps)
        printf '#!/bin/sh\nexec ./gpt2gen "$@" --set train.gelu=%s\n' epilogue > build/gelu-epilogue.sh
        printf '#!/bin/sh\nexec ./gpt2gen "$@" --set train.gelu=%s\n' kernel > build/gelu-kernel.sh
        printf '#!/bin/sh\nexec ./gpt2gen "$@" --set train.gelu=fused --set tune.fc_gemm.TILE_WARPGROUPS=1 --set tune.fc_gemm.TILE_N=128 --set tune.fc_gemm.STAGES=4\n' > build/gelu-pingpong.sh
        chmod +x build/gelu-epilogue.sh build/gelu-kernel.sh build/gelu-pingpong.sh
        if [ -n "$TORCH" ]; then no_torch=; else no_torch=1; fi
        NO_TORCH=$no_torch STEPS=${STEPS:-20} NO_PROFILE=1 ATTENTIONS=flash MODELS="${MODELS:-124M 350M}" \
            BUILDS="epilog=build/gelu-epilogue.sh kernel=build/gelu-kernel.sh pingpg=build/gelu-pingpong.sh" SETS="--set train.gelu=fused" sh bench/bench.sh ;;
    esac
done
