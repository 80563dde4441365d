#!/bin/sh
# What sample --batch and eval --rows ask for is checked before anything is allocated (issue 42; docs/sampling-eval-hf.md,
# "Memory"): on the CPU backend, in a process whose address space is limited (ulimit -v, which the check reads),
#   - sample --batch 4096 is refused with one message naming --batch, the GiB needed and left, and the most rows
#     that fit; a batch of that many rows, and a batch of 8, then run under the same limit;
#   - eval --rows 4096 on a set of 4096 completions (each row keeps its logits: 6 MiB a row) likewise names --rows.
# Before the check, both took the allocator's failure (an abort) or a message that never named the option.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
# AddressSanitizer reserves terabytes of shadow address space at start: under ulimit -v it cannot start at all
case "$ASAN_OPTIONS" in *?*) skip memory_check "under AddressSanitizer (tests/sanitize.sh): ulimit -v leaves no room for its shadow memory"; finish ;; esac
"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/run" --set train.steps=1 > "$WORK/train.log" 2>&1 \
    || { fail setup_checkpoint "$(tail -5 "$WORK/train.log")"; finish; }
CK=$WORK/run/model_00000001.bin
LIMIT=800000   # KiB of address space: the micro model's 8 rows fit; 4096 rows (about 1.6 GiB) do not

limited() { ( ulimit -v $LIMIT && "$@" ) > "$WORK/out" 2> "$WORK/err"; echo $? > "$WORK/rc"; }

limited "$GPT2GEN" sample --checkpoint "$CK" --backend cpu --batch 4096 --tokens 1 --prompt hi
if [ "$(cat "$WORK/rc")" -eq 1 ] && grep -q -- "--batch 4096: 4096 rows need about [0-9.]* GiB of memory" "$WORK/err" \
    && grep -q "GiB are left to this process on the host; at most [0-9]* rows fit: lower --batch" "$WORK/err"; then
    ok sample_batch_checked
else fail sample_batch_checked "rc=$(cat "$WORK/rc"): $(head -c 400 "$WORK/err")"; fi
fit=$(sed -n 's/.*at most \([0-9]*\) rows fit.*/\1/p' "$WORK/err")
if [ -n "$fit" ] && [ "$fit" -ge 8 ] && [ "$fit" -lt 4096 ]; then ok sample_batch_most_rows "$fit"
else fail sample_batch_most_rows "'$fit'"; fi
if [ -n "$fit" ]; then
    limited "$GPT2GEN" sample --checkpoint "$CK" --backend cpu --batch "$fit" --tokens 1 --prompt hi
    if [ "$(cat "$WORK/rc")" -eq 0 ] && [ "$(grep -c '^---$' "$WORK/out")" -eq $((fit - 1)) ]; then ok sample_most_rows_run
    else fail sample_most_rows_run "rc=$(cat "$WORK/rc"): $(head -c 400 "$WORK/err")"; fi
fi
limited "$GPT2GEN" sample --checkpoint "$CK" --backend cpu --batch 8 --tokens 2 --prompt hi
if [ "$(cat "$WORK/rc")" -eq 0 ] && [ "$(grep -c '^---$' "$WORK/out")" -eq 7 ]; then ok sample_small_batch_runs
else fail sample_small_batch_runs "rc=$(cat "$WORK/rc"): $(head -c 400 "$WORK/err")"; fi

# an evaluation set of 1024 examples of 4 completions: 4096 rows (tests/evalset.py)
python3 "$ROOT/tests/evalset.py" "$WORK/set.bin" 1024 1 3 1
limited "$GPT2GEN" eval --checkpoint "$CK" --data "$WORK/set.bin" --backend cpu --rows 4096
if [ "$(cat "$WORK/rc")" -eq 1 ] && grep -q -- "--rows 4096: 4096 rows need about [0-9.]* GiB of memory" "$WORK/err" \
    && grep -q "lower --rows" "$WORK/err"; then ok eval_rows_checked
else fail eval_rows_checked "rc=$(cat "$WORK/rc"): $(head -c 400 "$WORK/err")"; fi
finish
