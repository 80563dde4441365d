#!/bin/sh
# bench/roofline.py on a profile log written here (no GPU: the ceilings are given): each op's floor is its work at
# the given ceilings, computed from the model's shape (qkv's 12 x 2*65536*768*2304 FLOPs at 790 TFLOP/s: 3.52 ms;
# the classifier kernel's read and write of B*T*Vp bf16 logits at 4.3 TB/s: 3.07 ms, whatever the chunks; the
# layers' bias gradients, a pass over each output gradient, at their bytes), the sum of floors adds up, and --compare
# lines up two logs op by op, an op of one only shown as missing in the other (the bias gradients, profiled apart
# from their matmuls in the newer log).
. "$(dirname "$0")/../lib.sh"
scratch
cd "$ROOT" || exit 1
if ! command -v python3 >/dev/null; then skip roofline "no python3"; finish; fi
profile() {   # profile FILE: a GPT2GEN_PROFILE section, ops as the CUDA backend names them; $2: the classifier's ms
    cat > "$1" <<LOG
step     6/6 | loss 10.9 | lr 6.00e-04
GPT2GEN_PROFILE: mean per training step over 5 steps (ops synchronized one by one)
  encoder forward                  0.07 ms    0.1%
  layernorm forward                2.75 ms    2.4%
  matmul qkv                       5.00 ms    4.3%
  attention forward                4.70 ms    4.1%
  matmul attproj                   1.70 ms    1.5%
  matmul fc+gelu                   9.00 ms    7.8%
  matmul fcproj                    5.00 ms    4.3%
  matmul classifier                7.90 ms    6.8%
  classifier (loss+dlogits)        $2 ms    4.7%
  matmul bwd classifier           13.60 ms   11.8%
  layernorm backward               4.95 ms    4.3%
  gelu recompute                   3.00 ms    2.6%
  matmul bwd fcproj+dgelu         16.00 ms   13.9%
  matmul bwd fc                   12.10 ms   10.5%
  matmul bwd attproj               3.80 ms    3.3%
  attention backward              15.70 ms   13.6%
  matmul bwd qkv                  10.30 ms    8.9%
  encoder backward                 0.10 ms    0.1%
  grad norm                        0.07 ms    0.1%
  adamw                            1.20 ms    1.0%
  total                          115.00 ms
LOG
}
profile "$WORK/after.log" 5.45
sed -i 's/^  matmul bwd fc                   12.10 ms   10.5%/  matmul bwd fc                   10.30 ms    9.0%\
  bias backward                    2.60 ms    2.3%/' "$WORK/after.log"
profile "$WORK/before.log" 9.38
out="$WORK/roofline.md"
python3 bench/roofline.py --ceilings 790,4.3 --model 124M --classifier-chunks 8 --json "$WORK/rows.json" \
    --compare "$WORK/before.log" "$WORK/after.log" > "$out" 2> "$WORK/err"; rc=$?
if [ $rc -ne 0 ]; then fail roofline_runs "rc=$rc: $(tail -3 "$WORK/err")"; finish; fi
ok roofline_runs
python3 - "$WORK/rows.json" "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["op"]: r for r in d["rows"]}
def near(a, b, tol=0.01): return abs(a - b) <= tol
qkv, cls = rows["matmul qkv"], rows["classifier (loss+dlogits)"]
want_qkv = 12 * 2 * 65536 * 768 * 2304 / 790e12 * 1e3
want_cls = 2 * 65536 * 50304 * 2 / 4.3e12 * 1e3
assert near(qkv["floor_ms"], want_qkv), ("qkv floor", qkv["floor_ms"], want_qkv)
assert near(cls["floor_ms"], want_cls, 0.05), ("classifier floor", cls["floor_ms"], want_cls)
assert cls["calls"] == 8, ("classifier calls", cls["calls"])
bias = rows["bias backward"]   # fcproj, attproj (C), qkv (3C), fc (4C): each reads its dout (B*T rows), partials
want_bias = 12 * sum(2 * 65536 * n + 2 * 64 * n * 4 + 2 * 2 * n for n in (768, 2304, 768, 3072)) / 4.3e12 * 1e3
assert bias["calls"] == 48 and near(bias["floor_ms"], want_bias), ("bias backward", bias["calls"], bias["floor_ms"], want_bias)
floors = sum(r["floor_ms"] for r in d["rows"] if r["floor_ms"] is not None)
assert near(floors, d["floor_sum_ms"]), (floors, d["floor_sum_ms"])
assert near(d["total_ms"], 115.0), d["total_ms"]
md = open(sys.argv[2]).read()
assert "| classifier (loss+dlogits) |" in md and "-3.93" in md, "the before/after table lacks the classifier's change"
assert "| bias backward |" in md.split("Before")[-1], "the before/after table lacks the op only the after log has"
print("qkv floor %.2f ms, classifier floor %.2f ms, floors %.2f ms" % (qkv["floor_ms"], cls["floor_ms"], floors))
PY
if [ $? -eq 0 ]; then ok roofline_floors "$(python3 -c "import json; d = json.load(open('$WORK/rows.json')); print('sum of floors %.2f ms of %.2f' % (d['floor_sum_ms'], d['total_ms']))")"
else fail roofline_floors "see $out"; fi
# a sustained ceiling (the power cap's; measured ceilings have it, a file may give it): its sum of floors is the one
# a run at that ceiling computes
printf '{"matmul_tflops": 790, "bandwidth_tbps": 4.3, "matmul_tflops_sustained": 395, "source": "test"}\n' > "$WORK/ceil.json"
python3 bench/roofline.py --ceilings "$WORK/ceil.json" --model 124M --classifier-chunks 8 "$WORK/after.log" > "$WORK/sus.md" 2>&1 &&
    python3 bench/roofline.py --ceilings 395,4.3 --model 124M --classifier-chunks 8 --json "$WORK/rows395.json" \
        "$WORK/after.log" > /dev/null 2>&1
got=$(sed -n 's/.*At the sustained matmul ceiling (395 TFLOP\/s.* the sum of floors is \([0-9.]*\) ms.*/\1/p' "$WORK/sus.md")
want=$(python3 -c "import json; print('%.2f' % json.load(open('$WORK/rows395.json'))['floor_sum_ms'])" 2>/dev/null)
if [ -n "$got" ] && [ "$got" = "$want" ]; then ok roofline_sustained "sum of floors at 395 TFLOP/s: $got ms"
else fail roofline_sustained "the sustained line says '$got', floors at 395 TFLOP/s sum to '$want' ($WORK/sus.md)"; fi
finish
