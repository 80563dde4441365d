#!/bin/sh
# bench/attention.sh: the attention template's tile variants at gpt2-124M's shape (B=64, T=1024, NH=12, HS=64,
# bf16), each checked against the fp64 reference and timed (CUDA events, 10 calls), with cuDNN beside them (its
# deterministic backward, and "dQ by atomics": train.deterministic = false);
# prints a table, fastest first. Run from the repository root with the test programs built (make tests-bin).
cd "$(dirname "$0")/.." || exit 1
log=build/attention-bench.log
mkdir -p build
build/tests/test_attention test_flash_tiles_gpt2_124m > "$log" 2>&1; rc=$?
grep -E '^(FAIL|skip)' "$log"
echo "== attention at gpt2-124M's shape (ms per layer)"
printf "%-72s %8s %8s %8s\n" variant forward backward total
grep '^time ' "$log" | sed -n 's/^time \(.*\) attention \(flash template\|cuDNN[^B]*\) *B=.*forward \([0-9.]*\) ms.*backward \([0-9.]*\) ms.*/\1|\2|\3|\4/p' |
    awk -F'|' '{ v = $1; sub(/^att-bf16-b64-t1024-h12-hs64-?/, "", v); if (v == "") v = "defaults";
                 if ($2 ~ /cuDNN/) { v = $2; sub(/ +$/, "", v); if (seen[v]++) next } printf "%.6f\t%-72s %8.3f %8.3f %8.3f\n", $3 + $4, v, $3, $4, $3 + $4 }' | sort -n | cut -f2-
[ -n "$OUT" ] && cp "$log" "$OUT"/
exit $rc
