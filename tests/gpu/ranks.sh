#!/bin/sh
# Several GPUs (run by tests/gpu.sh; 1 to 5b need 2 GPUs, else one skip): the micro config in bf16, 10 steps.
#  1. 2 GPUs at a global batch of 2x4 rows (--gpus 2, one process each, NCCL) give 1 GPU's losses with gradient
#     accumulation to the same 8 rows, from the same init and data: within 3e-2 on losses near 10 (bf16 keeps 8
#     bits: the gradients are summed in another order and rounded to bf16 at other points; a wrong data split
#     or average moves the first step's loss and the later ones by 1e-1 and more);
#  2. ZeRO-0 (all-reduce, the whole AdamW state on each GPU) and ZeRO-1 (reduce-scatter, a shard each, then
#     all-gather) agree within 5e-3, and so do the averaging overlapped with the backward (the default) and not
#     (GPT2GEN_COMM_OVERLAP=0);
#  3. resume on 2 GPUs is exact: from the step-5 checkpoint (model, both state shards, the marker), steps 6..10
#     give the bits of the run that never stopped;
#  4. the same run under mpirun (the rank from Open MPI's variables, NCCL's id through a file) gives the --gpus
#     run's bits;
#  5. failures end the run with a message, within a bounded time: a rank SIGKILLed under --gpus (the launcher
#     names it and stops the other); a rank SIGKILLed where no launcher watches (two processes started by hand),
#     where the survivor's wait on NCCL times out (GPT2GEN_NCCL_TIMEOUT=10) and aborts; more GPUs than the
#     machine has; NCCL missing;
#  6. on a machine of one GPU: 1 to 3 and a killed rank with two ranks on that GPU, NCCL replaced by a stand-in.
. "$(dirname "$0")/../lib.sh"
scratch
cd "$ROOT" || exit 1
export NCCL_NVLS_ENABLE=0
export GPT2GEN_CACHE="$ROOT/build/cache"   # the suite's kernels, compiled once
M=tests/configs/micro.lua
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$gpus" -lt 1 ]; then skip gpu_ranks "no GPU here"; finish; fi
if [ ! -f data/fortunes/train_000000.bin ]; then fail gpu_ranks "data/fortunes is missing (make data)"; finish; fi
common="-q --set precision=bf16 --set train.steps=10 --set eval.val_every=5"
run() {   # name, options...: a run into $WORK/name, its log $WORK/name.log
    name=$1; shift
    "$GPT2GEN" train $M $common --set checkpoint.dir="$WORK/$name" "$@" > "$WORK/$name.log" 2>&1
}
# maxdiff A B [FIRST]: the largest |difference| of the step losses and validation losses of two runs' metrics
# (from step FIRST on), or "count N M" when they have different numbers of them
maxdiff() {
    python3 - "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "${3:-0}" <<'PY'
import json, sys
def vals(p, first):
    out = []
    for l in open(p):
        e = json.loads(l)
        if e.get("event") == "step" and e["step"] > first: out.append(e["loss"])
        if e.get("event") == "val" and e["step"] > first: out.append(e["val_loss"])
    return out
a, b = vals(sys.argv[1], int(sys.argv[3])), vals(sys.argv[2], int(sys.argv[3]))
print(f"count {len(a)} {len(b)}" if len(a) != len(b) or not a else f"{max(abs(x - y) for x, y in zip(a, b)):.3g}")
PY
}
within() { awk -v d="$1" -v t="$2" 'BEGIN { exit !(d !~ /count/ && d + 0 <= t + 0) }'; }

# 5c (on one GPU too): more GPUs than there are; NCCL missing (under --gpus 2, or a launcher's world of 2 where
# the machine has one GPU)
out=$("$GPT2GEN" train $M $common --gpus $((gpus + 1)) --set checkpoint.dir="$WORK/many" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q -- "--gpus $((gpus + 1)), but this machine has $gpus GPU"; then ok more_gpus_than_there_are
else fail more_gpus_than_there_are "rc $rc: $out"; fi
if [ "$gpus" -ge 2 ]; then two="--gpus 2"; env2=; else two=; env2="GPT2GEN_RANK=0 GPT2GEN_WORLD=2 GPT2GEN_LOCAL_RANK=0"; fi
out=$(env $env2 GPT2GEN_NCCL_LIBRARY=/nonexistent/libnccl.so.2 "$GPT2GEN" train $M $common $two --set checkpoint.dir="$WORK/nonccl" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "NCCL not found: /nonexistent/libnccl.so.2 could not be loaded"; then ok nccl_missing
else fail nccl_missing "rc $rc: $out"; fi

# 6 (one GPU only): NCCL replaced by tests/fake/nccl.c (real NCCL refuses two ranks on one GPU), two ranks started
# by hand on GPU 0, for checks 1 to 3 and a rank that dies. This runs all of ours on the GPU side of several ranks
# (shards, ZeRO-1 on the CUDA backend, the averaging ranges, checkpoint shards), not NCCL itself.
fake="$ROOT/build/tests/libfakenccl.so"
hand2() {   # name, options...: ranks 0 and 1 on GPU 0 into $WORK/name (logs name.r0.log, name.r1.log); 0 if both ended well
    name=$1; shift
    for r in 0 1; do
        GPT2GEN_RANK=$r GPT2GEN_WORLD=2 GPT2GEN_LOCAL_RANK=0 GPT2GEN_NCCL_LIBRARY="$fake" GPT2GEN_NCCL_ID_FILE="$WORK/$name.id" \
            "$GPT2GEN" train $M $common --set checkpoint.dir="$WORK/$name" "$@" > "$WORK/$name.r$r.log" 2>&1 &
        eval "hp$r=\$!"
    done
    wait $hp0; ha=$?; wait $hp1; hb=$?
    [ $ha -eq 0 ] && [ $hb -eq 0 ]
}
# two NAME OPTIONS...: a run of two ranks into $WORK/NAME, rank 0's log $WORK/NAME.log: on 2 GPUs `--gpus 2` (NCCL),
# on 1 GPU two ranks started by hand with the stand-in (part 6). Checks 1 to 3 run either way.
if [ "$gpus" -ge 2 ]; then
    mode=gpus; pre=two_gpus_
    two() { name=$1; shift; run "$name" --gpus 2 "$@"; }
elif [ -f "$fake" ]; then
    mode=fake; pre=one_gpu_two_ranks_
    two() { hand2 "$@"; hr=$?; cp "$WORK/$1.r0.log" "$WORK/$1.log"; return $hr; }
else skip gpu_ranks_two "this machine has 1 GPU and $fake is missing (make tests-bin)"; finish; fi

# 1, 2: 1 GPU with accumulation 2; 2 ranks, ZeRO-1 (the default) and ZeRO-0. val_batches counts global batches:
# 2 of 4 rows on 1 GPU are the 1 of 2x4 rows on 2.
run one --set eval.val_batches=2; rc1=$?
two two1 --set eval.val_batches=1 --set checkpoint.every=5; rc2=$?
two two0 --set eval.val_batches=1 --set train.zero_stage=0; rc3=$?
d=$(maxdiff one two1)
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && within "$d" 3e-2; then ok "${pre}equal_accumulation" "largest difference $d"
else fail "${pre}equal_accumulation" "rc $rc1/$rc2, difference $d: $(tail -3 "$WORK/two1.log")"; fi
d=$(maxdiff two0 two1)
if [ $rc3 -eq 0 ] && within "$d" 5e-3; then ok "${pre}zero1_equals_zero0" "largest difference $d"
else fail "${pre}zero1_equals_zero0" "rc $rc3, difference $d: $(tail -3 "$WORK/two0.log")"; fi
if [ $mode = gpus ]; then
    if grep -q "training micro on cuda x 2 GPUs, a process each (nccl, ZeRO-1)" "$WORK/two1.log" && [ "$(grep -c '^training' "$WORK/two1.log")" = 1 ]
    then ok one_header_from_rank_0; else fail one_header_from_rank_0 "$(head -5 "$WORK/two1.log")"; fi
fi
# the averaging overlapped with the backward (the default: layer by layer on the communication stream) and after it
GPT2GEN_COMM_OVERLAP=0 two two1n --set eval.val_batches=1; rc=$?
d=$(maxdiff two1n two1)
if [ $rc -eq 0 ] && within "$d" 5e-3; then ok "${pre}overlap_equals_no_overlap" "largest difference $d"
else fail "${pre}overlap_equals_no_overlap" "rc $rc, difference $d: $(tail -3 "$WORK/two1n.log")"; fi
if ls "$WORK/two1" | grep -q 'state_00000005.r1.bin' && ls "$WORK/two1" | grep -q 'done_00000005.bin'; then ok "${pre}zero1_checkpoint_parts"
else fail "${pre}zero1_checkpoint_parts" "$(ls "$WORK/two1")"; fi

# 3: resume from step 5 in a copy of the run folder that has only the step-5 checkpoint
mkdir -p "$WORK/res"
cp "$WORK/two1"/*_00000005* "$WORK/res/"
two res --set eval.val_batches=1 --set checkpoint.every=5 --resume; rc=$?
d=$(maxdiff two1 res 5)
if [ $rc -eq 0 ] && [ "$d" = 0 ] && grep -q "resuming from .*state_00000005.bin (step 5)" "$WORK/res.log"; then ok "${pre}resume_exact"
else fail "${pre}resume_exact" "rc $rc, difference $d: $(tail -3 "$WORK/res.log")"; fi

if [ $mode = fake ]; then
    # 6: rank 1 killed: rank 0's next exchange fails, and it ends with a message
    hand2 fkill --set train.steps=1000000 --set eval.val_every=0 --set checkpoint.every=0 &
    hpid=$!
    if wait_steps "$WORK/fkill" 3; then
        victim=$(pgrep -f "checkpoint.dir=$WORK/fkill" | while read p; do tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx GPT2GEN_RANK=1 && echo $p; done | head -1)
        t0=$(date +%s)
        kill -9 "$victim"
        wait $hpid
        dt=$(( $(date +%s) - t0 ))
        if [ $dt -le 30 ] && grep -q "rank 0: .*NCCL" "$WORK/fkill.r0.log" && [ -z "$(pgrep -f "checkpoint.dir=$WORK/fkill")" ]; then
            ok one_gpu_killed_rank_ends_run "${dt} s: $(grep 'rank 0:' "$WORK/fkill.r0.log" | head -1)"
        else fail one_gpu_killed_rank_ends_run "after ${dt} s: $(tail -3 "$WORK/fkill.r0.log")"; fi
    else pkill -f "checkpoint.dir=$WORK/fkill"; wait $hpid; fail one_gpu_killed_rank_ends_run "the run did not start: $(tail -3 "$WORK/fkill.r0.log")"; fi
    skip gpu_ranks_two "the checks 4 to 5b need 2 GPUs, this machine has $gpus"
    finish
fi

# 4: under mpirun
if command -v mpirun >/dev/null 2>&1; then
    mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_NVLS_ENABLE -x GPT2GEN_CACHE "$GPT2GEN" train $M $common \
        --set eval.val_batches=1 --set checkpoint.every=5 --set checkpoint.dir="$WORK/mpi" > "$WORK/mpi.log" 2>&1; rc=$?
    d=$(maxdiff two1 mpi)
    if [ $rc -eq 0 ] && [ "$d" = 0 ] && ! ls -a "$WORK/mpi" | grep -q nccl-id; then ok mpirun_equals_gpus_option
    else fail mpirun_equals_gpus_option "rc $rc, difference $d: $(tail -5 "$WORK/mpi.log")"; fi
else skip mpirun_equals_gpus_option "no mpirun here"; fi

# 5a: a rank killed under the launcher
long="--set train.steps=1000000 --set eval.val_every=0 --set checkpoint.every=0"
"$GPT2GEN" train $M $common $long --gpus 2 --set checkpoint.dir="$WORK/kill" > "$WORK/kill.log" 2>&1 &
parent=$!
if wait_steps "$WORK/kill" 3; then
    victim=$(pgrep -P $parent | tail -1)
    t0=$(date +%s)
    kill -9 "$victim"
    wait $parent; rc=$?
    dt=$(( $(date +%s) - t0 ))
    if [ $rc -eq 1 ] && [ $dt -le 30 ] && grep -q "rank [01] (pid $victim) was killed by signal 9 (SIGKILL); stopping the other ranks" "$WORK/kill.log" \
       && [ -z "$(pgrep -P $parent)" ]; then ok killed_rank_ends_run "${dt} s"
    else fail killed_rank_ends_run "rc $rc after ${dt} s: $(tail -3 "$WORK/kill.log")"; fi
else kill $parent; wait $parent; fail killed_rank_ends_run "the run did not start: $(tail -3 "$WORK/kill.log")"; fi

# 5b: no launcher watching: the survivor's NCCL wait times out and aborts
for r in 0 1; do
    GPT2GEN_RANK=$r GPT2GEN_WORLD=2 GPT2GEN_LOCAL_RANK=$r GPT2GEN_NCCL_ID_FILE="$WORK/nccl-id" GPT2GEN_NCCL_TIMEOUT=10 \
        "$GPT2GEN" train $M $common $long --set checkpoint.dir="$WORK/hand" > "$WORK/hand$r.log" 2>&1 &
    eval "pid$r=\$!"
done
if wait_steps "$WORK/hand" 3; then
    t0=$(date +%s)
    kill -9 $pid1
    wait $pid0; rc=$?
    dt=$(( $(date +%s) - t0 ))
    if [ $rc -eq 1 ] && [ $dt -le 40 ] && grep -q "rank 0: .*NCCL" "$WORK/hand0.log"; then ok nccl_timeout_aborts "${dt} s: $(grep 'rank 0:' "$WORK/hand0.log" | head -1)"
    else fail nccl_timeout_aborts "rc $rc after ${dt} s: $(tail -3 "$WORK/hand0.log")"; fi
else kill $pid0 $pid1; fail nccl_timeout_aborts "the run did not start: $(tail -3 "$WORK/hand0.log") $(tail -3 "$WORK/hand1.log")"; fi
wait 2>/dev/null

finish
