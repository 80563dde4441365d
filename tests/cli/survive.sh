#!/bin/sh
# Output that survives (docs/training.md): a closed standard output (a pipe, or none at all) does not stop
# training; SIGTERM saves and exits 130 like Ctrl-C, also with a process per rank (the ranks agree on the step);
# metrics.jsonl takes each record whole or not at all, a write error is one message and training goes on, and a
# torn last line left by a run that stopped mid-write is repaired by the next run. The full disk is /dev/full,
# and a 4 KiB tmpfs (mounted in a user namespace, skipped where the machine cannot mount) for a record cut short.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
fast="--backend cpu --set train.total_batch_size=128 --set eval.val_every=0"
# parses FILE: every line of FILE is one JSON object and the file ends with an end of line
parses() {
    python3 -c 'import json, sys
d = open(sys.argv[1], "rb").read()
assert d.endswith(b"\n")
for l in d.decode().splitlines(): json.loads(l)' "$1" 2>/dev/null
}
steps_in() { grep -c '"event":"step"' "$1" 2>/dev/null; }

# a closed standard output: the run goes on to the end, saves, logs every step, and says so on stderr
{ "$GPT2GEN" train $M $fast --set train.steps=4 --set checkpoint.dir="$WORK/pipe" 2> "$WORK/pipe.err"; echo $? > "$WORK/pipe.rc"; } | head -1 > /dev/null
rc=$(cat "$WORK/pipe.rc")
if [ "$rc" -eq 0 ] && [ -f "$WORK/pipe/model_00000004.bin" ] && [ "$(steps_in "$WORK/pipe/metrics.jsonl")" -eq 4 ] \
   && grep -q "standard output: .*progress goes on in .*metrics.jsonl" "$WORK/pipe.err"; then ok closed_stdout_trains_on
else fail closed_stdout_trains_on "rc=$rc, $(steps_in "$WORK/pipe/metrics.jsonl") steps logged: $(cat "$WORK/pipe.err")"; fi

# no standard output at all (closed, not a pipe): what would print does not land in a file the run opened (the
# first file opened takes the lowest free descriptor: run.lock, which must hold only the run's pid)
"$GPT2GEN" train $M $fast --set train.steps=100000 --set checkpoint.dir="$WORK/closed" >&- 2> "$WORK/closed.err" &
pid=$!
if wait_steps "$WORK/closed" 1; then
    lock=$(cat "$WORK/closed/run.lock"); kill -TERM $pid; wait $pid; rc=$?
    if [ $rc -eq 130 ] && [ "$lock" = "$pid" ] && parses "$WORK/closed/metrics.jsonl"; then ok stdout_closed_outright_not_reused
    else fail stdout_closed_outright_not_reused "rc=$rc, run.lock holds '$(printf '%s' "$lock" | head -c 200)': $(cat "$WORK/closed.err")"; fi
else kill -9 $pid; wait $pid; fail stdout_closed_outright_not_reused "no steps: $(cat "$WORK/closed.err")"; fi

# a metrics log on a full device: one message, training goes on and saves
mkdir -p "$WORK/full" && ln -s /dev/full "$WORK/full/metrics.jsonl"
out=$("$GPT2GEN" train $M $fast --set train.steps=2 --set checkpoint.dir="$WORK/full" 2>&1); rc=$?
n=$(printf '%s\n' "$out" | grep -c "metrics.jsonl: No space left on device: later records are lost; training goes on")
if [ $rc -eq 0 ] && [ "$n" -eq 1 ] && [ -f "$WORK/full/model_00000002.bin" ]; then ok metrics_write_error_reported_once
else fail metrics_write_error_reported_once "rc=$rc, $n messages: $out"; fi

# a record cut short by a full disk is taken back: the log still parses
if unshare -rm true 2>/dev/null; then
    mkdir -p "$WORK/small" "$WORK/tmpfs"
    out=$(unshare -rm sh -c 'mount -t tmpfs -o size=4k tmpfs "$1" || exit 99
        python3 -c "import sys; open(sys.argv[1], \"w\").write(\"{\\\"event\\\":\\\"\\\"}\\n\" * 310)" "$1/metrics.jsonl"
        ln -s "$1/metrics.jsonl" "$2/metrics.jsonl"
        "$3" train $4 --set train.steps=2 --set checkpoint.dir="$2" 2>&1; rc=$?
        cp "$1/metrics.jsonl" "$2/log.jsonl"; exit $rc' sh "$WORK/tmpfs" "$WORK/small" "$GPT2GEN" "$M $fast"); rc=$?
    if [ $rc -eq 99 ]; then skip metrics_full_disk_whole_records "cannot mount a tmpfs in a user namespace here: $out"
    elif [ $rc -eq 0 ] && parses "$WORK/small/log.jsonl" && [ "$(wc -l < "$WORK/small/log.jsonl")" -ge 310 ] \
         && printf '%s' "$out" | grep -q "No space left on device: later records are lost"; then ok metrics_full_disk_whole_records
    else fail metrics_full_disk_whole_records "rc=$rc: $out $(tail -c 200 "$WORK/small/log.jsonl")"; fi
else skip metrics_full_disk_whole_records "unshare -rm is not allowed here: no tmpfs to fill"; fi

# SIGTERM: saves and exits 130; a torn last line of the log is repaired by the resumed run
"$GPT2GEN" train $M $fast --set train.steps=100000 --set checkpoint.dir="$WORK/term" > "$WORK/term.log" 2>&1 &
pid=$!
if wait_steps "$WORK/term" 1; then
    kill -TERM $pid; wait $pid; rc=$?
    saved=$(ls "$WORK/term" | sed -n 's/^model_0*\([0-9][0-9]*\)\.bin$/\1/p' | tail -1)
    if [ $rc -eq 130 ] && [ -n "$saved" ] && [ -f "$WORK/term/state_$(printf %08d "$saved").bin" ] \
       && grep -q "stopped at step $saved by SIGTERM: checkpoint saved" "$WORK/term.log"; then ok sigterm_saves_checkpoint
    else fail sigterm_saves_checkpoint "rc=$rc: $(tail -3 "$WORK/term.log")"; fi
    printf '{"event":"step","st' >> "$WORK/term/metrics.jsonl"
    out=$("$GPT2GEN" train $M $fast --set train.steps=$((${saved:-0} + 1)) --set checkpoint.dir="$WORK/term" --resume 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "resuming from .*(step $saved)" && parses "$WORK/term/metrics.jsonl" \
       && printf '%s' "$out" | grep -q "metrics.jsonl: its last line was cut short (19 bytes"; then ok torn_metrics_repaired_on_resume
    else fail torn_metrics_repaired_on_resume "rc=$rc: $out"; fi
else kill -9 $pid; wait $pid; fail sigterm_saves_checkpoint "no steps: $(tail -3 "$WORK/term.log")"; fi

# SIGTERM to one rank of a process per rank: every rank stops at the same step, one checkpoint, exit 130
GPT2GEN_CPU_PROCESSES=1 "$GPT2GEN" train $M $fast -q --set train.total_batch_size=256 --gpus 2 --set train.steps=100000 \
    --set checkpoint.dir="$WORK/ranks" > "$WORK/ranks.log" 2>&1 &
parent=$!
if wait_steps "$WORK/ranks" 1; then
    victim=$(pgrep -P $parent | tail -1)
    kill -TERM "${victim:-$parent}"; wait $parent; rc=$?
    if [ $rc -eq 130 ] && [ "$(ls "$WORK/ranks" | grep -c '^done_')" -eq 1 ] \
       && grep -q "stopped at step [0-9]* .*: checkpoint saved" "$WORK/ranks.log"; then ok sigterm_ranks_agree
    else fail sigterm_ranks_agree "rc=$rc: $(ls "$WORK/ranks") $(tail -3 "$WORK/ranks.log")"; fi
else kill -9 $parent; wait $parent; fail sigterm_ranks_agree "no steps: $(tail -3 "$WORK/ranks.log")"; fi

finish
