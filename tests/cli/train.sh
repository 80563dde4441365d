#!/bin/sh
# The training loop on the CPU backend, end to end on the default data set (data/fortunes, `make data`):
# the loss falls, resume gives the same bits, the metrics log parses, bad inputs fail clearly,
# Ctrl-C saves a checkpoint.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
run() { "$GPT2GEN" train $M --backend cpu -q "$@"; }
# metric FILE KEY [TEXT]: the values of KEY in the lines of metrics.jsonl FILE that hold TEXT (default: KEY)
metric() { grep -F -- "${3:-\"$2\"}" "$1" | sed -n "s/.*\"$2\":\([-+0-9.e]*\).*/\1/p"; }

# the loss falls: 30 steps on real text
out=$(run --set checkpoint.dir="$WORK/fall" --set train.steps=30 --set eval.val_every=30 --set eval.val_batches=4 2>&1); rc=$?
first=$(metric "$WORK/fall/metrics.jsonl" loss | head -1); last=$(metric "$WORK/fall/metrics.jsonl" loss | tail -1)
v0=$(metric "$WORK/fall/metrics.jsonl" val_loss | head -1); v1=$(metric "$WORK/fall/metrics.jsonl" val_loss | tail -1)
if [ $rc -eq 0 ] && awk "BEGIN{exit !($last < $first - 1.0 && $v1 < $v0 - 1.0)}"; then ok "loss_falls (train $first -> $last, val $v0 -> $v1)"
else fail loss_falls "rc=$rc train $first -> $last, val $v0 -> $v1: $out"; fi

# the metrics log: one JSON object per line, and the run's events in it: the start, a step record (with its
# numbers) for each of the 30 steps in order, validation at steps 0 and 30, the final checkpoint
out=$(python3 - "$WORK/fall/metrics.jsonl" <<'PY' 2>&1
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = lambda k: [e for e in ev if e.get("event") == k]
steps = kinds("step")
nums = all(isinstance(e.get(k), (int, float)) for e in steps for k in ("loss", "lr", "norm", "ms", "tok_s"))
print(f"{len(ev)} records: start {[e.get('steps') for e in kinds('start')]}, steps {[e['step'] for e in steps][:3]}..., "
      f"val at {[e['step'] for e in kinds('val')]}, checkpoints at {[e['step'] for e in kinds('checkpoint')]}")
sys.exit(0 if ev[0].get("event") == "start" and ev[0].get("steps") == 30 and nums
         and [e["step"] for e in steps] == list(range(1, 31)) and [e["step"] for e in kinds("val")] == [0, 30]
         and [e["step"] for e in kinds("checkpoint")] == [30] else 1)
PY
); rc=$?
if [ $rc -eq 0 ]; then ok metrics_jsonl; else fail metrics_jsonl "$WORK/fall/metrics.jsonl: $out"; fi

# exact resume: 8 steps in one go == 4 steps, stop, resume for 4 (same bits in model and state)
run --set checkpoint.dir="$WORK/straight" >/dev/null 2>&1
run --set checkpoint.dir="$WORK/resumed" --set checkpoint.every=4 >/dev/null 2>&1
rm -f "$WORK"/resumed/model_00000008.bin "$WORK"/resumed/state_00000008.bin
out=$(run --set checkpoint.dir="$WORK/resumed" --resume 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "resuming from .*state_00000004.bin (step 4)" \
   && cmp -s "$WORK/straight/model_00000008.bin" "$WORK/resumed/model_00000008.bin" \
   && cmp -s "$WORK/straight/state_00000008.bin" "$WORK/resumed/state_00000008.bin"; then ok exact_resume_bitwise
else fail exact_resume_bitwise "rc=$rc; model or state after resume differs: $out"; fi
l1=$(metric "$WORK/straight/metrics.jsonl" loss '"event":"step","step":8,')
l2=$(metric "$WORK/resumed/metrics.jsonl" loss '"event":"step","step":8,' | tail -1)
if [ -n "$l1" ] && [ "$l1" = "$l2" ]; then ok resume_same_loss; else fail resume_same_loss "step 8 loss $l1 vs $l2"; fi

# the model file is laid out as llm.c reads it (checked by an independent reader): 256 int32 header
# [20240326, 3 (fp32), maxT, V, L, NH, C, Vp], then the parameters in order, nothing more
out=$(python3 - "$WORK/straight/model_00000008.bin" <<'PY'
import struct, sys, os
p = sys.argv[1]
h = struct.unpack("<256i", open(p, "rb").read(1024))
maxT, V, L, NH, C, Vp = h[2:8]
n = Vp*C + maxT*C + 2*L*C + L*3*C*C + L*3*C + L*C*C + L*C + 2*L*C + L*4*C*C + L*4*C + L*C*4*C + L*C + 2*C
ok = h[0] == 20240326 and h[1] == 3 and (maxT, V, L, NH, C, Vp) == (32, 50257, 2, 2, 64, 50304) and os.path.getsize(p) == 1024 + 4*n
print(h[:8], os.path.getsize(p), 1024 + 4*n); sys.exit(0 if ok else 1)
PY
); rc=$?
if [ $rc -eq 0 ]; then ok llm_c_checkpoint_layout; else fail llm_c_checkpoint_layout "$out"; fi

# a checkpoint as init: the run starts from the checkpoint's weights. Its validation loss at step 0 is the one
# the straight run measured with those weights at step 8 (the same weights on the same validation batches, so
# the same digits), and not the one of a fresh init (the straight run's at step 0).
out=$(run --set checkpoint.dir="$WORK/init" --set checkpoint.init="$WORK/straight/model_00000008.bin" --set train.steps=1 2>&1); rc=$?
want=$(metric "$WORK/straight/metrics.jsonl" val_loss '"event":"val","step":8,')
fresh=$(metric "$WORK/straight/metrics.jsonl" val_loss '"event":"val","step":0,')
got=$(metric "$WORK/init/metrics.jsonl" val_loss '"event":"val","step":0,')
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "loaded weights from .*model_00000008.bin" && [ -n "$got" ] && [ "$got" = "$want" ] \
   && [ "$got" != "$fresh" ]; then ok init_from_checkpoint "val loss at the start $got = the checkpoint's $want; a fresh init's $fresh"
else fail init_from_checkpoint "rc=$rc; val loss at the start '$got', the checkpoint's '$want', a fresh init's '$fresh': $out"; fi

# overfit one batch: the loss collapses
out=$(run --set checkpoint.dir="$WORK/overfit" --set train.overfit_batch=true --set train.steps=25 --set train.warmup=0 --set eval.val_every=0 2>&1); rc=$?
a=$(metric "$WORK/overfit/metrics.jsonl" loss | head -1); b=$(metric "$WORK/overfit/metrics.jsonl" loss | tail -1)
if [ $rc -eq 0 ] && awk "BEGIN{exit !($b < $a - 4)}"; then ok "overfit_batch ($a -> $b)"; else fail overfit_batch "rc=$rc $a -> $b"; fi

# validation and sampling leave the training batch alone: in overfit mode the step losses are the same with
# them on (validation at steps 0, 5, ..., 25, samples at 7, 14, 21 and 25) as with them off
run --set checkpoint.dir="$WORK/overfit-eval" --set train.overfit_batch=true --set train.steps=25 --set train.warmup=0 \
    --set eval.val_every=5 --set eval.val_batches=1 --set eval.sample_every=7 --set eval.sample_tokens=4 > "$WORK/overfit-eval.log" 2>&1
without=$(metric "$WORK/overfit/metrics.jsonl" loss | tr '\n' ' '); with=$(metric "$WORK/overfit-eval/metrics.jsonl" loss | tr '\n' ' ')
vals=$(metric "$WORK/overfit-eval/metrics.jsonl" step '"event":"val"' | tr '\n' ' ')
samples=$(sed -n 's/^--- sample at step \([0-9]*\):.*/\1/p' "$WORK/overfit-eval.log" | tr '\n' ' ')
if [ "$vals" != "0 5 10 15 20 25 " ] || [ "$samples" != "7 14 21 25 " ]; then
    fail eval_keeps_the_training_batch "the run with eval validated at steps '$vals' and sampled at '$samples': $(tail -3 "$WORK/overfit-eval.log")"
elif [ -n "$without" ] && [ "$without" = "$with" ]; then ok eval_keeps_the_training_batch
else fail eval_keeps_the_training_batch "losses without eval: $without; with: $with"; fi

# bad inputs: one clear message naming the file, exit code 1
expect_fail() {   # name, expected text, options...
    name=$1; want=$2; shift 2
    out=$(run --set checkpoint.dir="$WORK/$name" "$@" 2>&1); rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -qF -- "$want"; then ok "$name"; else fail "$name" "rc=$rc: $out"; fi
}
expect_fail missing_data "nothing_*.bin: no token shards match" --set data.train="$WORK/nothing_*.bin"
printf 'not a checkpoint' > "$WORK/junk.bin"
expect_fail bad_init_checkpoint "junk.bin" --set checkpoint.init="$WORK/junk.bin"
expect_fail missing_init_checkpoint "nope.bin" --set checkpoint.init="$WORK/nope.bin"
expect_fail init_of_other_shape "model_00000008.bin" --set checkpoint.init="$WORK/straight/model_00000008.bin" --set model.n_layer=3
mkdir -p "$WORK/trunc" && cp "$WORK/resumed/model_00000004.bin" "$WORK/trunc/" && head -c 5000 "$WORK/resumed/state_00000004.bin" > "$WORK/trunc/state_00000004.bin"
expect_fail truncated_state "state_00000004.bin: truncated" --set checkpoint.dir="$WORK/trunc" --resume
out=$("$GPT2GEN" train $M --backend gpu 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -qF -- "--backend: expected auto, cpu or cuda, got 'gpu'"; then ok bad_backend_name
else fail bad_backend_name "exit code $rc (expected 2): $out"; fi
# attention = "cudnn" asked for by name does not fall back to the CPU backend where there is no GPU (or no cuDNN)
if ! nvidia-smi >/dev/null 2>&1; then
    out=$("$GPT2GEN" train $M --set attention=cudnn --set train.steps=1 --set checkpoint.dir="$WORK/cudnn" 2>&1); rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -qF 'attention = "cudnn" needs the CUDA backend' && ! printf '%s' "$out" | grep -q "^step "; then
        ok cudnn_by_name_no_cpu_fallback
    else fail cudnn_by_name_no_cpu_fallback "rc=$rc: $out"; fi
fi

# Ctrl-C: stops after the current step, saves a checkpoint, exits 130
"$GPT2GEN" train $M --backend cpu --set checkpoint.dir="$WORK/int" --set train.steps=100000 --set eval.val_every=0 > "$WORK/int.log" 2>&1 &
pid=$!
for i in $(seq 1 100); do grep -q "^step " "$WORK/int.log" && break; sleep 0.1; done
kill -INT $pid; wait $pid; rc=$?
if [ $rc -eq 130 ] && ls "$WORK"/int/model_*.bin >/dev/null 2>&1 && ls "$WORK"/int/state_*.bin >/dev/null 2>&1; then ok sigint_saves_checkpoint
else fail sigint_saves_checkpoint "rc=$rc: $(tail -3 "$WORK/int.log")"; fi

finish
