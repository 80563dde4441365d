#!/bin/sh
# GPT-2's relatives (docs/config.md's architecture keys) end to end on the CPU backend: a Llama-shaped and a
# nanochat-shaped micro model train with the loss falling, resume to the same bits, record their architecture in the
# checkpoint's header and sample from it, and two ranks (ZeRO-1) equal one; the GPU build refuses them with one message naming the key. The numbers
# themselves are held to the numpy reference by build/tests/test_arch_reference.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
metric() { grep -F '"step"' "$1" | sed -n "s/.*\"$2\":\([-+0-9.e]*\).*/\1/p"; }
printf 'base "%s/tests/configs/micro.lua"\nname = "llama"\nmodel = { norm = "rmsnorm", position = "rope", mlp = "swiglu", n_ffn = 160, n_kv_head = 1, bias = false, tie_embeddings = false }\n' "$ROOT" > "$WORK/llama.lua"
printf 'base "%s/tests/configs/micro.lua"\nname = "nano"\nmodel = { norm = "rmsnorm", position = "rope", mlp = "relu2", qk_norm = true, bias = false, tie_embeddings = false, logit_softcap = 15 }\n' "$ROOT" > "$WORK/nano.lua"

out=$(cd "$WORK" && "$GPT2GEN" build llama.lua --arch sm_90 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -qF 'llama.lua: model.norm = "rmsnorm"' && printf '%s' "$out" | grep -qF -- '--backend cpu' &&
   [ "$(printf '%s\n' "$out" | grep -c .)" -le 2 ]; then ok gpu_build_refused
else fail gpu_build_refused "rc=$rc: $out"; fi

for m in llama nano; do
    run() { "$GPT2GEN" train "$WORK/$m.lua" --backend cpu -q "$@"; }
    out=$(run --set checkpoint.dir="$WORK/$m-fall" --set train.steps=20 --set eval.val_every=0 2>&1); rc=$?
    first=$(metric "$WORK/$m-fall/metrics.jsonl" loss | head -1); last=$(metric "$WORK/$m-fall/metrics.jsonl" loss | tail -1)
    if [ $rc -eq 0 ] && awk "BEGIN{exit !($last < $first - 1.0)}"; then ok "${m}_loss_falls ($first -> $last)"
    else fail "${m}_loss_falls" "rc=$rc loss $first -> $last: $out"; fi

    # the header: version 1003 (fp32, another architecture), not llm.c's 3
    v=$(od -An -t d4 -j 4 -N 4 "$WORK/$m-fall/model_00000020.bin" 2>/dev/null | tr -d ' ')
    if [ "$v" = 1003 ]; then ok "${m}_checkpoint_version"; else fail "${m}_checkpoint_version" "version '$v', expected 1003"; fi

    run --set checkpoint.dir="$WORK/$m-straight" >/dev/null 2>&1
    run --set checkpoint.dir="$WORK/$m-resumed" --set checkpoint.every=4 >/dev/null 2>&1
    rm -f "$WORK/$m-resumed/model_00000008.bin" "$WORK/$m-resumed/state_00000008.bin"
    out=$(run --set checkpoint.dir="$WORK/$m-resumed" --resume 2>&1); rc=$?
    if [ $rc -eq 0 ] && cmp -s "$WORK/$m-straight/model_00000008.bin" "$WORK/$m-resumed/model_00000008.bin" &&
       cmp -s "$WORK/$m-straight/state_00000008.bin" "$WORK/$m-resumed/state_00000008.bin"; then ok "${m}_exact_resume"
    else fail "${m}_exact_resume" "rc=$rc: $out"; fi

    out=$("$GPT2GEN" sample --checkpoint "$WORK/$m-straight/model_00000008.bin" --backend cpu --tokens 6 --seed 3 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "6 tokens each.*cpu backend"; then ok "${m}_sample"
    else fail "${m}_sample" "rc=$rc: $out"; fi
done

# ZeRO-1 over the parameters the architecture has: 2 ranks = 1 rank with accumulation (as tests/cli/ranks.sh)
vals() { grep -o '"loss":[-0-9.e]*\|"norm":[-0-9.e]*\|"val_loss":[-0-9.e]*' "$1" | cut -d: -f2; }
common="--backend cpu -q --set train.total_batch_size=256 --set train.steps=4 --set eval.val_every=2"
"$GPT2GEN" train "$WORK/llama.lua" $common --set eval.val_batches=8 --set checkpoint.dir="$WORK/one" >/dev/null 2>&1
out=$("$GPT2GEN" train "$WORK/llama.lua" $common --set eval.val_batches=4 --set train.num_gpus=2 --set checkpoint.dir="$WORK/two" 2>&1); rc=$?
vals "$WORK/one/metrics.jsonl" > "$WORK/one.txt"; vals "$WORK/two/metrics.jsonl" > "$WORK/two.txt"
d=$(paste "$WORK/one.txt" "$WORK/two.txt" | awk '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; c++} END {if (c != 11) print "count " c; else print m + 0}')
if [ $rc -eq 0 ] && awk "BEGIN{exit !(\"$d\" + 0 <= 1e-4 && \"$d\" !~ /count/)}"; then ok "llama_ranks_2_equal_accumulation (largest difference $d)"
else fail llama_ranks_2_equal_accumulation "rc=$rc, difference $d: $out"; fi
finish
