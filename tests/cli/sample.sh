#!/bin/sh
# gpt2gen sample on the CPU backend (SAMPLE_BACKEND=cuda: the GPU, as tests/gpu.sh runs it), from a checkpoint of
# the micro model (maxT 32) trained one step: training's greedy sample is gpt2gen sample's, standard output holds only
# the text, a seed repeats, --echo, --batch, standard input as the prompt, the cache and the full
# re-run agree in greedy, top-k 1 is greedy, an llm.c bf16 checkpoint samples; a bad checkpoint, a missing
# tokenizer, a prompt too long, --tokens 0 each give one clear message and a non-zero exit.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
if [ "${SAMPLE_BACKEND:-cpu}" = cuda ] && ! nvidia-smi >/dev/null 2>&1; then skip gpu_sample "SAMPLE_BACKEND=cuda, and no GPU here"; finish; fi
"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/run" --set train.steps=1 --set eval.sample_every=1 \
    --set eval.sample_tokens=12 --set eval.temperature=0 > "$WORK/train.log" 2>&1 \
    || { fail setup_checkpoint "$(tail -5 "$WORK/train.log")"; finish; }
CK=$WORK/run/model_00000001.bin
B=${SAMPLE_BACKEND:-cpu}
s() { "$GPT2GEN" sample --checkpoint "$CK" --backend "$B" "$@"; }

out=$(s --prompt "Hello there" --tokens 8 --seed 3 2> "$WORK/err"); rc=$?
# the CPU backend prints one line on stderr, the speed; the GPU also says which attention the prefill runs
lines=$(wc -l < "$WORK/err")
if [ $rc -eq 0 ] && [ -n "$out" ] && ! printf '%s' "$out" | grep -q "gpt2gen\|attention" \
    && { [ "$lines" -eq 1 ] || [ "$B" != cpu ]; } && tail -1 "$WORK/err" | grep -q "prompt of 2 tokens.*$B backend"; then
    ok text_on_stdout_messages_on_stderr
else fail text_on_stdout_messages_on_stderr "rc=$rc out='$out' err: $(cat "$WORK/err")"; fi

again=$(s --prompt "Hello there" --tokens 8 --seed 3 2>/dev/null)
other=$(s --prompt "Hello there" --tokens 8 --seed 4 2>/dev/null)
if [ "$out" = "$again" ] && [ "$out" != "$other" ]; then ok seed_repeats; else fail seed_repeats "'$out' / '$again' / '$other'"; fi

e=$(s --prompt "Hello there" --tokens 4 --echo 2>/dev/null)
case $e in "Hello there"?*) ok echo_prints_the_prompt ;; *) fail echo_prints_the_prompt "'$e'" ;; esac

b=$(s --prompt "Hi" --tokens 4 --batch 3 --seed 5 2>"$WORK/err"); rc=$?
seps=$(printf '%s\n' "$b" | grep -c '^---$')
if [ $rc -eq 0 ] && [ "$seps" -eq 2 ] && grep -q "3 rows" "$WORK/err"; then ok batch_three_samples
else fail batch_three_samples "rc=$rc separators=$seps: $b"; fi

i=$(printf 'Hello there' | s --prompt-file - --tokens 8 --seed 3 2>/dev/null)
if [ "$i" = "$out" ]; then ok prompt_from_stdin; else fail prompt_from_stdin "'$i' vs '$out'"; fi

g1=$(s --prompt "Once" --tokens 12 --temperature 0 2>/dev/null)
g2=$(s --prompt "Once" --tokens 12 --temperature 0 --no-cache 2>/dev/null)
g3=$(s --prompt "Once" --tokens 12 --top-k 1 --seed 9 2>/dev/null)
if [ -n "$g1" ] && [ "$g1" = "$g2" ] && [ "$g1" = "$g3" ]; then ok greedy_cache_equals_rerun_and_top_k_1
else fail greedy_cache_equals_rerun_and_top_k_1 "'$g1' / '$g2' / '$g3'"; fi
# the whole decode step as one persistent kernel (sm_90; elsewhere, and on the CPU, the op list's kernels) draws the
# same greedy text, and with a seed the same sample
g4=$(s --prompt "Once" --tokens 12 --temperature 0 --decode persistent 2>/dev/null)
r4=$(s --prompt "Hello there" --tokens 8 --seed 3 --decode persistent 2>/dev/null)
if [ -n "$g4" ] && [ "$g4" = "$g1" ] && [ "$r4" = "$out" ]; then ok decode_persistent_same_text
else fail decode_persistent_same_text "'$g4' vs '$g1'; '$r4' vs '$out'"; fi
# three rows on the decode linears (GPU; on the CPU the same op list) draw greedily what one row does, in each row
g5=$(s --prompt "Once" --tokens 12 --temperature 0 --batch 3 --decode linears 2>/dev/null)
if [ -n "$g1" ] && [ "$g5" = "$(printf '%s\n---\n%s\n---\n%s' "$g1" "$g1" "$g1")" ]; then ok decode_linears_rows_as_one
else fail decode_linears_rows_as_one "'$g5' vs three of '$g1'"; fi
s --prompt "Once" --tokens 2 --decode fast > /dev/null 2> "$WORK/err"; rc=$?
if [ $rc -eq 2 ] && grep -q -- "--decode: expected kernels, persistent or linears, got 'fast'" "$WORK/err"; then ok decode_option_checked
else fail decode_option_checked "rc=$rc: $(cat "$WORK/err")"; fi

st=$(s --prompt "Once" --tokens 5 --temperature 0 --stats --ignore-eot 2>&1 >/dev/null | grep '^sample-stats ')
if printf '%s' "$st" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read().split(" ",1)[1]); sys.exit(0 if d["tokens"]==5 and d["prompt_tokens"]==1 and d["cache"] else 1)'
then ok stats_json; else fail stats_json "'$st'"; fi

# training's sample (greedy, from end-of-text, on the final weights) is what gpt2gen sample draws from the checkpoint
python3 - "$WORK/run/metrics.jsonl" > "$WORK/trained.txt" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if '"sample"' in l]
sys.stdout.write(s[-1]["text"] + "\n")
PY
s --temperature 0 --tokens 12 > "$WORK/sampled.txt" 2>/dev/null
if [ -s "$WORK/trained.txt" ] && cmp -s "$WORK/trained.txt" "$WORK/sampled.txt"; then ok training_sample_is_sample
else fail training_sample_is_sample "training: $(od -c "$WORK/trained.txt" | head -3), sample: $(od -c "$WORK/sampled.txt" | head -3)"; fi

# llm.c's bf16 checkpoint (version 5): the same weights rounded; it samples, and reads as bf16
python3 - "$CK" "$WORK/bf16.bin" <<'PY'
import struct, sys
raw = open(sys.argv[1], "rb").read()
h = list(struct.unpack("<256i", raw[:1024])); h[1] = 5
body = struct.unpack("<%df" % ((len(raw) - 1024) // 4), raw[1024:])
out = bytearray(struct.pack("<256i", *h))
for x in body:
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    out += struct.pack("<H", ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
open(sys.argv[2], "wb").write(out)
PY
o16=$("$GPT2GEN" sample --checkpoint "$WORK/bf16.bin" --tokenizer data/fortunes/tokenizer.bin --backend "$B" --prompt Hi --tokens 4 2>"$WORK/err"); rc=$?
if [ $rc -eq 0 ] && [ -n "$o16" ]; then ok bf16_checkpoint; else fail bf16_checkpoint "rc=$rc $(cat "$WORK/err")"; fi

# one clear message each, and a non-zero exit
expect() {   # NAME RC PATTERN -- command...
    name=$1 want=$2 pat=$3; shift 4
    "$@" > "$WORK/o" 2> "$WORK/e"; rc=$?
    if [ $rc -eq "$want" ] && [ "$(wc -l < "$WORK/e")" -eq 1 ] && grep -q -- "$pat" "$WORK/e" && [ ! -s "$WORK/o" ]; then ok "$name"
    else fail "$name" "rc=$rc (expected $want), stderr: $(cat "$WORK/e"), stdout: $(head -c 200 "$WORK/o")"; fi
}
head -c 5000 /dev/urandom > "$WORK/junk.bin"
expect bad_checkpoint 1 "junk.bin" -- s --checkpoint "$WORK/junk.bin"
expect missing_checkpoint 1 "nothere.bin" -- s --checkpoint "$WORK/nothere.bin"
expect missing_tokenizer 1 "no tokenizer at $WORK/none.bin" -- s --tokenizer "$WORK/none.bin" --prompt Hi
python3 -c 'print("word " * 40)' > "$WORK/long.txt"
expect prompt_too_long 1 "leaves no room" -- s --prompt-file "$WORK/long.txt"
expect tokens_too_many 1 "at most 30 new tokens fit" -- s --prompt "Hello there" --tokens 31
expect tokens_zero 2 "tokens: expected an integer from 1" -- s --tokens 0
expect no_checkpoint 2 "missing --checkpoint" -- "$GPT2GEN" sample --prompt Hi
expect bad_top_p 2 "top-p" -- s --top-p 0
finish
