#!/bin/sh
# A new user's first hour (issue 21), on the CPU backend: a run folder with checkpoints is refused in words (what
# is there, what to pass), --fresh starts over and --again continues an unfinished run or starts a finished one
# over, saying which; resuming a finished run says there is nothing to do (exit 0); "done: N steps" counts the
# steps trained; a tokenizer that samples need is an error before anything runs (unless data.tokenizer = "none");
# a run that fails before its first step leaves no folder it made; --gpus N checks the GPUs before the config's
# checks that depend on N, and --backend cuda the GPU before building; each failure is one message on stderr, and the
# CPU training prints no arch line; a log of both streams has the lines in the order they were printed.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
run() { timeout 300 "$GPT2GEN" train $M --backend cpu -q --set eval.val_every=0 --set train.steps=2 "$@"; }
# expect NAME RC TEXT OUTPUT_RC: the run's exit code was RC and its output ($out) holds TEXT
expect() {
    if [ "$4" -eq "$2" ] && printf '%s' "$out" | grep -qF -- "$3"; then ok "$1"
    else fail "$1" "exit code $4 (expected $2), output lacks '$3': $out"; fi
}
nlines() { printf '%s\n' "$1" | grep -c .; }

# --- a folder that holds a run ---------------------------------------------------------------------------------
D=$WORK/run
run --set checkpoint.dir="$D" --set checkpoint.every=1 > "$WORK/first.log" 2>&1
if [ ! -f "$D/model_00000002.bin" ]; then fail first_run "$(cat "$WORK/first.log")"; finish; fi
cp -r "$D" "$WORK/saved"
same_model() { cmp -s "$D/model_00000002.bin" "$WORK/saved/model_00000002.bin"; }
same_as_saved() { same_model && cmp -s "$D/metrics.jsonl" "$WORK/saved/metrics.jsonl"; }

# the plain command again: refused in one line that says what is there and what to pass; nothing changes
out=$(run --set checkpoint.dir="$D" 2>&1); rc=$?
expect refusal_in_words 1 "holds an earlier run, finished: 2 checkpoints, the last at step 2 of 2; start it over with --fresh" $rc
if [ "$(nlines "$out")" = 1 ] && printf '%s' "$out" | grep -qF -- "--resume and a larger train.steps" && same_as_saved
then ok refusal_one_line_nothing_changed; else fail refusal_one_line_nothing_changed "$out"; fi
out=$(run --set checkpoint.dir="$D" --set train.steps=5 2>&1); rc=$?
expect refusal_unfinished 1 "2 checkpoints, the last at step 2 of 5; continue it with --resume, start it over with --fresh" $rc

# --resume on the finished run: nothing to do, said so, exit 0, nothing trained or written
out=$(run --set checkpoint.dir="$D" --resume 2>&1); rc=$?
expect resume_finished_says_so 0 "$D: the run is finished (step 2 of 2): nothing to do (raise train.steps to train on)" $rc
if ! printf '%s' "$out" | grep -q "^training " && same_as_saved; then ok resume_finished_trains_nothing
else fail resume_finished_trains_nothing "$out"; fi

# --again on the finished run: starts over, says so, and the new run is the first one again (same bits); the
# earlier metrics are not appended to
out=$(run --set checkpoint.dir="$D" --again 2>&1); rc=$?
expect again_finished_starts_over 0 "holds a finished run (2 checkpoints, the last at step 2 of 2): starting over" $rc
if printf '%s' "$out" | grep -qF "removed the earlier run from $D: 2 checkpoints, the last at step 2 (4 files), metrics.jsonl and plot.svg" \
   && same_model && [ ! -e "$D/model_00000001.bin" ] && [ "$(grep -c '"event":"start"' "$D/metrics.jsonl")" = 1 ]; then
    ok again_finished_same_run
else fail again_finished_same_run "$(ls "$D"): $out"; fi
# --again on an unfinished run (train.steps raised): continues it from its last checkpoint
out=$(run --set checkpoint.dir="$D" --set train.steps=3 --again 2>&1); rc=$?
expect again_unfinished_continues 0 "holds an unfinished run (1 checkpoint, at step 2 of 3): continuing it" $rc
if printf '%s' "$out" | grep -q "resuming from .*state_00000002.bin (step 2)" && [ -f "$D/model_00000003.bin" ]; then ok again_unfinished_resumed
else fail again_unfinished_resumed "$out"; fi
# --fresh: starts over without asking; a file of the user's in the folder stays
echo mine > "$D/notes.txt"
out=$(run --set checkpoint.dir="$D" --fresh 2>&1); rc=$?
expect fresh_starts_over 0 "removed the earlier run from $D: 2 checkpoints, the last at step 3" $rc
if [ ! -e "$D/model_00000003.bin" ] && [ -f "$D/model_00000002.bin" ] && [ "$(cat "$D/notes.txt")" = mine ]; then ok fresh_keeps_other_files
else fail fresh_keeps_other_files "$(ls "$D")"; fi
out=$(run --set checkpoint.dir="$D" --fresh --resume 2>&1); rc=$?
expect fresh_with_resume_refused 2 "pass one of them" $rc

# --- the step count -------------------------------------------------------------------------------------------
for n in 1 2 3; do
    out=$("$GPT2GEN" train $M --backend cpu --set eval.val_every=0 --set train.steps=$n --set checkpoint.dir="$WORK/count$n" 2>&1); rc=$?
    steps=$(grep -c '"event":"step"' "$WORK/count$n/metrics.jsonl" 2>/dev/null)
    s="steps"; [ $n = 1 ] && s=step
    if [ $rc -eq 0 ] && [ "$steps" = $n ] && printf '%s' "$out" | grep -q "^done: $n $s, "; then ok "done_counts_${n}_steps"
    else fail "done_counts_${n}_steps" "rc=$rc, $steps step records: $(printf '%s' "$out" | grep '^done')"; fi
done

# --- the tokenizer ----------------------------------------------------------------------------------------------
out=$(run --set checkpoint.dir="$WORK/tok/run" --set eval.sample_every=1 --set data.tokenizer="$WORK/tokenizr.bin" 2>&1); rc=$?
expect missing_tokenizer_is_an_error 1 "data.tokenizer: $WORK/tokenizr.bin: no such file" $rc
if [ "$(nlines "$out")" = 1 ] && printf '%s' "$out" | grep -qF 'data.tokenizer = "none"' && [ ! -e "$WORK/tok" ]; then
    ok missing_tokenizer_before_anything
else fail missing_tokenizer_before_anything "$(ls "$WORK/tok" 2>&1): $out"; fi
out=$(run --set checkpoint.dir="$WORK/none" --set eval.sample_every=2 --set data.tokenizer=none 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "^--- sample at step 2: <[0-9]*><[0-9]*>"; then ok tokenizer_none_prints_ids
else fail tokenizer_none_prints_ids "rc=$rc: $out"; fi
# without samples nothing reads it: a missing one goes unsaid
out=$(run --set checkpoint.dir="$WORK/nosamples" --set eval.sample_every=0 --set data.tokenizer="$WORK/tokenizr.bin" 2>&1); rc=$?
if [ $rc -eq 0 ] && ! printf '%s' "$out" | grep -q tokenizr; then ok missing_tokenizer_without_samples
else fail missing_tokenizer_without_samples "rc=$rc: $out"; fi

# --- a failed run leaves nothing it made ------------------------------------------------------------------------
out=$(run --set checkpoint.dir="$WORK/new/a/run" --set data.train="$WORK/nothing/train_*.bin" 2>&1); rc=$?
if [ $rc -eq 1 ] && [ ! -e "$WORK/new" ]; then ok failed_run_leaves_no_folder
else fail failed_run_leaves_no_folder "rc=$rc, $(find "$WORK/new" 2>&1 | head -5): $out"; fi
mkdir -p "$WORK/mine" && echo mine > "$WORK/mine/notes.txt"
out=$(run --set checkpoint.dir="$WORK/mine/run" --set data.train="$WORK/nothing/train_*.bin" 2>&1); rc=$?
out2=$(run --set checkpoint.dir="$WORK/mine" --set data.train="$WORK/nothing/train_*.bin" 2>&1); rc2=$?
if [ $rc -eq 1 ] && [ $rc2 -eq 1 ] && [ ! -e "$WORK/mine/run" ] && [ "$(ls "$WORK/mine")" = notes.txt ]; then
    ok failed_run_keeps_the_users_folder
else fail failed_run_keeps_the_users_folder "rc=$rc/$rc2, $(ls "$WORK/mine"): $out $out2"; fi

# --- GPUs and messages ----------------------------------------------------------------------------------------------
if nvidia-smi >/dev/null 2>&1; then
    for t in gpus_checked_first cuda_without_gpu_one_line cpu_training_no_arch_line; do skip $t "there is a GPU here"; done
else
    # tiny pins total_batch_size = 512 = B*T: --gpus 2 would fail the config's check; the GPUs are said first
    out=$("$GPT2GEN" train configs/tiny.lua --gpus 2 --set checkpoint.dir="$WORK/gpus" 2>&1); rc=$?
    if [ $rc -eq 1 ] && [ "$(nlines "$out")" = 1 ] && printf '%s' "$out" | grep -q "^gpt2gen: --gpus 2: no GPU" &&
       ! printf '%s' "$out" | grep -q total_batch_size; then ok gpus_checked_first
    else fail gpus_checked_first "rc=$rc: $out"; fi
    # --backend cuda without a GPU: one line, before anything is built
    out=$("$GPT2GEN" train $M --backend cuda --set checkpoint.dir="$WORK/cuda" 2>&1); rc=$?
    if [ $rc -eq 1 ] && [ "$(nlines "$out")" = 1 ] && printf '%s' "$out" | grep -q "^gpt2gen: --backend cuda: " && [ ! -e "$WORK/cuda" ]
    then ok cuda_without_gpu_one_line; else fail cuda_without_gpu_one_line "rc=$rc: $out"; fi
    # the CPU backend (chosen, or asked for) runs no kernels: no arch line; the reason for the CPU is one clause
    out=$("$GPT2GEN" train $M --set train.steps=1 --set checkpoint.dir="$WORK/auto" 2>&1); rc=$?
    if [ $rc -eq 0 ] && ! printf '%s' "$out" | grep -q "^arch " && printf '%s' "$out" | grep -q "training on the CPU backend" &&
       [ "$(printf '%s' "$out" | grep "training on the CPU backend" | grep -o 'GPU' | wc -l)" = 1 ]; then ok cpu_training_no_arch_line
    else fail cpu_training_no_arch_line "rc=$rc: $out"; fi
fi
# a combined log (2>&1 into a pipe) has the lines in the order they were printed: a note on stdout before the
# error on stderr that follows it
out=$(run --set checkpoint.dir="$WORK/order" --resume --set checkpoint.init="$WORK/none.bin" 2>&1 | cat)
if [ "$(nlines "$out")" = 2 ] && printf '%s\n' "$out" | head -1 | grep -q "^resume: no checkpoint" &&
   printf '%s\n' "$out" | tail -1 | grep -q "none.bin"; then ok combined_log_in_order
else fail combined_log_in_order "$out"; fi
finish
