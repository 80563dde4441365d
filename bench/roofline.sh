#!/bin/sh
# bench/roofline.sh: every op of a training step against its own floor. Profiles a few steps of ./gpt2gen train
# (GPT2GEN_PROFILE=1: each op timed between CUDA events, random-token shards, T=1024; GPT-2 124M at B=64 and 350M at
# B=32, one micro-step a step) and runs bench/roofline.py on each log: it measures the GPU's bf16 matmul ceiling
# and memory bandwidth with PyTorch (once, into build/bench-logs/roofline-ceilings.json, reused for the other
# models) and writes build/bench-logs/roofline-MODEL.md: per op its time, work, achieved rate, floor and time above
# the floor, the sum of floors and the tok/s at the floors (and roofline-MODEL.json, the rows). Run from the
# repository root on the GPU machine, with ./gpt2gen built.
# MODELS (default "124M 350M"); ATTENTION (default auto, the trainer's own choice; cudnn or flash); SETS="--set
# key=value ..." extra arguments to gpt2gen train (split at spaces); CEILINGS="TFLOPS,TBPS" skips measuring them;
# GPT2GEN=path: a second binary (another build, e.g. of the commit before) profiled the same way first, into
# roofline-MODEL-other.log/.md, and roofline-MODEL.md then ends with a table of ./gpt2gen's ops against it
# (the "before" column: GPT2GEN's, the "after" column: ./gpt2gen's).
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
MODELS=${MODELS:-"124M 350M"}
ATTENTION=${ATTENTION:-auto}
data=build/bench-data
logs=build/bench-logs
ckpt=build/bench-ckpt-roofline
mkdir -p "$data" "$logs"
sh bench/random_data.sh "$data"   # random-token shards
[ -x ./gpt2gen ] || { echo "roofline.sh: ./gpt2gen is not built (make)"; exit 1; }
[ -z "$GPT2GEN" ] || [ -x "$GPT2GEN" ] || { echo "roofline.sh: GPT2GEN=$GPT2GEN is not an executable"; exit 1; }

# the ceilings: CEILINGS as given, else measured by the first roofline.py call into $ceil and read back after
ceil=$logs/roofline-ceilings.json
if [ -n "$CEILINGS" ]; then ceilings="--ceilings $CEILINGS"; else rm -f "$ceil"; ceilings=""; fi
roofline() {   # roofline MODEL LOG OUT [roofline.py options]: the table of LOG into OUT.md (and OUT.json)
    m=$1 src=$2 out=$3; shift 3
    if [ -z "$ceilings" ] && [ -f "$ceil" ]; then ceilings="--ceilings $ceil"; fi
    python3 bench/roofline.py --model "$m" $ceilings --ceilings-json "$ceil" --json "$out.json" "$@" "$src" > "$out.md" ||
        { echo "roofline.sh: bench/roofline.py failed on $src"; return 1; }
}

# profile BIN MODEL B LOG: bench/bench.sh's profile run (its train command line, GPT2GEN_PROFILE=1), at batch B
profile() {
    rm -rf "$ckpt"   # a fresh run each time (a folder with checkpoints is refused without --fresh)
    # $SETS unquoted: one word an argument
    GPT2GEN_PROFILE=1 "$1" train configs/gpt2-$2.lua --backend cuda --set train.batch_size=$3 \
        --set train.total_batch_size=$(($3 * 1024)) --set train.steps=6 --set train.warmup=2 --set "data.train=$data/train_*.bin" \
        --set "data.val=$data/val_*.bin" --set data.tokenizer=none --set eval.val_every=0 --set eval.sample_every=0 \
        --set attention=$ATTENTION --set checkpoint.dir=$ckpt $SETS > "$4" 2>&1
    rc=$?
    rm -rf "$ckpt"
    [ $rc -eq 0 ] || { echo "roofline.sh: $1 train $2 failed (rc $rc, see $4)"; tail -3 "$4"; return 1; }
    grep -q 'GPT2GEN_PROFILE:' "$4" || { echo "roofline.sh: $4 has no profile"; return 1; }
}

# chunks of the classifier per micro-step, from the plan the last run built (1 for a build without them)
chunks() { c=$(sed -n 's/^classifier logits of [0-9]* rows at a time, \([0-9]*\) chunks.*/\1/p' build/gpt2-$1/plan.txt 2>/dev/null | head -1); echo ${c:-1}; }
# train.recompute of the training plan the last run built (gpt2-350M.lua sets 2; 1 is the default)
recompute() { r=$(sed -n 's/^precision .*recompute=\([0-9]\).*/\1/p' build/gpt2-$1/plan.txt 2>/dev/null | head -1); echo ${r:-1}; }

for model in $MODELS; do
    case $model in 124M) B=64 ;; 350M) B=32 ;; 774M) B=16 ;; *) B=8 ;; esac
    compare=""
    if [ -n "$GPT2GEN" ]; then
        other=$logs/roofline-$model-other
        if profile "$GPT2GEN" $model $B "$other.log" && roofline $model "$other.log" "$other" --classifier-chunks $(chunks $model) --recompute $(recompute $model); then
            compare="--compare $other.log"
        fi
    fi
    log=$logs/roofline-$model
    profile ./gpt2gen $model $B "$log.log" || continue
    roofline $model "$log.log" "$log" --classifier-chunks $(chunks $model) --recompute $(recompute $model) $compare || continue
    echo "== roofline of a gpt2-$model micro-step, B=$B, attention=$ATTENTION ($log.md)"
    cat "$log.md"
    echo
done
