#!/bin/sh
# bench/ncu_fc_gemm.sh: Nsight Compute on templates/fc_gemm.cu's two matmul kernels in a gpt2-124M training step
# (train.gelu = "fused"), for each WARPGROUPS (2: both warpgroups load and compute, two blocks a multiprocessor; 3: a
# producer warpgroup issuing TMA copies, one persistent block a multiprocessor), one launch of each kernel: duration,
# throughput (SM, DRAM, L1, L2), issue rate, the stall reasons and the tensor pipe's use. Run from the repository root
# on the GPU machine with ./gpt2gen built; writes build/ncu-logs/fc_gemm-wgN-KERNEL.txt and prints the lines that
# matter. SETS adds settings ("--set k=v ..."); WGS picks the variants (default "2 3"; "pp": WARPGROUPS 3 with a tile
# for each consumer warpgroup, TILE_WARPGROUPS 1, TILE_N 128, STAGES 4).
cd "$(dirname "$0")/.." || exit 1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
data=build/bench-data
sh bench/random_data.sh "$data"
mkdir -p build/ncu-logs
for wg in ${WGS:-2 3}; do
    # WARPGROUPS 3 at the family's defaults; 2 at its fastest measured variant (TILE_N 128, two blocks, STAGES 3)
    wgs=$wg
    case $wg in
    3) variant="" ;;
    pp) wgs=3 variant="--set tune.fc_gemm.TILE_WARPGROUPS=1 --set tune.fc_gemm.TILE_N=128 --set tune.fc_gemm.STAGES=4" ;;
    *) variant="--set tune.fc_gemm.TILE_N=128 --set tune.fc_gemm.SM_BLOCKS=2 --set tune.fc_gemm.STAGES=3" ;;
    esac
    for kernel in fc_gelu_forward fcproj_dgelu_backward; do
        log=build/ncu-logs/fc_gemm-wg$wg-$kernel.txt
        rm -rf build/ncu-ckpt-$wg
        $NCU --clock-control none --kernel-name $kernel --launch-count 1 \
            --section SpeedOfLight --section WarpStateStats --section Occupancy \
            --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_tensor_op.*cycles_active\.avg\.pct_of_peak_sustained_active" \
            ./gpt2gen train configs/gpt2-124M.lua --backend cuda --set train.gelu=fused --set tune.fc_gemm.WARPGROUPS=$wgs \
            $variant --set name=ncu-fc-$wg $SETS \
            --set train.steps=1 --set train.total_batch_size=65536 --set "data.train=$data/train_*.bin" \
            --set "data.val=$data/val_*.bin" --set data.tokenizer=none --set eval.val_every=0 --set eval.sample_every=0 \
            --set checkpoint.dir=build/ncu-ckpt-$wg > "$log" 2>&1
        echo "== WARPGROUPS=$wg $kernel ($log)"
        grep -E "fc_gelu_forward|fcproj_dgelu_backward|Duration|Throughput|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|pipe_tensor_op_hmma_cycles|issue_stalled|rror" "$log" |
            awk '$NF + 0 >= 0.05 || !/issue_stalled/' | grep -v "^ *--" | head -40
    done
done
