#!/bin/sh
# bench/tune.sh: `gpt2gen tune --only train` (the training step's plan alone, as before the decode and eval plans
# were tuned too) on gpt2-124M (B=64) and gpt2-350M (B=32), then the untuned (--no-tune-db) and the
# tuned training step beside PyTorch (torch.compile, bf16, flash SDPA, fused AdamW) in the same call, on the
# random-token shards of bench/bench.sh, T=1024. Prints each tune's time and report (per kernel family and matmul:
# default and chosen variant, times, speedup; the step before and after) and one table. Run from the repository
# root on the GPU machine with ./gpt2gen built. MODELS (default "124M 350M"), STEPS (default 30), BUDGET (seconds
# per tune, default 540), NO_TORCH=1 skips PyTorch. The tuning database is build/tune-db.txt (or $GPT2GEN_TUNE_DB):
# a second run resumes from it, measuring nothing again.
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
STEPS=${STEPS:-30}
MODELS=${MODELS:-"124M 350M"}
BUDGET=${BUDGET:-540}
data=build/bench-data
logs=build/bench-logs
mkdir -p "$data" "$logs"
sh bench/random_data.sh "$data"
summary=$logs/tune-summary.txt
: > "$summary"
ours() {   # model B name extra-options...: the mean ms/step and tok/s of our trainer
    model=$1; B=$2; name=$3; shift 3
    ./gpt2gen train configs/gpt2-$model.lua --backend cuda --set train.batch_size=$B --set train.total_batch_size=$((B * 1024)) \
        --set train.steps=$STEPS --set train.warmup=10 --set "data.train=$data/train_*.bin" --set "data.val=$data/val_*.bin" \
        --set data.tokenizer=none --set eval.val_every=0 --set eval.sample_every=0 \
        --set checkpoint.dir=build/bench-ckpt-tune-$model-$name "$@" > "$logs/tune-ours-$model-$name.log" 2>&1
    grep -E '^(tune db|attention:)' "$logs/tune-ours-$model-$name.log" >&2
    grep '^done:' "$logs/tune-ours-$model-$name.log" | sed -E 's/.*mean ([0-9.]+) ms\/step, ([0-9]+) tok\/s.*/\1 \2/'
}
for model in $MODELS; do
    case $model in 124M) B=64 ;; 350M) B=32 ;; *) B=16 ;; esac
    t0=$(date +%s)
    ./gpt2gen tune configs/gpt2-$model.lua --only train --set train.batch_size=$B --budget "$BUDGET" > "$logs/tune-$model.log" 2> "$logs/tune-$model.err"
    rc=$?
    t1=$(date +%s)
    echo "== gpt2gen tune configs/gpt2-$model.lua (B=$B): rc $rc, $((t1 - t0)) s"
    cat "$logs/tune-$model.log"
    [ $rc -ne 0 ] && tail -5 "$logs/tune-$model.err"
    tms=nan; ttok=0
    if [ -z "$NO_TORCH" ]; then
        python3 bench/pytorch_gpt2.py --model $model --batch $B --steps $STEPS > "$logs/tune-torch-$model.log" 2>&1
        set -- $(grep '^pytorch' "$logs/tune-torch-$model.log" | sed -E 's/.*: ([0-9.]+) ms\/step, ([0-9]+) tok\/s.*/\1 \2/')
        tms=${1:-nan}; ttok=${2:-0}
    fi
    set -- $(ours $model $B untuned --no-tune-db); ums=${1:-nan}; utok=${2:-0}
    set -- $(ours $model $B tuned); tuned_ms=${1:-nan}; tuned_tok=${2:-0}
    awk -v m=$model -v b=$B -v s=$((t1 - t0)) -v ums=$ums -v utok=$utok -v tms=$tuned_ms -v ttok=$tuned_tok -v pms=$tms -v ptok=$ttok 'BEGIN {
        printf "%-5s B=%-3d tune %4d s | untuned %7s ms %7d tok/s | tuned %7s ms %7d tok/s (%.3fx) | pytorch %7s ms %7d tok/s | tuned/pytorch %s\n",
            m, b, s, ums, utok, tms, ttok, (ttok > 0 && utok > 0 ? ttok / utok : 0), pms, ptok, (ptok > 0 ? sprintf("%.2f", ttok / ptok) : "-") }' >> "$summary"
done
echo "== tuned vs untuned beside PyTorch (T=1024, bf16, random tokens, $STEPS steps, first steps excluded)"
cat "$summary"
