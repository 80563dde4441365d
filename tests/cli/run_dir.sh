#!/bin/sh
# The run directory (checkpoint.dir) under hostile conditions, end to end on the CPU backend: nothing crashes,
# hangs or loses data. One run holds the directory's lock; a run without --resume never overwrites earlier
# checkpoints; an unusable directory, a bad shard or a bad tokenizer file is refused before the first step;
# leftovers of killed saves are removed; a failed save leaves no half pair; resume takes the newest complete,
# valid model+state pair and says what it skipped; crafted resume states are refused; a FIFO where a file should
# be is refused, not waited on; metrics.jsonl is JSON whatever the paths and the sampled text hold.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
run() { timeout 300 "$GPT2GEN" train $M --backend cpu -q --set eval.val_every=0 --set train.steps=2 "$@"; }

# craft STATE FIELD VALUE: sets a header field of a resume state (step, row: the data position) and, in a
# state with a checksum (version 2 and later), seals it again, so that only the field's own check can refuse it.
# craft STATE flip: flips one byte of the body and leaves the checksum as it was.
craft() {
    python3 - "$@" <<'PY'
import struct, sys
path, field = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
if field == "flip":
    b[-100] ^= 0x40
else:
    at, fmt = {"step": (6 * 4, "<i"), "row": (9 * 4, "<q")}[field]
    struct.pack_into(fmt, b, at, int(sys.argv[3]))
    if struct.unpack_from("<i", b, 4)[0] >= 2:      # the checksum: header (checksum zeroed) + body, 64-bit words
        struct.pack_into("<Q", b, 24 * 4, 0)
        data = bytes(b) + b"\0" * (-len(b) % 8)
        M, K, h = (1 << 64) - 1, 0x9E3779B97F4A7C15, 0xCBF29CE484222325
        for w in list(memoryview(data).cast("Q")) + [len(b)]:
            h = ((((h << 31) | (h >> 33)) & M) ^ w) * K & M
        struct.pack_into("<Q", b, 24 * 4, h)
open(path, "wb").write(b)
PY
}
# expect NAME RC TEXT OUTPUT_RC: the run's exit code was RC and its output holds TEXT
expect() {
    if [ "$4" -eq "$2" ] && printf '%s' "$out" | grep -qF -- "$3"; then ok "$1"
    else fail "$1" "exit code $4 (expected $2), output lacks '$3': $out"; fi
}
# before_training NAME: the output shows that no training started
before_training() {
    if printf '%s' "$out" | grep -q "^training "; then fail "$1" "refused only after training started: $out"; else ok "$1"; fi
}

# A base run: complete pairs at steps 1 and 2. Each case below works on a copy of it.
run --set checkpoint.dir="$WORK/base" --set checkpoint.every=1 > "$WORK/base.log" 2>&1
if [ ! -f "$WORK/base/state_00000002.bin" ] || [ ! -f "$WORK/base/model_00000001.bin" ]; then
    fail base_run "$(cat "$WORK/base.log")"; finish
fi
copy() { rm -rf "$WORK/$1"; cp -r "$WORK/base" "$WORK/$1"; D="$WORK/$1"; }

# --- no data lost ---------------------------------------------------------------------------------------------

# a run without --resume into a directory with checkpoints refuses before training and says how to go on (the
# run is of another seed, so that what it would write differs from what is there)
copy overwrite
out=$(run --set checkpoint.dir="$D" --set train.seed=7 2>&1); rc=$?
expect refuse_overwrite 1 "--resume" $rc
if cmp -s "$D/model_00000002.bin" "$WORK/base/model_00000002.bin" && cmp -s "$D/state_00000002.bin" "$WORK/base/state_00000002.bin"
then ok refuse_overwrite_keeps_files; else fail refuse_overwrite_keeps_files "the earlier checkpoints changed"; fi

# the lock: a second run into a directory another run is training in is refused, naming the other's pid
mkdir -p "$WORK/locked"
"$GPT2GEN" train $M --backend cpu --set checkpoint.dir="$WORK/locked" --set train.steps=100000 --set eval.val_every=0 > "$WORK/first.log" 2>&1 &
first=$!
for i in $(seq 1 300); do grep -q "^step " "$WORK/first.log" && break; sleep 0.1; done
out=$(run --set checkpoint.dir="$WORK/locked" --set train.steps=1 2>&1); rc=$?
expect locked_dir_refused 1 "pid $first" $rc
if printf '%s' "$out" | grep -qF "$WORK/locked"; then ok locked_dir_message_names_dir; else fail locked_dir_message_names_dir "$out"; fi
kill -INT $first; wait $first

# a stale lock (its run was killed) is taken over, with a note
mkdir -p "$WORK/stale"
dead=$(sh -c 'echo $$')
echo "$dead" > "$WORK/stale/run.lock"
out=$(run --set checkpoint.dir="$WORK/stale" --set train.steps=1 2>&1); rc=$?
expect stale_lock_taken_over 0 "pid $dead" $rc
if [ ! -e "$WORK/stale/run.lock" ]; then ok lock_removed_at_exit; else fail lock_removed_at_exit "run.lock is still there"; fi

# an unusable checkpoint.dir is refused before the first step (these fail for root too)
printf 'x' > "$WORK/a_file"
out=$(run --set checkpoint.dir="$WORK/a_file" 2>&1); rc=$?
expect dir_is_a_file 1 "a_file" $rc; before_training dir_is_a_file_before_training
out=$(run --set checkpoint.dir=/etc/passwd/x 2>&1); rc=$?
expect dir_under_a_file 1 "/etc/passwd" $rc; before_training dir_under_a_file_before_training
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$WORK/ro" && chmod 555 "$WORK/ro"; ro="$WORK/ro"
elif [ -d /proc ] && ! touch /proc/gpt2gen-probe 2>/dev/null; then ro=/proc
else ro=""; fi
if [ -n "$ro" ]; then
    out=$(run --set checkpoint.dir="$ro" 2>&1); rc=$?
    expect dir_not_writable 1 "$ro" $rc; before_training dir_not_writable_before_training
else skip dir_not_writable "no directory here that this user cannot write"; fi
# a full disk at run.lock is said to be one, not worded as a permissions problem (a 64 KiB tmpfs, filled, in a
# mount namespace of its own; skipped where this machine cannot make one)
mkdir -p "$WORK/full"
if unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs "$1"' sh "$WORK/full" 2>/dev/null; then
    out=$(unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs "$1" && mkdir "$1/run" && { head -c 1048576 /dev/zero > "$1/fill"; true; } 2>/dev/null &&
          exec timeout 60 "$2" train "$3" --backend cpu -q --set checkpoint.dir="$1/run"' sh "$WORK/full" "$GPT2GEN" $M 2>&1); rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "run.lock: .*No space left on device (the file system of checkpoint.dir is full" \
       && ! printf '%s' "$out" | grep -q "this user can write"; then ok run_lock_disk_full
    else fail run_lock_disk_full "rc=$rc: $out"; fi
else skip run_lock_disk_full "cannot mount a tmpfs in a mount namespace here"; fi
# a data path with a name longer than the file system allows is said so, not "no match" or "no such file" (a
# tokenizer that samples need is an error before training)
L=$(printf '%0300d' 0)
out=$(run --set checkpoint.dir="$WORK/long1" --set data.train="$WORK/$L/train_*.bin" 2>&1); rc=$?
expect shards_name_too_long 1 "longer than the file system allows" $rc
out=$(run --set checkpoint.dir="$WORK/long2" --set train.steps=1 --set eval.sample_every=1 --set eval.sample_tokens=2 \
      --set data.tokenizer="$WORK/$L/tokenizer.bin" 2>&1); rc=$?
expect tokenizer_name_too_long 1 "tokenizer.bin: a name in the path is longer than the file system allows" $rc
before_training tokenizer_name_too_long_before_training

# leftovers of killed saves are removed at the start
copy leftovers
# (pid 99999999 is past any pid_max: a process that is gone); a file of that name that is a link, or a name without
# the writer's random part, is not provably a leftover and stays
touch "$D/model_00000003.bin.tmp.99999999.0123456789abcdef" "$D/state_00000003.bin.tmp.99999999.00000000deadbeef" \
    "$D/model_00000009.bin.tmp.4242"
ln -s model_00000009.bin.tmp.4242 "$D/state_00000009.bin.tmp.99999999.0123456789abcdef"
out=$(run --set checkpoint.dir="$D" --resume 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(ls "$D" | grep -c '\.tmp\.')" -eq 2 ] && [ -e "$D/model_00000009.bin.tmp.4242" ] \
   && [ -L "$D/state_00000009.bin.tmp.99999999.0123456789abcdef" ]; then ok leftovers_removed_only_provable
else fail leftovers_removed_only_provable "rc=$rc; $(ls "$D"): $out"; fi
rm -f "$D"/*.tmp.*

# a failed model write leaves no state without its model: the pair at step 1 stays the newest
copy failed_save
rm "$D/model_00000002.bin" "$D/state_00000002.bin"; mkdir "$D/model_00000002.bin"
out=$(run --set checkpoint.dir="$D" --resume 2>&1); rc=$?
expect failed_save_reported 1 "model_00000002.bin" $rc
if [ ! -e "$D/state_00000002.bin" ]; then ok failed_save_no_orphan_state; else fail failed_save_no_orphan_state "state_00000002.bin is left without its model"; fi
rmdir "$D/model_00000002.bin"
out=$(run --set checkpoint.dir="$D" --resume 2>&1); rc=$?
expect failed_save_resumes_previous_pair 0 "state_00000001.bin (step 1)" $rc

# --- resume takes the newest complete, valid pair and says what it skipped ---------------------------------
# fallback NAME WHAT TEXT: after WHAT broke the step-2 pair, resume skips it (the output says TEXT), continues
# from step 1, and writes the same step-2 files the base run wrote (exact resume)
fallback() {
    out=$(run --set checkpoint.dir="$D" --resume 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s' "$out" | grep -qF -- "$2" && printf '%s' "$out" | grep -qF "state_00000001.bin (step 1)" \
       && cmp -s "$D/model_00000002.bin" "$WORK/base/model_00000002.bin" && cmp -s "$D/state_00000002.bin" "$WORK/base/state_00000002.bin"
    then ok "$1"; else fail "$1" "rc=$rc: $out"; fi
}
copy corrupt_model; head -c 5000 "$WORK/base/model_00000002.bin" > "$D/model_00000002.bin"
fallback resume_skips_truncated_model "model_00000002.bin: truncated"
copy missing_model; rm "$D/model_00000002.bin"
fallback resume_skips_missing_model "model_00000002.bin"
copy missing_state; rm "$D/state_00000002.bin"
fallback resume_skips_missing_state "state_00000002.bin"
copy flipped_state; craft "$D/state_00000002.bin" flip
fallback resume_skips_flipped_state "state_00000002.bin: checksum"
copy other_model; cp "$WORK/base/model_00000001.bin" "$D/model_00000002.bin"
fallback resume_skips_model_of_other_step "model_00000002.bin"
copy all_bad; craft "$D/state_00000002.bin" flip; rm "$D/model_00000001.bin"
out=$(run --set checkpoint.dir="$D" --resume 2>&1); rc=$?
expect resume_without_a_valid_pair 1 "model_00000001.bin" $rc

# --- crafted resume states ------------------------------------------------------------------------------------
copy row; craft "$D/state_00000002.bin" row 9223372036854775806; rm "$D/state_00000001.bin"
out=$(run --set checkpoint.dir="$D" --resume --set train.steps=4 2>&1); rc=$?
expect state_row_out_of_range 1 "row 9223372036854775806" $rc
copy negative; craft "$D/state_00000002.bin" step -5
out=$(run --set checkpoint.dir="$D" --resume 2>&1); rc=$?
if printf '%s' "$out" | grep -q "step -5" && ! printf '%s' "$out" | grep -q "resuming from .*state_00000002"; then ok state_negative_step
else fail state_negative_step "rc=$rc: $out"; fi
copy beyond
out=$(run --set checkpoint.dir="$D" --resume --set train.steps=1 2>&1); rc=$?
expect state_beyond_train_steps 1 "train.steps" $rc
copy shape   # n_head 2 -> 4 keeps the parameter count
out=$(run --set checkpoint.dir="$D" --resume --set model.n_head=4 2>&1); rc=$?
expect state_other_shape_same_params 1 "n_head" $rc
copy batch
out=$(run --set checkpoint.dir="$D" --resume --set train.batch_size=2 2>&1); rc=$?
expect state_other_batch_size 1 "batch_size" $rc

# --- inputs checked before the first step -----------------------------------------------------------------
mkdir -p "$WORK/shards"
cp data/fortunes/train_000000.bin "$WORK/shards/train_000000.bin"
head -c 5000 data/fortunes/train_000000.bin > "$WORK/shards/train_000001.bin"
out=$(run --set checkpoint.dir="$WORK/shards_run" --set data.train="$WORK/shards/train_*.bin" 2>&1); rc=$?
expect truncated_shard_among_several 1 "train_000001.bin: truncated" $rc; before_training truncated_shard_before_training

# a FIFO where a file should be is refused at once, not waited on (its open would block for a writer)
mkfifo "$WORK/fifo.bin"
mkdir -p "$WORK/fifo_shards" && cp data/fortunes/train_000000.bin "$WORK/fifo_shards/" && mkfifo "$WORK/fifo_shards/train_000001.bin"
out=$(timeout 30 "$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/fifo1" --set checkpoint.init="$WORK/fifo.bin" 2>&1); rc=$?
expect fifo_init_refused 1 "fifo.bin: not a regular file" $rc
out=$(timeout 30 "$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/fifo2" --set data.tokenizer="$WORK/fifo.bin" 2>&1); rc=$?
expect fifo_tokenizer_refused 1 "fifo.bin: not a regular file" $rc
out=$(timeout 30 "$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/fifo3" --set data.train="$WORK/fifo_shards/train_*.bin" 2>&1); rc=$?
expect fifo_shard_refused 1 "train_000001.bin: not a regular file" $rc

head -c 3000 data/fortunes/tokenizer.bin > "$WORK/cut_tokenizer.bin"
out=$(run --set checkpoint.dir="$WORK/tok1" --set data.tokenizer="$WORK/cut_tokenizer.bin" 2>&1); rc=$?
expect truncated_tokenizer 1 "cut_tokenizer.bin" $rc
python3 -c '
import struct, sys
n = 60000
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240328, 2, n, n - 1, *[0] * 252) + b"\x01a" * n)' "$WORK/big_tokenizer.bin"
out=$(run --set checkpoint.dir="$WORK/tok2" --set data.tokenizer="$WORK/big_tokenizer.bin" 2>&1); rc=$?
expect tokenizer_larger_than_vocab 1 "big_tokenizer.bin" $rc

# --- metrics.jsonl is JSON whatever the strings hold ---------------------------------------------------------
Q="$WORK/we\"ird\\dir"
out=$(run --set checkpoint.dir="$Q" --set train.steps=1 --set eval.sample_every=1 --set eval.sample_tokens=12 2>&1); rc=$?
out=$(python3 - "$Q/metrics.jsonl" "$Q/model_00000001.bin" <<'PY' 2>&1
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
ck = [e for e in ev if e.get("event") == "checkpoint"]
sm = [e for e in ev if e.get("event") == "sample"]
print(ck, sm)
sys.exit(0 if [e["model"] for e in ck] == [sys.argv[2]] and len(sm) == 1 and isinstance(sm[0].get("text"), str) else 1)
PY
) || rc=1
if [ $rc -eq 0 ]; then ok metrics_json_escaped; else fail metrics_json_escaped "$out"; fi

finish
