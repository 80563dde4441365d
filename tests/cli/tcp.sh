#!/bin/sh
# Ranks started by hand as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), on the
# CPU backend, meeting over TCP on 127.0.0.1 (runtime/ranks/rendezvous.c) and training over TCP (comm_socket.c):
# 2 and 3 processes with their own checkpoint folders give the bits of `--gpus N --backend cpu`; each join check
# (world, job, attempt, a rank twice) ends the join on both sides at once with one reason; a rank 0 that never
# came, or went, a wrong address and a port in use are one message each, well inside the bounds; SIGTERM to one
# rank stops every rank at one step with a whole checkpoint. Loopback only; every wait is bounded.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
export OMP_NUM_THREADS=1   # N processes on a few cores
M="$M --set train.batch_size=2 --set train.zero_stage=0"
vals() { grep -o '"loss":[-0-9.e]*\|"norm":[-0-9.e]*\|"val_loss":[-0-9.e]*' "$1" | cut -d: -f2; }
. "$ROOT/tests/tcp_env.sh"

# the same bits as the ranks emulated in one process: losses, norms, validation losses
for n in 2 3; do
    PORT=$(free_port)
    common="--set train.total_batch_size=$((64 * n)) --set train.steps=3 --set eval.val_every=3 --set eval.val_batches=2"
    "$GPT2GEN" train $M --backend cpu -q --gpus $n $common --set checkpoint.dir="$WORK/emu$n" > "$WORK/emu$n.log" 2>&1
    pids=""
    r=0; while [ $r -lt $n ]; do rank $r $n "$WORK/l$n-$r.log" -- $common --set checkpoint.dir="$WORK/tcp$n-r$r" & pids="$pids $!"; r=$((r + 1)); done
    rc=0; for p in $pids; do wait $p || rc=1; done
    vals "$WORK/emu$n/metrics.jsonl" > "$WORK/emu$n.txt"; vals "$WORK/tcp$n-r0/metrics.jsonl" > "$WORK/tcp$n.txt"
    if [ $rc -eq 0 ] && [ "$(wc -l < "$WORK/tcp$n.txt")" -eq 8 ] && cmp -s "$WORK/emu$n.txt" "$WORK/tcp$n.txt" \
       && cmp -s "$WORK/emu$n/model_00000003.bin" "$WORK/tcp$n-r0/model_00000003.bin" && [ ! -e "$WORK/tcp$n-r1/metrics.jsonl" ]; then
        ok "tcp_${n}_ranks_equal_emulated" "losses $(grep -o '"loss":[-0-9.e]*' "$WORK/tcp$n-r0/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ')"
    else fail "tcp_${n}_ranks_equal_emulated" "rc=$rc: $(cat "$WORK/l$n-0.log" "$WORK/l$n-1.log"; diff "$WORK/emu$n.txt" "$WORK/tcp$n.txt")"; fi
done

# join checks: rank 1 differs from rank 0 in one thing; both stop at once (inside 10 s of a 20 s timeout), each
# naming the same reason
check_join() {   # name, expected reason, rank 0's VAR=value, rank 1's VAR=value (or "-")
    name=$1 want=$2 v0=$3 v1=$4
    PORT=$(free_port)
    t0=$(date +%s)
    rank 0 2 "$WORK/$name-0.log" $v0 -- --set train.total_batch_size=384 --set checkpoint.dir="$WORK/$name" & p0=$!
    (rank 1 2 "$WORK/$name-1.log" $v1 -- --set train.total_batch_size=384 --set checkpoint.dir="$WORK/$name-r1"); rc1=$?
    wait $p0; rc0=$?; t=$(( $(date +%s) - t0 ))
    if [ $rc0 -eq 1 ] && [ $rc1 -eq 1 ] && [ $t -le 10 ] && grep -q "^gpt2gen: rank 0: $want" "$WORK/$name-0.log" \
       && grep -q "^gpt2gen: rank 1: rank 0 at 127.0.0.1:$PORT ended the join: $want" "$WORK/$name-1.log" \
       && [ "$(wc -l < "$WORK/$name-1.log")" -eq 1 ]; then ok "join_$name"
    else fail "join_$name" "rc0=$rc0 rc1=$rc1 in $t s: $(cat "$WORK/$name-0.log" "$WORK/$name-1.log")"; fi
}
check_join job "rank 1 (pid [0-9]* on .*) is of job b, rank 0 of job a: the ranks of one run must share the job" \
    TORCHELASTIC_RUN_ID=a TORCHELASTIC_RUN_ID=b
check_join stale "rank 1 (pid [0-9]* on .*) is of attempt 0 of the job, rank 0 of attempt 1: a stale rank" \
    TORCHELASTIC_RESTART_COUNT=1 TORCHELASTIC_RESTART_COUNT=0
check_join world "rank 0 was started in a world of 2 ranks, rank 1 (pid [0-9]* on .*) in one of 3" GPT2GEN_X=0 WORLD_SIZE=3
# a rank twice: two processes as rank 1 of 3, the second refused, and the first told too
PORT=$(free_port)
rank 0 3 "$WORK/tw0.log" -- --set train.total_batch_size=192 --set checkpoint.dir="$WORK/tw" & p0=$!
rank 1 3 "$WORK/tw1.log" -- --set train.total_batch_size=192 --set checkpoint.dir="$WORK/tw1" & p1=$!
sleep 1
(rank 1 3 "$WORK/tw2.log" -- --set train.total_batch_size=192 --set checkpoint.dir="$WORK/tw2"); rc2=$?
wait $p0; rc0=$?; wait $p1; rc1=$?
if [ $rc0 -eq 1 ] && [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && grep -q "rank 0: rank 1 joined twice: pid [0-9]* on .*, and pid" "$WORK/tw0.log" \
   && grep -q "ended the join: rank 1 joined twice" "$WORK/tw1.log" && grep -q "ended the join: rank 1 joined twice" "$WORK/tw2.log"; then
    ok join_rank_twice
else fail join_rank_twice "rc=$rc0 $rc1 $rc2: $(cat "$WORK"/tw[012].log)"; fi

# rank 0 never came: the join's timeout (2 s), named; rank 0 gone after rank 1 connected, before the join ended: at once
PORT=$(free_port)
t0=$(date +%s); (rank 1 2 "$WORK/none.log" GPT2GEN_JOIN_TIMEOUT=2 -- --set checkpoint.dir="$WORK/none"); rc=$?; t=$(( $(date +%s) - t0 ))
if [ $rc -eq 1 ] && [ $t -le 6 ] && grep -q "rank 1: rank 0 did not answer at 127.0.0.1:$PORT within 2 s: .*Connection refused: is rank 0 running" "$WORK/none.log"; then
    ok rank0_never_came
else fail rank0_never_came "rc=$rc in $t s: $(cat "$WORK/none.log")"; fi
PORT=$(free_port)
rank 0 3 "$WORK/g0.log" -- --set train.total_batch_size=192 --set checkpoint.dir="$WORK/g" & p0=$!
rank 1 3 "$WORK/g1.log" -- --set train.total_batch_size=192 --set checkpoint.dir="$WORK/g1" & p1=$!
sleep 1; pkill -9 -P $p0
t0=$(date +%s); wait $p1; rc=$?; t=$(( $(date +%s) - t0 ))
if [ $rc -eq 1 ] && [ $t -le 5 ] && grep -q "rank 1: rank 0 at 127.0.0.1:$PORT closed the connection before the join ended" "$WORK/g1.log"; then
    ok rank0_gone_during_join
else fail rank0_gone_during_join "rc=$rc in $t s: $(cat "$WORK/g1.log")"; fi
wait $p0 2>/dev/null

# a wrong address: at once; a port in use: rank 0 says so at once
PORT=$(free_port)
out=$( (rank 1 2 /dev/stdout MASTER_ADDR=no-such-host.invalid -- --set checkpoint.dir="$WORK/bad") ); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "rank 1: cannot reach rank 0: no-such-host.invalid:$PORT (MASTER_ADDR and MASTER_PORT): cannot resolve the host name"; then
    ok wrong_address
else fail wrong_address "rc=$rc: $out"; fi
rank 0 2 "$WORK/hold.log" GPT2GEN_JOIN_TIMEOUT=15 -- --set checkpoint.dir="$WORK/hold" & ph=$!
sleep 0.5
t0=$(date +%s); out=$( (rank 0 2 /dev/stdout -- --set checkpoint.dir="$WORK/busy") ); rc=$?; t=$(( $(date +%s) - t0 ))
if [ $rc -eq 1 ] && [ $t -le 5 ] && printf '%s' "$out" | grep -q "^gpt2gen: rank 0: port $PORT (MASTER_ADDR and MASTER_PORT) is in use on this host"; then
    ok port_in_use
else fail port_in_use "rc=$rc in $t s: $out"; fi
kill $ph 2>/dev/null; wait $ph 2>/dev/null

# after the join: rank 0 killed, rank 1's wait ends at once; SIGTERM to rank 1, every rank saves at one step
# (ZeRO-1 in a folder both use: rank 1's state shard beside rank 0's files, one marker)
long="--set train.total_batch_size=128 --set train.steps=1000000 --set eval.val_every=0"
PORT=$(free_port)
rank 0 2 "$WORK/k0.log" -- $long --set checkpoint.dir="$WORK/k" & p0=$!
rank 1 2 "$WORK/k1.log" -- $long --set checkpoint.dir="$WORK/k1" & p1=$!
if wait_steps "$WORK/k" 1; then
    pkill -9 -P $p0
    t0=$(date +%s); wait $p1; rc=$?; t=$(( $(date +%s) - t0 ))
    if [ $rc -eq 1 ] && [ $t -le 10 ] && grep -q "rank 1: .*rank 0 has gone" "$WORK/k1.log"; then ok rank0_killed_after_join
    else fail rank0_killed_after_join "rc=$rc in $t s: $(cat "$WORK/k1.log")"; fi
else kill -9 $p0 $p1; fail rank0_killed_after_join "no steps: $(cat "$WORK/k0.log" "$WORK/k1.log")"; fi
wait $p0 2>/dev/null
PORT=$(free_port)
rank 0 2 "$WORK/t0.log" -- $long --set train.zero_stage=1 --set checkpoint.dir="$WORK/term" & p0=$!
rank 1 2 "$WORK/t1.log" -- $long --set train.zero_stage=1 --set checkpoint.dir="$WORK/term" & p1=$!
if wait_steps "$WORK/term" 1; then
    kill -TERM $p1; wait $p0; rc0=$?; wait $p1; rc1=$?
    if [ $rc0 -eq 130 ] && [ $rc1 -eq 130 ] && [ "$(ls "$WORK/term" | grep -c '^done_')" -eq 1 ] && ls "$WORK/term" | grep -q '^state_.*\.r1\.bin$' \
       && grep -q "stopped at step [0-9]* (another rank was asked to stop): checkpoint saved" "$WORK/t0.log"; then ok sigterm_one_rank_all_save
    else fail sigterm_one_rank_all_save "rc=$rc0 $rc1: $(ls "$WORK/term"; cat "$WORK/t0.log" "$WORK/t1.log")"; fi
else kill -9 $p0 $p1; fail sigterm_one_rank_all_save "no steps: $(cat "$WORK/t0.log" "$WORK/t1.log")"; fi
wait 2>/dev/null
finish
