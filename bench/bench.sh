#!/bin/sh
# bench/bench.sh: our trainer against PyTorch (torch.compile, bf16 autocast, flash SDPA, fused AdamW) in the
# same run, on random-token shards, T=1024: GPT-2 124M at B=64 and 350M at B=32 (and, where MODELS names them,
# GPT-2's relatives configs/llama-124M.lua and configs/nanochat-d12.lua at B=64, beside a PyTorch model of the same
# architecture: bench/pytorch_gpt2.py). Prints tok/s, ms/step, the peak
# GPU memory, the mean SM clock and power of each, and the ratio ours/PyTorch. Run from the repository root on the
# GPU machine, with ./gpt2gen built. STEPS (default 30) steps each; MODELS (default "124M 350M"); ATTENTIONS
# (default "cudnn flash": ours once per attention path); NO_TORCH=1 skips PyTorch; NO_PROFILE=1 skips the per-op
# profile (both paths). BASELINE=path/to/another/gpt2gen also runs that build (say, the commit before a change) in
# the same call: its rows say "base"; BUILDS="label=path ..." runs more builds, each row saying its label (labels
# of at most 6 letters); SETS="--set k=v ..." adds settings to every run of ours (not the other builds'); BATCH=N
# runs every model at batch size N (PyTorch too) instead of its default. With the profiles, a run under
# GPT2GEN_QUEUE_PROFILE=1 says how far the host runs ahead of the GPU in a 124M micro-step.
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
STEPS=${STEPS:-30}
MODELS=${MODELS:-"124M 350M"}
runs="${BASELINE:+base=$BASELINE} $BUILDS ours=./gpt2gen"   # label=binary, ours last
ATTENTIONS=${ATTENTIONS:-"cudnn flash"}
data=build/bench-data
mkdir -p "$data" build/bench-logs
sh bench/random_data.sh "$data"   # random-token shards
peak_mem() {   # runs "$@" while sampling the GPU every 0.2 s: the max memory (MiB) to $PEAK_FILE; the samples
    # (memory MiB, SM clock MHz, power W, utilization %) to $PEAK_FILE.smi, for clocks_power below
    : > "$PEAK_FILE.smi"
    ( max=0; while :; do s=$(nvidia-smi --query-gpu=memory.used,clocks.sm,power.draw,utilization.gpu --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
      m=${s%%,*}; [ -n "$s" ] && echo "$s" >> "$PEAK_FILE.smi"
      [ -n "$m" ] && [ "$m" -gt "$max" ] && max=$m && echo "$max" > "$PEAK_FILE"; sleep 0.2; done ) &
    sampler=$!
    "$@"; rc=$?
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    return $rc
}
# "MHZ W": the mean SM clock and power over the samples of $1.smi where the GPU was busy (utilization >= 90%: the
# steps, not the start-up); the H200 holds its power near the 700 W cap there by lowering the clock, so a faster
# step can run at a lower clock (docs/kernels-and-tuning.md, "The step is power-bound")
clocks_power() {
    awk -F', *' '$4 >= 90 { n++; c += $2; p += $3 } END { if (n) printf "%d %d", c / n, p / n; else print "0 0" }' "$1.smi"
}
summary=build/bench-logs/summary.txt
: > "$summary"
for model in $MODELS; do
    case $model in 124M|llama-124M|nanochat-d12) B=64 ;; 350M) B=32 ;; 774M) B=16 ;; *) B=8 ;; esac
    case $model in *-*) config=configs/$model.lua ;; *) config=configs/gpt2-$model.lua ;; esac
    B=${BATCH:-$B}
    theirs=""; theirs_mem=0; theirs_cp="0 0"
    if [ -z "$NO_TORCH" ]; then
        tlog=build/bench-logs/torch-$model.log
        PEAK_FILE=build/bench-logs/torch-$model.peak; echo 0 > $PEAK_FILE
        peak_mem python3 bench/pytorch_gpt2.py --model $model --batch $B --steps $STEPS > "$tlog" 2>&1
        tail -1 "$tlog"
        theirs=$(grep '^pytorch' "$tlog" | sed -E 's/.*: ([0-9.]+) ms\/step, ([0-9]+) tok\/s.*/\1 \2/')
        theirs_mem=$(cat $PEAK_FILE); theirs_cp=$(clocks_power $PEAK_FILE)
    fi
    set -- $theirs; tms=${1:-nan}; ttok=${2:-0}
    for lb in $runs; do
    for att in $ATTENTIONS; do
        run=${lb%%=*}; bin=${lb#*=}; sets=
        [ $run = ours ] && sets=$SETS
        log=build/bench-logs/$run-$model-$att.log
        PEAK_FILE=build/bench-logs/$run-$model-$att.peak; echo 0 > $PEAK_FILE
        rm -rf build/bench-ckpt-$run-$model-$att   # a folder holding a run is refused
        peak_mem $bin train $config --backend cuda $sets --set train.batch_size=$B --set train.total_batch_size=$((B * 1024)) \
            --set train.steps=$STEPS --set train.warmup=10 --set "data.train=$data/train_*.bin" --set "data.val=$data/val_*.bin" \
            --set data.tokenizer=none --set eval.val_every=0 --set eval.sample_every=0 --set attention=$att \
            --set checkpoint.dir=build/bench-ckpt-$run-$model-$att > "$log" 2>&1
        rc=$?
        grep '^attention:' "$log"; tail -2 "$log"
        ours=$(grep '^done:' "$log" | sed -E 's/.*mean ([0-9.]+) ms\/step, ([0-9]+) tok\/s.*/\1 \2/')
        [ $rc -ne 0 ] && echo "$run $model $att: FAILED (rc $rc, see $log)"
        ours_mem=$(cat $PEAK_FILE); ours_cp=$(clocks_power $PEAK_FILE)
        set -- $ours; oms=${1:-nan}; otok=${2:-0}
        ratio=$(awk -v a="$otok" -v b="$ttok" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
        printf "%-6s B=%-3s %-6s %-6s %8s tok/s %7s ms/step %6.1f GiB %4s MHz %3s W | pytorch %8s tok/s %7s ms/step %6.1f GiB %4s MHz %3s W | ours/pytorch %s\n" \
            $model $B $att $run $otok $oms $(awk -v m=$ours_mem 'BEGIN{print m/1024}') $ours_cp $ttok $tms $(awk -v m=$theirs_mem 'BEGIN{print m/1024}') $theirs_cp $ratio >> "$summary"
    done
    done
done
# where the time of a 124M step goes, per attention path: GPT2GEN_PROFILE=1 times each op between CUDA events
if [ -z "$NO_PROFILE" ]; then
    for lb in $runs; do
    for att in $ATTENTIONS; do
        run=${lb%%=*}; bin=${lb#*=}; sets=
        [ $run = ours ] && sets=$SETS
        rm -rf build/bench-ckpt-profile-$run-$att
        GPT2GEN_PROFILE=1 $bin train configs/gpt2-124M.lua --backend cuda $sets --set train.batch_size=64 \
            --set train.total_batch_size=65536 --set train.steps=6 --set train.warmup=2 --set "data.train=$data/train_*.bin" \
            --set "data.val=$data/val_*.bin" --set data.tokenizer=none --set eval.val_every=0 --set eval.sample_every=0 \
            --set attention=$att --set checkpoint.dir=build/bench-ckpt-profile-$run-$att > build/bench-logs/profile-$run-124M-$att.log 2>&1
    done
    done
    # how far the host runs ahead of the GPU in a micro-step (GPT2GEN_QUEUE_PROFILE): whether a CUDA graph could help
    att=${ATTENTIONS%% *}
    rm -rf build/bench-ckpt-queue
    GPT2GEN_QUEUE_PROFILE=1 ./gpt2gen train configs/gpt2-124M.lua --backend cuda $SETS --set train.batch_size=64 \
        --set train.total_batch_size=65536 --set train.steps=6 --set train.warmup=2 --set "data.train=$data/train_*.bin" \
        --set "data.val=$data/val_*.bin" --set data.tokenizer=none --set eval.val_every=0 --set eval.sample_every=0 \
        --set attention=$att --set checkpoint.dir=build/bench-ckpt-queue > build/bench-logs/queue-124M-$att.log 2>&1
fi
echo "== benchmark (T=1024, bf16, random tokens, $STEPS steps, first steps excluded; memory = nvidia-smi peak; MHz, W = mean SM clock and power while busy)"
cat "$summary"
for lb in $runs; do
for att in $ATTENTIONS; do
    run=${lb%%=*}
    [ -f build/bench-logs/profile-$run-124M-$att.log ] || continue
    echo "== profile of a gpt2-124M step, B=64, attention=$att, $run (GPT2GEN_PROFILE=1)"
    sed -n '/GPT2GEN_PROFILE:/,$p' build/bench-logs/profile-$run-124M-$att.log | grep -E "attention|classifier|layernorm|total"
done
done
grep -h "^GPT2GEN_QUEUE_PROFILE" build/bench-logs/queue-124M-*.log 2>/dev/null || :   # none with NO_PROFILE
