#!/bin/sh
# gpt2gen eval on the CPU backend (EVAL_BACKEND=cuda: the GPU, as tests/gpu.sh runs it), on evaluation sets in
# llm.c's format that the test writes itself, and eval.hellaswag in training: the accuracy training logs at its last
# step is what gpt2gen eval gives for the checkpoint of that step; the text and --json outputs agree; the choices do
# not depend on the rows per forward; on the GPU they are the CPU backend's; malformed files and bad options give one
# message naming the file and a non-zero exit.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
if [ "${EVAL_BACKEND:-cpu}" = cuda ] && ! nvidia-smi >/dev/null 2>&1; then skip gpu_eval "EVAL_BACKEND=cuda, and no GPU here"; finish; fi
B=${EVAL_BACKEND:-cpu}

# an evaluation set: n examples of 2 to 4 completions, random tokens (python3 writes it as llm.c's hellaswag.py does)
make_set() { python3 "$ROOT/tests/evalset.py" "$1" "$2" "$3" "${4:-12}" 6 2,4,4; }   # FILE N SEED [CTX_MAX]
make_set "$WORK/set.bin" 40 1

"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/run" --set train.steps=4 \
    --set eval.hellaswag="$WORK/set.bin" --set eval.hellaswag_every=2 --set checkpoint.every=2 > "$WORK/train.log" 2>&1 \
    || { fail setup_training "$(tail -5 "$WORK/train.log")"; finish; }
CK=$WORK/run/model_00000004.bin
e() { "$GPT2GEN" eval --checkpoint "$CK" --data "$WORK/set.bin" --backend "$B" "$@"; }

# training logged an eval event at steps 2 and 4 (hellaswag_every) and 0; the last equals gpt2gen eval of step 4
e --json > "$WORK/eval.json" 2> "$WORK/eval.err"; rc=$?
if [ $rc -eq 0 ] && python3 - "$WORK/run/metrics.jsonl" "$WORK/eval.json" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"event":"eval"' in l]
got = json.load(open(sys.argv[2]))
assert [e["step"] for e in ev] == [0, 2, 4], [e["step"] for e in ev]
last = ev[-1]
assert last["examples"] == got["examples"] == 40 and last["correct"] == got["correct"], (last, got)
assert abs(got["accuracy"] - got["correct"] / got["examples"]) < 1e-12
assert len(got["choices"]) == 40 and all(0 <= c < 4 for c in got["choices"])
PY
then ok training_eval_equals_gpt2gen_eval "$(grep -c '"event":"eval"' "$WORK/run/metrics.jsonl") eval events"
else fail training_eval_equals_gpt2gen_eval "rc=$rc $(cat "$WORK/eval.err" "$WORK/eval.json")"; fi

txt=$(e 2>/dev/null)
want=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("accuracy %.4f: %d of %d examples correct" % (d["accuracy"], d["correct"], d["examples"]))' "$WORK/eval.json")
if [ "$txt" = "$want" ]; then ok text_output_is_the_json; else fail text_output_is_the_json "'$txt' vs '$want'"; fi

# the labels are the choices of the checkpoint: a set relabelled with them scores 100%
python3 - "$WORK/set.bin" "$WORK/eval.json" "$WORK/relabel.bin" <<'PY'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
choices = json.load(open(sys.argv[2]))["choices"]
at = 1024
for c in choices:
    nbytes = struct.unpack_from("<H", data, at + 2)[0]
    struct.pack_into("<H", data, at + 6, c)
    at += nbytes
open(sys.argv[3], "wb").write(data)
PY
r1=$("$GPT2GEN" eval --checkpoint "$CK" --data "$WORK/relabel.bin" --backend "$B" --rows 1 2>/dev/null)
case $r1 in "accuracy 1.0000: 40 of 40 examples correct") ok rows_1_same_choices_as_32 ;;
    *) fail rows_1_same_choices_as_32 "'$r1'" ;; esac

# on the GPU: the same choices as the CPU backend (the random model's margins are far above bf16's errors here)
if [ "$B" != cpu ]; then
    c=$("$GPT2GEN" eval --checkpoint "$CK" --data "$WORK/relabel.bin" --backend cpu 2>/dev/null)
    if [ "$c" = "$r1" ]; then ok gpu_choices_equal_cpu; else fail gpu_choices_equal_cpu "cpu: '$c', $B: '$r1'"; fi
fi

# bad input: one message naming the file, exit 1 (usage: 2)
bad() {   # NAME WANT_RC PATTERN ARGS...
    n=$1; want=$2; pat=$3; shift 3
    "$GPT2GEN" eval --backend "$B" "$@" > "$WORK/out" 2> "$WORK/err"; rc=$?
    if [ $rc -eq "$want" ] && [ "$(wc -l < "$WORK/err")" -eq 1 ] && grep -q -- "$pat" "$WORK/err" && [ ! -s "$WORK/out" ]; then ok "$n"
    else fail "$n" "rc=$rc: $(cat "$WORK/err")"; fi
}
bad missing_data 2 "missing --data" --checkpoint "$CK"
bad missing_checkpoint 2 "missing --checkpoint" --data "$WORK/set.bin"
bad no_such_set 1 "nope.bin" --checkpoint "$CK" --data "$WORK/nope.bin"
bad shard_as_set 1 "this is a token shard" --checkpoint "$CK" --data data/fortunes/val_000000.bin
head -c 1500 "$WORK/set.bin" > "$WORK/cut.bin"
bad truncated_set 1 "cut.bin: truncated" --checkpoint "$CK" --data "$WORK/cut.bin"
make_set "$WORK/long.bin" 3 2 30
bad example_longer_than_the_model 1 "long.bin: example .* more than the model's context of 32" --checkpoint "$CK" --data "$WORK/long.bin"
bad set_as_checkpoint 1 "set.bin" --checkpoint "$WORK/set.bin" --data "$WORK/set.bin"
bad bad_rows 2 "rows" --checkpoint "$CK" --data "$WORK/set.bin" --rows 0

# training with a malformed set stops before the first step, naming it
"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/run2" --set train.steps=2 \
    --set eval.hellaswag="$WORK/long.bin" > "$WORK/t2.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && grep -q "long.bin: example" "$WORK/t2.log" && ! grep -q "step *1/" "$WORK/t2.log"; then
    ok training_refuses_a_bad_set
else fail training_refuses_a_bad_set "rc=$rc $(tail -3 "$WORK/t2.log")"; fi
finish
