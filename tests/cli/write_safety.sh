#!/bin/sh
# The borders of the newer commands (issue 42; docs/data.md, "How gpt2gen writes files"), on the CPU backend with a
# checkpoint of the micro model trained one step:
#   - nothing that is not a regular file is replaced or written through, even with --force: plot -o and import -o
#     a FIFO, a device node (made here, where the user may) or a symbolic link are refused and left as they were;
#   - no file gpt2gen did not write is replaced without --force: plot -o over a user's file, export into a folder
#     with a user's config.json, a user's metrics.jsonl in a run folder (never appended to or cut), --fresh over a
#     user's plot.svg; with --force the user's other files in an export folder stay; a plot.svg that cannot be
#     written is one warning, not one per validation;
#   - one export into a folder at a time (its lock; two at once leave one whole export);
#   - an export --force that cannot finish (a full disk: the file size limit) leaves the earlier export whole;
#   - a lost write is an error: sample (streamed and --batch), plot -o - and import's line into /dev/full;
#   - weights that are not numbers are refused with the file and the tensor named: a checkpoint with a NaN (sample,
#     eval, export), an infinity, and a Hugging Face folder with a NaN (import);
#   - bounded inputs: a prompt on standard input over 64 MiB, a document of zeros in prepare, a config.json whose
#     vocab_size is 2^30 (refused by the tensors' shapes before anything is allocated); a tokenizer with fewer tokens than the model; a 4 KB argument
#     is shown cut to 200 bytes.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/run" --set train.steps=1 > "$WORK/train.log" 2>&1 \
    || { fail setup_checkpoint "$(tail -5 "$WORK/train.log")"; finish; }
CK=$WORK/run/model_00000001.bin
W=$WORK

# refused NAME PATTERN RC-FILE ERR-FILE: exit code 1 and one message holding PATTERN
refused() {
    if [ "$(cat "$3")" -eq 1 ] && grep -q -- "$2" "$4"; then return 0; fi
    fail "$1" "rc=$(cat "$3"): $(head -c 400 "$4")"; return 1
}
run() { "$@" > "$W/out" 2> "$W/err"; echo $? > "$W/rc"; }

# ---- plot -o: only its own plots are replaced without --force; never what is not a regular file (import -o below:
# not even with --force)
echo "my notes" > "$W/notes.svg"
run "$GPT2GEN" plot "$WORK/run" -o "$W/notes.svg"
refused plot_keeps_user_file "notes.svg exists and is not an SVG plot that gpt2gen wrote: give --force" "$W/rc" "$W/err" \
    && [ "$(cat "$W/notes.svg")" = "my notes" ] && ok plot_keeps_user_file
run "$GPT2GEN" plot "$WORK/run" -o "$W/notes.svg" --force
if [ "$(cat "$W/rc")" -eq 0 ] && head -1 "$W/notes.svg" | grep -q '^<?xml'; then ok plot_force_replaces_user_file
else fail plot_force_replaces_user_file "rc=$(cat "$W/rc"): $(cat "$W/err")"; fi
run "$GPT2GEN" plot "$WORK/run" -o "$W/notes.svg"
if [ "$(cat "$W/rc")" -eq 0 ]; then ok plot_replaces_its_own_plot; else fail plot_replaces_its_own_plot "$(cat "$W/err")"; fi

mkfifo "$W/fifo"
run timeout 20 "$GPT2GEN" plot "$WORK/run" -o "$W/fifo"
refused plot_fifo_refused "fifo: is a FIFO, not a regular file" "$W/rc" "$W/err" && [ -p "$W/fifo" ] && ok plot_fifo_refused

echo "precious" > "$W/victim"; ln -s "$W/victim" "$W/link.svg"
run "$GPT2GEN" plot "$WORK/run" -o "$W/link.svg"
refused plot_symlink_refused "link.svg: is a symbolic link" "$W/rc" "$W/err" && [ -L "$W/link.svg" ] \
    && [ "$(cat "$W/victim")" = precious ] && ok plot_symlink_refused

# a device node of our own with /dev/null's numbers (as root, -o /dev/null itself would have been replaced)
if mknod "$W/null" c 1 3 2>/dev/null; then
    run "$GPT2GEN" plot "$WORK/run" -o "$W/null"
    refused plot_device_refused "null: is a device" "$W/rc" "$W/err" && [ -c "$W/null" ] \
        && [ "$(stat -c %t:%T "$W/null")" = 1:3 ] && ok plot_device_refused
else skip plot_device_refused "cannot make a device node here (not root)"; fi

# ---- export: a folder with a user's config.json is refused without --force; with it, the user's other files stay
mkdir "$W/user"; echo '{"mine": 1}' > "$W/user/config.json"; echo "readme" > "$W/user/README.md"
run "$GPT2GEN" export --checkpoint "$CK" --to "$W/user"
refused export_keeps_user_config "user/config.json exists: give --force" "$W/rc" "$W/err" \
    && [ "$(cat "$W/user/config.json")" = '{"mine": 1}' ] && [ ! -e "$W/user/model.safetensors" ] && ok export_keeps_user_config
run "$GPT2GEN" export --checkpoint "$CK" --to "$W/user" --force
if [ "$(cat "$W/rc")" -eq 0 ] && [ "$(cat "$W/user/README.md")" = readme ] && grep -q '"n_layer"' "$W/user/config.json" \
   && [ -z "$(ls -A "$W" | grep '^\.user\.')" ]; then ok export_force_keeps_other_files
else fail export_force_keeps_other_files "rc=$(cat "$W/rc"): $(cat "$W/err") $(ls -A "$W/user" "$W")"; fi

# an export --force that runs out of room (the file size limit: writes fail with EFBIG, as on a full disk) leaves the
# earlier export as it was, byte for byte, and nothing beside it
cp -a "$W/user" "$W/user_snapshot"
(trap '' XFSZ; ulimit -f 64; "$GPT2GEN" export --checkpoint "$CK" --to "$W/user" --force --dtype bf16 > "$W/out" 2> "$W/err"; echo $? > "$W/rc")
if refused export_full_disk_keeps_old "user/[a-z_.]*: write failed: File too large" "$W/rc" "$W/err"; then
    if diff -r "$W/user" "$W/user_snapshot" > /dev/null && [ -z "$(ls -A "$W" | grep '^\.user\.')" ]; then ok export_full_disk_keeps_old
    else fail export_full_disk_keeps_old "the folder changed or a stage is left: $(ls -A "$W" "$W/user")"; fi
fi

# ---- import -o: a device node or a symbolic link is refused even with --force
if [ -c "$W/null" ]; then
    run "$GPT2GEN" import "$W/user" -o "$W/null" --force
    refused import_device_refused "null: is a device" "$W/rc" "$W/err" && [ -c "$W/null" ] && ok import_device_refused
else skip import_device_refused "no device node (not root)"; fi
run "$GPT2GEN" import "$W/user" -o "$W/link.svg" --force
refused import_symlink_refused "link.svg: is a symbolic link" "$W/rc" "$W/err" && [ "$(cat "$W/victim")" = precious ] \
    && ok import_symlink_refused

# ---- a run folder: a metrics.jsonl gpt2gen did not write is never appended to; --fresh keeps a user's plot.svg
mkdir "$W/foreign"; printf 'my own log, no end of line' > "$W/foreign/metrics.jsonl"; cp "$W/foreign/metrics.jsonl" "$W/m.snap"
run "$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$W/foreign" --set train.steps=1
refused metrics_foreign_refused "metrics.jsonl: exists and is not a metrics log gpt2gen wrote" "$W/rc" "$W/err" \
    && cmp -s "$W/foreign/metrics.jsonl" "$W/m.snap" && ok metrics_foreign_refused
cp -a "$WORK/run" "$W/fresh"; echo "<svg>mine</svg>" > "$W/fresh/plot.svg"
run "$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$W/fresh" --set train.steps=1 --fresh
refused fresh_keeps_user_plot "plot.svg: not the plot gpt2gen writes, so --fresh does not remove it" "$W/rc" "$W/err" \
    && [ "$(cat "$W/fresh/plot.svg")" = "<svg>mine</svg>" ] && [ -f "$W/fresh/model_00000001.bin" ] && ok fresh_keeps_user_plot

# a plot.svg that cannot be written (here a folder in its place) is one warning, not one per validation
mkdir -p "$W/plotdir/plot.svg"
run "$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$W/plotdir" --set train.steps=3 --set eval.val_every=1 \
    --set train.total_batch_size=128
n=$(grep -c "plot.svg not written" "$W/err")
if [ "$(cat "$W/rc")" -eq 0 ] && [ "$n" -eq 1 ] && grep -q "plot.svg: is a folder" "$W/err" && [ -d "$W/plotdir/plot.svg" ]; then
    ok plot_warning_once
else fail plot_warning_once "rc=$(cat "$W/rc"), $n warnings: $(head -c 400 "$W/err")"; fi

# ---- lost writes on standard output are errors
s() { "$GPT2GEN" sample --checkpoint "$CK" --backend cpu "$@"; }
s --prompt "Hi" --tokens 4 > /dev/full 2> "$W/err"; echo $? > "$W/rc"
refused sample_dev_full "standard output" "$W/rc" "$W/err" && ok sample_dev_full
s --prompt "Hi" --tokens 2 --batch 2 > /dev/full 2> "$W/err"; echo $? > "$W/rc"
refused sample_batch_dev_full "standard output" "$W/rc" "$W/err" && ok sample_batch_dev_full
"$GPT2GEN" plot "$WORK/run" -o - > /dev/full 2> "$W/err"; echo $? > "$W/rc"
refused plot_stdout_dev_full "standard output" "$W/rc" "$W/err" && ok plot_stdout_dev_full
"$GPT2GEN" import "$W/user" -o "$W/imported.bin" > /dev/full 2> "$W/err"; echo $? > "$W/rc"
refused import_line_dev_full "standard output" "$W/rc" "$W/err" && ok import_line_dev_full

# ---- weights that are not numbers: the last weight (lnfb, element C-1) made a NaN, then an infinity
poke() {   # FILE BYTES(octal escapes): the last 4 bytes of FILE
    size=$(stat -c %s "$1")
    printf "$2" | dd of="$1" bs=1 seek=$((size - 4)) conv=notrunc 2>/dev/null
}
cp "$CK" "$W/nan.bin"; poke "$W/nan.bin" '\000\000\300\177'
cp "$CK" "$W/inf.bin"; poke "$W/inf.bin" '\000\000\200\177'
run "$GPT2GEN" sample --checkpoint "$W/nan.bin" --backend cpu --tokenizer data/fortunes/tokenizer.bin --tokens 2
refused nan_checkpoint_sample "nan.bin: tensor lnfb holds NaN at element" "$W/rc" "$W/err" && [ ! -s "$W/out" ] && ok nan_checkpoint_sample
run "$GPT2GEN" export --checkpoint "$W/inf.bin" --to "$W/inf_export"
refused inf_checkpoint_export "inf.bin: tensor lnfb holds an infinity" "$W/rc" "$W/err" && [ ! -e "$W/inf_export" ] \
    && ok inf_checkpoint_export
python3 - "$W/set.bin" <<'PY'
import struct, sys
ex = [65535, 0, 0, 1, 2, 3, 11, 12, 13, 1, 5, 1, 6]
ex[1] = 2 * len(ex)
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240522, 1, 1, ex[1], *([0] * 252)) + struct.pack("<%dH" % len(ex), *ex))
PY
run "$GPT2GEN" eval --checkpoint "$W/nan.bin" --data "$W/set.bin" --backend cpu
refused nan_checkpoint_eval "nan.bin: tensor lnfb holds NaN" "$W/rc" "$W/err" && ok nan_checkpoint_eval
# a Hugging Face folder with a NaN: the export (fp32) of the checkpoint, its last value (ln_f.bias) poked
cp -a "$W/user" "$W/hfnan"; poke "$W/hfnan/model.safetensors" '\000\000\300\177'
run "$GPT2GEN" import "$W/hfnan" -o "$W/hfnan.bin"
refused nan_import_refused "model.safetensors: tensor transformer.ln_f.bias holds NaN" "$W/rc" "$W/err" \
    && [ ! -e "$W/hfnan.bin" ] && ok nan_import_refused

# ---- bounded inputs and inputs that do not fit together
head -c 70000000 /dev/zero | s --prompt-file - > "$W/out" 2> "$W/err"; echo $? > "$W/rc"
refused prompt_stdin_bounded "standard input: the prompt is more than the 64 MiB" "$W/rc" "$W/err" && ok prompt_stdin_bounded
head -c 80000000 /dev/zero | "$GPT2GEN" prepare - -o "$W/zeros" > "$W/out" 2> "$W/err"; echo $? > "$W/rc"
refused prepare_document_bounded "standard input: a document of more than 64 MiB with no place to cut it" "$W/rc" "$W/err" \
    && [ ! -e "$W/zeros" ] && ok prepare_document_bounded
cp -a "$W/user" "$W/hfbig"
python3 -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); c["vocab_size"]=2**30; json.dump(c, open(p,"w"))' "$W/hfbig/config.json"
run "$GPT2GEN" import "$W/hfbig" -o "$W/hfbig.bin"
refused import_config_bounded "model.safetensors: tensor transformer.wte.weight has shape \[50257, [0-9]*\], expected \[1073741824," \
    "$W/rc" "$W/err" && ok import_config_bounded
python3 - "$W/small_tok.bin" <<'PY'
import struct, sys
toks = [bytes([i]) for i in range(256)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240328, 2, len(toks), 255, *([0] * 252)) + b"".join(bytes([len(t)]) + t for t in toks))
PY
run "$GPT2GEN" sample --checkpoint "$CK" --backend cpu --tokenizer "$W/small_tok.bin" --tokens 2
refused tokenizer_fewer_tokens_refused "small_tok.bin: 256 tokens, fewer than the model's vocab_size" "$W/rc" "$W/err" \
    && ok tokenizer_fewer_tokens_refused
LONG=$(printf '%04000d' 0)
run "$GPT2GEN" sample --checkpoint "$CK" --top-p "$LONG"
n=$(wc -c < "$W/err")
if [ "$(cat "$W/rc")" -eq 2 ] && [ "$n" -lt 400 ] && grep -q "above 0 and at most 1" "$W/err"; then ok long_argument_cut "$n bytes"
else fail long_argument_cut "rc=$(cat "$W/rc"), $n bytes: $(head -c 300 "$W/err")"; fi
run "$GPT2GEN" plot "$WORK/run" -o "$W/$LONG.svg"
n=$(wc -c < "$W/err")
if [ "$(cat "$W/rc")" -eq 1 ] && [ "$n" -lt 600 ]; then ok long_path_cut "$n bytes: $(head -c 120 "$W/err")"
else fail long_path_cut "rc=$(cat "$W/rc"), $n bytes: $(head -c 300 "$W/err")"; fi
run "$GPT2GEN" export --checkpoint "$CK" --to "$W/$LONG"
n=$(wc -c < "$W/err")
if [ "$(cat "$W/rc")" -eq 1 ] && [ "$n" -lt 600 ]; then ok long_export_path_cut "$n bytes"
else fail long_export_path_cut "rc=$(cat "$W/rc"), $n bytes: $(head -c 300 "$W/err")"; fi
# ---- one export into a folder at a time: while another process holds the folder's lock (.NAME.export.lock beside
# it, as a running export does), an export there is refused with the folder and that process named, and the folder
# is left as it was; once the lock is let go, the same export runs
mkdir -p "$W/locked"
echo keep > "$W/locked/notes.txt"
echo $$ > "$W/.locked.export.lock"
flock -o "$W/.locked.export.lock" sleep 3 &   # -o: the lock is flock's alone, let go when it ends
holder=$!
sleep 1
run "$GPT2GEN" export --checkpoint "$CK" --to "$W/locked"
refused export_locked "locked: another export is writing this folder (pid $$ holds" "$W/rc" "$W/err" \
    && [ ! -e "$W/locked/model.safetensors" ] && [ "$(cat "$W/locked/notes.txt")" = keep ] && ok export_locked
wait "$holder"
run "$GPT2GEN" export --checkpoint "$CK" --to "$W/locked"
if [ "$(cat "$W/rc")" -eq 0 ] && [ -s "$W/locked/model.safetensors" ] && [ ! -e "$W/.locked.export.lock" ]; then
    ok export_after_lock
else fail export_after_lock "rc=$(cat "$W/rc"): $(head -c 300 "$W/err")"; fi
# two exports at once with --force: each either finishes or is refused by the lock, and the folder is one whole export
"$GPT2GEN" export --checkpoint "$CK" --to "$W/locked" --force > /dev/null 2> "$W/err1" & p1=$!
"$GPT2GEN" export --checkpoint "$CK" --to "$W/locked" --force > /dev/null 2> "$W/err2" & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
bad=""
for i in 1 2; do
    eval "r=\$r$i"
    [ "$r" -eq 0 ] || grep -q "another export is writing this folder" "$W/err$i" || bad="$bad export $i: rc=$r $(head -c 200 "$W/err$i")"
done
if [ -z "$bad" ] && [ -s "$W/locked/config.json" ] && [ -s "$W/locked/model.safetensors" ] \
    && [ -z "$(ls -A "$W" | grep '^\.locked\.')" ]; then ok export_concurrent "rc $r1 and $r2"
else fail export_concurrent "$bad; $(ls -A "$W" | grep '^\.locked' | head -3)"; fi
finish
