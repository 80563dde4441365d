#!/bin/sh
# bench/eval.sh: multiple-choice evaluation, ours against a PyTorch peer in the same run. GPT-2 124M (random weights,
# an llm.c fp32 checkpoint written by bench/sample_peers.py), a HellaSwag-shaped set of EXAMPLES examples of 4
# completions (bench/eval_peer.py write-set), 32 rows per forward on both sides:
#   ours: gpt2gen eval --json in bf16 and fp32 (the time is its own line's: load excluded, compile included once)
#   peer: bench/eval_peer.py run in bf16 eager, bf16 torch.compile, and fp32 eager (after a warm-up batch)
# and how often each side's choices agree with ours in fp32 (random weights: many near-ties in bf16).
# Run from the repository root on the GPU machine with ./gpt2gen built; files go to build/bench-eval/, the table to
# build/bench-logs/eval-summary.md. Knobs: EXAMPLES (default 2000).
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
EXAMPLES=${EXAMPLES:-2000}
dir=build/bench-eval; logs=build/bench-logs
mkdir -p "$dir" "$logs"
ck=$dir/124M.bin; set=$dir/set.bin
[ -f "$ck" ] || python3 bench/sample_peers.py write-checkpoint --model 124M --out "$ck" || exit 1
python3 bench/eval_peer.py write-set --examples "$EXAMPLES" --out "$set" || exit 1
for prec in bf16 fp32; do
    # twice: the first run compiles the eval plan's kernels into the cache
    ./gpt2gen eval --checkpoint "$ck" --data "$set" --precision $prec --json > "$dir/ours-$prec.json" 2> "$dir/ours-$prec.err"
    ./gpt2gen eval --checkpoint "$ck" --data "$set" --precision $prec --json > "$dir/ours-$prec.json" 2> "$dir/ours-$prec.err" \
        || { cat "$dir/ours-$prec.err"; exit 1; }
done
python3 bench/eval_peer.py run --checkpoint "$ck" --data "$set" --dtype bf16 > "$dir/peer-bf16.out" || exit 1
python3 bench/eval_peer.py run --checkpoint "$ck" --data "$set" --dtype bf16 --compile > "$dir/peer-bf16-compile.out" 2>/dev/null \
    || echo "eval.sh: the torch.compile peer failed"
python3 bench/eval_peer.py run --checkpoint "$ck" --data "$set" --dtype fp32 > "$dir/peer-fp32.out" || exit 1
python3 - "$dir" "$EXAMPLES" > "$logs/eval-summary.md" <<'PY'
import json, os, re, sys
d, n = sys.argv[1], int(sys.argv[2])
ref = json.load(open(f"{d}/ours-fp32.json"))["choices"]
rows = []
for prec in ("bf16", "fp32"):
    o = json.load(open(f"{d}/ours-{prec}.json"))
    err = open(f"{d}/ours-{prec}.err").read()
    m = re.search(r"in ([0-9.]+)(ms|s)\b", err)
    sec = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1) if m else float("nan")
    rows.append((f"gpt2gen eval {prec}", sec, o["choices"]))
for tag in ("bf16", "bf16-compile", "fp32"):
    path = f"{d}/peer-{tag}.out"
    if not os.path.exists(path) or not open(path).read().strip():
        continue
    p = json.loads(open(path).read().split("eval-peer ", 1)[1])
    rows.append((f"PyTorch {p['torch']} {tag}", p["seconds"], p["choices"]))
print(f"| {n} examples x 4 completions, GPT-2 124M random weights | seconds | examples/s | choices = ours fp32 |")
print("|---|---|---|---|")
for name, sec, ch in rows:
    agree = sum(a == b for a, b in zip(ch, ref)) / len(ref)
    print(f"| {name} | {sec:.2f} | {n / sec:.0f} | {100 * agree:.1f}% |")
PY
cat "$logs/eval-summary.md"
