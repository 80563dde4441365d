#!/bin/sh
# bench/ranks.sh: data parallel scaling on the 2-GPU machine, beside PyTorch DDP in the same call. gpt2-124M, bf16,
# T=1024, B=64 per GPU, random tokens: ours on 1 GPU, on 2 GPUs with ZeRO-1 (the gradients' averaging overlapped
# with the backward, the default, and after it: "serial", GPT2GEN_COMM_OVERLAP=0) and ZeRO-0 (--gpus 2), PyTorch
# (torch.compile, flash SDPA, fused AdamW) on 1 GPU and under torchrun with DDP on 2. Prints tok/s, the scaling
# over 1 GPU, and the peak memory of the busiest GPU (nvidia-smi, sampled). STEPS (default 30) steps each;
# NO_TORCH=1 skips PyTorch. Run from the repository root with ./gpt2gen built.
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
STEPS=${STEPS:-30}
B=64
data=build/bench-data
logs=build/bench-logs
mkdir -p "$data" "$logs"
sh bench/random_data.sh "$data"
peak_mem() {   # runs "$@" while sampling every GPU's memory; the max MiB over GPUs and time goes to $PEAK_FILE
    ( max=0; while :; do for m in $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null); do
          [ "$m" -gt "$max" ] && max=$m && echo "$max" > "$PEAK_FILE"; done; sleep 0.2; done ) &
    sampler=$!
    "$@"; rc=$?
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    return $rc
}
summary=$logs/ranks-summary.txt
: > "$summary"
row() {   # name, tok/s, peak MiB, base tok/s
    printf "%-22s %9s tok/s  x%-5s %6.1f GiB per GPU\n" "$1" "$2" \
        "$(awk -v a="$2" -v b="$4" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')" \
        "$(awk -v m="$3" 'BEGIN { print m / 1024 }')" >> "$summary"
}
ours() {   # name, options...
    name=$1; shift
    PEAK_FILE=$logs/ranks-$name.peak; echo 0 > "$PEAK_FILE"
    peak_mem ./gpt2gen train configs/gpt2-124M.lua --set train.batch_size=$B --set train.steps=$STEPS --set train.warmup=10 \
        --set "data.train=$data/train_*.bin" --set "data.val=$data/val_*.bin" --set data.tokenizer=none \
        --set eval.val_every=0 --set eval.sample_every=0 --set checkpoint.every=0 \
        --set checkpoint.dir=build/bench-ckpt-ranks-$name "$@" > "$logs/ranks-$name.log" 2>&1 || echo "ours $name: FAILED (see $logs/ranks-$name.log)"
    rm -rf build/bench-ckpt-ranks-$name
    tail -1 "$logs/ranks-$name.log"
    grep '^done:' "$logs/ranks-$name.log" | sed -E 's/.* ([0-9]+) tok\/s.*/\1/'
}
torch() {   # name, launcher...
    name=$1; shift
    PEAK_FILE=$logs/ranks-$name.peak; echo 0 > "$PEAK_FILE"
    peak_mem "$@" bench/pytorch_gpt2.py --model 124M --batch $B --steps $STEPS > "$logs/ranks-$name.log" 2>&1
    grep '^pytorch' "$logs/ranks-$name.log" | tail -1
    grep '^pytorch' "$logs/ranks-$name.log" | sed -E 's/.* ([0-9]+) tok\/s.*/\1/'
}
o1=$(ours one --set train.total_batch_size=$((B * 1024))); echo "$o1" | head -1; o1=$(echo "$o1" | tail -1)
o2=$(ours two-zero1 --gpus 2 --set train.total_batch_size=$((2 * B * 1024))); echo "$o2" | head -1; o2=$(echo "$o2" | tail -1)
on=$(GPT2GEN_COMM_OVERLAP=0 ours two-zero1-serial --gpus 2 --set train.total_batch_size=$((2 * B * 1024))); echo "$on" | head -1; on=$(echo "$on" | tail -1)
o0=$(ours two-zero0 --gpus 2 --set train.zero_stage=0 --set train.total_batch_size=$((2 * B * 1024))); echo "$o0" | head -1; o0=$(echo "$o0" | tail -1)
row "ours 1 GPU" "$o1" "$(cat $logs/ranks-one.peak)" "$o1"
row "ours 2 GPUs ZeRO-1" "$o2" "$(cat $logs/ranks-two-zero1.peak)" "$o1"
row "ours 2 GPUs ZeRO-1 serial" "$on" "$(cat $logs/ranks-two-zero1-serial.peak)" "$o1"
row "ours 2 GPUs ZeRO-0" "$o0" "$(cat $logs/ranks-two-zero0.peak)" "$o1"
if [ -z "$NO_TORCH" ]; then
    t1=$(torch torch-one python3); echo "$t1" | head -1; t1=$(echo "$t1" | tail -1)
    t2=$(torch torch-ddp2 torchrun --standalone --nproc_per_node=2); echo "$t2" | head -1; t2=$(echo "$t2" | tail -1)
    row "pytorch 1 GPU" "$t1" "$(cat $logs/ranks-torch-one.peak)" "$t1"
    row "pytorch DDP 2 GPUs" "$t2" "$(cat $logs/ranks-torch-ddp2.peak)" "$t1"
    echo "ours/pytorch on 2 GPUs: $(awk -v a="$o2" -v b="$t2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')" >> "$summary"
fi
echo "== data parallel scaling (gpt2-124M, bf16, B=$B per GPU, T=1024, $STEPS steps; xN = tok/s over the same trainer on 1 GPU)"
cat "$summary"
