#!/bin/sh
# Several ranks emulated in one process on the CPU backend (train.num_gpus with --backend cpu, runtime/ranks/ranks.h):
# N ranks at batch B give 1 rank's losses with accumulation to the same global batch; ZeRO-0 and ZeRO-1 give the
# same bits; resume on the same N is exact (ZeRO-1: every rank's state shard, the done_ marker last); a save
# that did not finish is passed over; another N is refused with what to do; the GPU path's refusals (no GPU,
# no NCCL, bad launcher variables) are one message each.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
M="$M --set train.batch_size=2"   # micro-batches of 64 tokens: the global batches below are as small as N ranks allow
run() { "$GPT2GEN" train $M --backend cpu -q --set train.total_batch_size=128 "$@"; }
# vals FILE: the step records' loss and norm, then the validation losses, one per line
vals() { grep -o '"loss":[-0-9.e]*\|"norm":[-0-9.e]*\|"val_loss":[-0-9.e]*' "$1" | cut -d: -f2; }

# N ranks = 1 rank with accumulation. The global batch of 256 tokens is 4 micro-batches of B=2 rows on 1 rank, 2 on
# each of 2 ranks, 1 on each of 4; rank r's micro-batch m is the 1-rank run's micro-batch m*N+r (the data split),
# and val_batches (global batches) is scaled so that every run validates on the same 16 rows. Tolerance 1e-4 on
# losses and norms near 10 and 1: the numbers are the same sums taken in another order (each rank accumulates
# its micro-batches, then the ranks are averaged), a few fp32 ulps (1e-7 relative) per gradient, which four AdamW
# steps carry into the losses at about the same relative size; a wrong split, scale or average moves them by 1e-2.
common="--set train.total_batch_size=256 --set train.steps=4 --set eval.val_every=2"
run $common --set eval.val_batches=8 --set checkpoint.dir="$WORK/one" >/dev/null 2>&1
vals "$WORK/one/metrics.jsonl" > "$WORK/one.txt"
for n in 2 4; do
    out=$(run $common --set eval.val_batches=$((8 / n)) --set train.num_gpus=$n --set checkpoint.dir="$WORK/n$n" 2>&1); rc=$?
    vals "$WORK/n$n/metrics.jsonl" > "$WORK/n$n.txt"
    d=$(paste "$WORK/one.txt" "$WORK/n$n.txt" | awk '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; c++} END {if (c != 11) print "count " c; else print m + 0}')
    if [ $rc -eq 0 ] && awk "BEGIN{exit !(\"$d\" + 0 <= 1e-4 && \"$d\" !~ /count/)}"; then ok "ranks_$n""_equal_accumulation (largest difference $d)"
    else fail "ranks_$n""_equal_accumulation" "rc=$rc, difference $d: $out"; fi
done

# ZeRO-1 and ZeRO-0: the same bits (the emulated all-reduce is reduce-scatter then all-gather, the norm the same
# sum), also with shards of unequal size (3 ranks)
for n in 2 3; do
    for z in 0 1; do
        run --set train.num_gpus=$n --set train.total_batch_size=$((64 * n)) \
            --set train.steps=3 --set train.zero_stage=$z --set checkpoint.dir="$WORK/z$z-$n" >/dev/null 2>&1
    done
    if [ -f "$WORK/z0-$n/model_00000003.bin" ] && cmp -s "$WORK/z0-$n/model_00000003.bin" "$WORK/z1-$n/model_00000003.bin" \
       && [ "$(vals "$WORK/z0-$n/metrics.jsonl")" = "$(vals "$WORK/z1-$n/metrics.jsonl")" ]; then ok "zero1_equals_zero0_$n""_ranks"
    else fail "zero1_equals_zero0_$n""_ranks" "$(ls "$WORK/z0-$n" "$WORK/z1-$n")"; fi
done
if [ -f "$WORK/z1-3/state_00000003.r2.bin" ] && [ ! -f "$WORK/z0-3/state_00000003.r1.bin" ] && [ -f "$WORK/z0-3/done_00000003.bin" ]; then ok zero_checkpoint_files
else fail zero_checkpoint_files "$(ls "$WORK/z0-3" "$WORK/z1-3")"; fi

# exact resume on 2 ranks, both stages: 8 steps in one go == 4, stop, resume for 4 (every file of step 8 the same)
for z in 0 1; do
    run --set train.num_gpus=2 --set train.zero_stage=$z --set checkpoint.dir="$WORK/straight$z" >/dev/null 2>&1
    run --set train.num_gpus=2 --set train.zero_stage=$z --set checkpoint.dir="$WORK/resumed$z" --set checkpoint.every=4 >/dev/null 2>&1
    rm -f "$WORK/resumed$z"/*_00000008*
    out=$(run --set train.num_gpus=2 --set train.zero_stage=$z --set checkpoint.dir="$WORK/resumed$z" --resume 2>&1); rc=$?
    same=1
    for f in "$WORK/straight$z"/*_00000008*; do cmp -s "$f" "$WORK/resumed$z/$(basename "$f")" || same=0; done
    if [ $rc -eq 0 ] && [ $same -eq 1 ] && printf '%s' "$out" | grep -q "resuming from .*state_00000004.bin (step 4)"; then ok "resume_exact_zero$z"
    else fail "resume_exact_zero$z" "rc=$rc same=$same: $out"; fi
done

# a ZeRO-0 checkpoint continues under ZeRO-1 (the shards are cut from the whole state): still the same bits
cp -r "$WORK/resumed0" "$WORK/switch" && rm -f "$WORK/switch"/*_00000008*
run --set train.num_gpus=2 --set train.zero_stage=1 --set checkpoint.dir="$WORK/switch" --resume >/dev/null 2>&1
if cmp -s "$WORK/switch/model_00000008.bin" "$WORK/straight0/model_00000008.bin" && [ -f "$WORK/switch/state_00000008.r1.bin" ]; then ok resume_zero0_as_zero1
else fail resume_zero0_as_zero1 "$(ls "$WORK/switch")"; fi

# a save that did not finish is passed over: no marker, or a rank's shard missing
for what in done_00000008.bin state_00000008.r1.bin; do
    rm -rf "$WORK/part" && cp -r "$WORK/straight1" "$WORK/part" && rm "$WORK/part/$what"
    cp "$WORK/resumed1"/*_00000004* "$WORK/part/"
    out=$(run --set train.num_gpus=2 --set checkpoint.dir="$WORK/part" --resume --set train.steps=8 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "skipped step 8: .*$what" && printf '%s' "$out" | grep -q "resuming from .*state_00000004.bin" \
       && cmp -s "$WORK/part/model_00000008.bin" "$WORK/straight1/model_00000008.bin"; then ok "incomplete_save_skipped ($what missing)"
    else fail incomplete_save_skipped "$what: rc=$rc: $out"; fi
done

# leftovers of a killed several-rank save are removed
# (pid 99999999 is past any pid_max: a process that is gone)
touch "$WORK/part/state_00000012.r1.bin.tmp.99999999.0123456789abcdef" "$WORK/part/done_00000012.bin.tmp.99999999.0123456789abcdef"
run --set train.num_gpus=2 --set checkpoint.dir="$WORK/part" --resume --set train.steps=8 >/dev/null 2>&1
if ! ls "$WORK/part" | grep -q '\.tmp\.'; then ok leftovers_removed
else fail leftovers_removed "$(ls "$WORK/part")"; fi

# another number of ranks: one clear message, nothing trained
for n in 1 4; do
    out=$(run --set train.num_gpus=$n --set train.total_batch_size=$((n * 64 > 128 ? n * 64 : 128)) \
              --set checkpoint.dir="$WORK/resumed1" --resume 2>&1); rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "train.num_gpus is 2 in the resume state, $n in this run: .*resume with train.num_gpus = 2, or start a new run from its model file with checkpoint.init" \
       && ! printf '%s' "$out" | grep -q "^step "; then ok "resume_other_num_gpus_$n"
    else fail "resume_other_num_gpus_$n" "rc=$rc: $out"; fi
done

# several GPUs without one: one message, no training; --gpus N is train.num_gpus = N (on the CPU backend, the
# emulation); a launcher's world on the CPU backend, a bad launcher variable, NCCL missing: one message each
for b in cuda auto; do
    out=$("$GPT2GEN" train $M --backend $b --set train.num_gpus=2 --set checkpoint.dir="$WORK/gpu" 2>&1); rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "train.num_gpus = 2: no GPU" && ! printf '%s' "$out" | grep -q "^step "; then
        ok "num_gpus_without_gpu_$b"
    else fail "num_gpus_without_gpu_$b" "rc=$rc: $out"; fi
done
out=$("$GPT2GEN" train $M --backend cpu --gpus 2 --set train.total_batch_size=128 --set train.steps=1 --set checkpoint.dir="$WORK/gpus2" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "on cpu x 2 ranks emulated in one process (ZeRO-1)"; then ok gpus_option_sets_num_gpus
else fail gpus_option_sets_num_gpus "rc=$rc: $out"; fi
for g in 0 x 257; do
    out=$("$GPT2GEN" train $M --gpus $g 2>&1); rc=$?
    if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "\-\-gpus: expected a number of GPUs from 1 to 256, got '$g'"; then ok "bad_gpus_$g"
    else fail "bad_gpus_$g" "rc=$rc: $out"; fi
done
out=$(OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 "$GPT2GEN" train $M --backend cpu 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "mpirun started 2 processes: several processes train on GPUs only"; then ok launcher_world_on_cpu
else fail launcher_world_on_cpu "rc=$rc: $out"; fi
out=$(GPT2GEN_RANK=x GPT2GEN_WORLD=2 GPT2GEN_LOCAL_RANK=0 "$GPT2GEN" train $M 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "GPT2GEN_RANK"; then ok bad_launcher_variable
else fail bad_launcher_variable "rc=$rc: $out"; fi
out=$(SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_STEP_ID=0 SLURM_JOB_ID=7 GPT2GEN_NCCL_LIBRARY=/nonexistent/libnccl.so.2 \
      "$GPT2GEN" train $M --set checkpoint.dir="$WORK/srun" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "rank 0: NCCL not found: /nonexistent/libnccl.so.2 could not be loaded"; then ok nccl_missing_under_srun
else fail nccl_missing_under_srun "rc=$rc: $out"; fi
# A process per rank (GPT2GEN_CPU_PROCESSES=1: the launcher of --gpus N, runtime/ranks/comm_socket.h's collectives): the
# bits of the same ranks emulated in one process, checkpoint parts from every process, one header from rank 0;
# an emulated run's checkpoint resumes in processes to the same bits; Ctrl-C stops every rank at one step with a
# whole checkpoint; a killed rank ends the run with a message, under the launcher (which names it) and without
# one (the survivor's wait ends at once)
procs() { GPT2GEN_CPU_PROCESSES=1 "$GPT2GEN" train $M --backend cpu -q --set train.total_batch_size=128 "$@"; }
run --set train.num_gpus=2 --set checkpoint.every=4 --set checkpoint.dir="$WORK/emu" >/dev/null 2>&1
out=$(procs --gpus 2 --set checkpoint.every=4 --set checkpoint.dir="$WORK/procs" 2>&1); rc=$?
if [ $rc -eq 0 ] && vals "$WORK/emu/metrics.jsonl" > "$WORK/emu.txt" && vals "$WORK/procs/metrics.jsonl" > "$WORK/procs.txt" \
   && [ "$(wc -l < "$WORK/procs.txt")" -eq 19 ] && cmp -s "$WORK/emu.txt" "$WORK/procs.txt" \
   && cmp -s "$WORK/emu/model_00000008.bin" "$WORK/procs/model_00000008.bin" \
   && cmp -s "$WORK/emu/state_00000008.r1.bin" "$WORK/procs/state_00000008.r1.bin" && [ -f "$WORK/procs/done_00000008.bin" ] \
   && [ "$(printf '%s\n' "$out" | grep -c '^training micro on cpu x 2 ranks, a process each (socket, ZeRO-1)')" -eq 1 ]; then
    ok processes_equal_emulated
else fail processes_equal_emulated "rc=$rc: $out"; fi
# the averaging overlapped with the backward (the default with a process per rank: each layer's part as it is
# final) and not (GPT2GEN_COMM_OVERLAP=0), ZeRO-1 and ZeRO-0: the same bits
for v in "1 0" "0 1" "0 0"; do
    set -- $v
    GPT2GEN_COMM_OVERLAP=$1 procs --gpus 2 --set train.zero_stage=$2 --set checkpoint.dir="$WORK/ov$1$2" >/dev/null 2>&1; rc=$?
    vals "$WORK/ov$1$2/metrics.jsonl" > "$WORK/ov$1$2.txt"
    if [ $rc -eq 0 ] && cmp -s "$WORK/emu.txt" "$WORK/ov$1$2.txt"; then ok "processes_overlap_$1_zero$2"
    else fail "processes_overlap_$1_zero$2" "rc=$rc: $(diff "$WORK/emu.txt" "$WORK/ov$1$2.txt" | head -4)"; fi
done
mkdir -p "$WORK/presume"
cp "$WORK/emu"/*_00000004* "$WORK/presume/"
out=$(procs --gpus 2 --set checkpoint.every=4 --set checkpoint.dir="$WORK/presume" --resume 2>&1); rc=$?
vals "$WORK/presume/metrics.jsonl" > "$WORK/presume.txt"
if [ $rc -eq 0 ] && [ -s "$WORK/presume.txt" ] && tail -n "$(wc -l < "$WORK/presume.txt")" "$WORK/emu.txt" | cmp -s - "$WORK/presume.txt"; then
    ok processes_resume_exact
else fail processes_resume_exact "rc=$rc: $out"; fi
long="--set train.steps=1000000 --set eval.val_every=0"
GPT2GEN_CPU_PROCESSES=1 setsid "$GPT2GEN" train $M --backend cpu -q --set train.total_batch_size=128 --gpus 2 $long \
    --set checkpoint.dir="$WORK/stop" > "$WORK/stop.log" 2>&1 &
pid=$!
if wait_steps "$WORK/stop" 2; then
    kill -INT -$pid; wait $pid; rc=$?
    if [ $rc -eq 130 ] && ls "$WORK/stop" | grep -q '^done_' && ls "$WORK/stop" | grep -q '^state_.*\.r1\.bin' \
       && [ "$(ls "$WORK/stop" | grep -c '^done_')" -eq 1 ]; then ok processes_ctrl_c_save
    else fail processes_ctrl_c_save "rc=$rc: $(ls "$WORK/stop") $(tail -3 "$WORK/stop.log")"; fi
else kill -9 -$pid; wait $pid; fail processes_ctrl_c_save "no steps: $(tail -3 "$WORK/stop.log")"; fi
GPT2GEN_CPU_PROCESSES=1 "$GPT2GEN" train $M --backend cpu -q --set train.total_batch_size=128 --gpus 2 $long \
    --set checkpoint.dir="$WORK/kill" > "$WORK/kill.log" 2>&1 &
parent=$!
if wait_steps "$WORK/kill" 2; then
    victim=$(pgrep -P $parent | tail -1)
    kill -9 "$victim"; wait $parent; rc=$?
    if [ $rc -eq 1 ] && grep -q "gpt2gen: rank [01] (pid $victim) was killed by signal 9 (SIGKILL); stopping the other ranks" "$WORK/kill.log" \
       && [ -z "$(pgrep -P $parent)" ]; then ok processes_killed_rank_named
    else fail processes_killed_rank_named "rc=$rc: $(tail -3 "$WORK/kill.log")"; fi
else kill $parent; wait $parent; fail processes_killed_rank_named "no steps: $(tail -3 "$WORK/kill.log")"; fi
for r in 0 1; do
    GPT2GEN_RANK=$r GPT2GEN_WORLD=2 GPT2GEN_LOCAL_RANK=$r GPT2GEN_NCCL_ID_FILE="$WORK/id" GPT2GEN_NCCL_TIMEOUT=20 \
        GPT2GEN_CPU_PROCESSES=1 "$GPT2GEN" train $M --backend cpu -q --set train.total_batch_size=128 $long \
        --set checkpoint.dir="$WORK/hand" > "$WORK/hand$r.log" 2>&1 &
    eval "pid$r=\$!"
done
if wait_steps "$WORK/hand" 2; then
    kill -9 $pid1; wait $pid0; rc=$?
    if [ $rc -eq 1 ] && grep -q "gpt2gen: rank 0: rank 1 has gone" "$WORK/hand0.log" && [ ! -e "$WORK/id" ]; then ok processes_survivor_ends
    else fail processes_survivor_ends "rc=$rc: $(tail -3 "$WORK/hand0.log")"; fi
else kill -9 $pid0 $pid1; fail processes_survivor_ends "no steps: $(tail -3 "$WORK/hand0.log")"; fi
wait 2>/dev/null

# The rank join (runtime/ranks/id_file.c), ranks started by hand as mpirun would: rank 0's id file names the world
# and the job. A rank of another world stops at once naming both sizes, and rank 0's file goes on that exit path
# too; a user's file at GPT2GEN_NCCL_ID_FILE is never replaced (nor printed); a killed rank 0's file is stale: a
# rank that comes first waits past it and rank 0 replaces it, so the next run trains.
hand() {  # hand RANK WORLD TIMEOUT ID_FILE LOG [options]: execs (run it as `hand ... &` or `(hand ...)`)
    r=$1 w=$2 t=$3 f=$4 log=$5; shift 5
    GPT2GEN_RANK=$r GPT2GEN_WORLD=$w GPT2GEN_LOCAL_RANK=$r GPT2GEN_NCCL_ID_FILE="$f" GPT2GEN_NCCL_TIMEOUT=$t \
        GPT2GEN_CPU_PROCESSES=1 exec "$GPT2GEN" train $M --backend cpu -q --set train.total_batch_size=384 --set eval.val_every=0 \
        --set train.steps=2 "$@" > "$log" 2>&1
}
wait_file() { i=0; while [ ! -e "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; }
# (rank 0 hears of the refusal from the rank's answer beside the id file: it stops at once too, well inside its
# 20 s timeout, with the rank's reason, and leaves neither file behind)
hand 0 2 20 "$WORK/id23" "$WORK/w0.log" --set checkpoint.dir="$WORK/w23" & pid0=$!
wait_file "$WORK/id23"
t0=$(date +%s); (hand 1 3 20 "$WORK/id23" "$WORK/w1.log" --set checkpoint.dir="$WORK/w23"); rc=$?; t1=$(date +%s)
wait $pid0; rc0=$?; t2=$(date +%s)
if [ $rc -eq 1 ] && [ $((t1 - t0)) -le 5 ] && grep -q "rank 1: .*id23: rank 0 was started in a world of 2 ranks, this rank (1) in one of 3" "$WORK/w1.log" \
   && [ $rc0 -eq 1 ] && [ $((t2 - t0)) -le 5 ] && grep -q "rank 1 refused the id file .*id23: refused: .*world of 2 ranks, this rank (1) in one of 3" "$WORK/w0.log" \
   && [ ! -e "$WORK/id23" ] && [ ! -e "$WORK/id23.rank1" ]; then ok join_other_world_stops
else fail join_other_world_stops "rc=$rc rc0=$rc0 in $((t1 - t0)) and $((t2 - t0)) s: $(cat "$WORK/w1.log" "$WORK/w0.log"; ls "$WORK"/id23* 2>&1)"; fi
printf 'my notes\n\001\377 keep me\n' > "$WORK/notes.txt"; cp "$WORK/notes.txt" "$WORK/notes.orig"
(hand 0 2 20 "$WORK/notes.txt" "$WORK/n0.log" --set checkpoint.dir="$WORK/notes"); rc=$?
if [ $rc -eq 1 ] && grep -q "notes.txt: not an id file of gpt2gen's (.* bytes .*); rank 0 does not replace it" "$WORK/n0.log" \
   && ! grep -q "keep me" "$WORK/n0.log" && cmp -s "$WORK/notes.txt" "$WORK/notes.orig"; then ok join_user_file_kept
else fail join_user_file_kept "rc=$rc: $(cat "$WORK/n0.log"; cmp "$WORK/notes.txt" "$WORK/notes.orig")"; fi
hand 0 2 20 "$WORK/idst" "$WORK/k0.log" --set checkpoint.dir="$WORK/stale0" & pid0=$!
wait_file "$WORK/idst"; kill -9 $pid0; wait $pid0 2>/dev/null
hand 1 2 20 "$WORK/idst" "$WORK/s1.log" --set checkpoint.dir="$WORK/stale" & pid1=$!
sleep 0.5
(hand 0 2 20 "$WORK/idst" "$WORK/s0.log" --set checkpoint.dir="$WORK/stale"); rc0=$?
wait $pid1; rc1=$?
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "note: .*idst: replacing a stale id file" "$WORK/s0.log" && [ ! -e "$WORK/idst" ] \
   && [ -f "$WORK/stale/model_00000002.bin" ]; then ok join_stale_file_replaced
else fail join_stale_file_replaced "rc0=$rc0 rc1=$rc1: $(cat "$WORK/s0.log" "$WORK/s1.log")"; fi

out=$(run --set train.num_gpus=65 --set train.total_batch_size=$((65 * 128)) --set checkpoint.dir="$WORK/many" 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "train.num_gpus = 65: the CPU backend emulates at most 64 ranks"; then ok too_many_ranks
else fail too_many_ranks "rc=$rc: $out"; fi
out=$("$GPT2GEN" train $M --backend cpu -q --gpus 65 --set train.total_batch_size=$((65 * 128)) --set checkpoint.dir="$WORK/many" 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "train.num_gpus = 65: the CPU backend emulates at most 64 ranks"; then ok too_many_gpus_option
else fail too_many_gpus_option "rc=$rc: $out"; fi
out=$(run --set train.zero_stage=2 --set checkpoint.dir="$WORK/z2" 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "train.zero_stage"; then ok bad_zero_stage; else fail bad_zero_stage "rc=$rc: $out"; fi
finish
