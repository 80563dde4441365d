#!/bin/sh
# GPT-2's relatives (docs/config.md's architecture keys) end to end on the CPU backend: a Llama-shaped and a
# nanochat-shaped micro model train with the loss falling, resume to the same bits, record their architecture in the
# checkpoint's header and sample from it, and two ranks (ZeRO-1) equal one; the GPU build generates and compiles their
# kernels (and refuses, with one message naming the key, what the GPU's kernels do not cover); configs/llama-124M.lua and
# nanochat-d12.lua, shrunk, train with the loss falling. The numbers themselves are held to the numpy reference by
# build/tests/test_arch_reference; the GPU's kernels to the CPU by test_gpu and `gpt2gen test` on the GPU machine.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
metric() { grep -F '"step"' "$1" | sed -n "s/.*\"$2\":\([-+0-9.e]*\).*/\1/p"; }
printf 'base "%s/tests/configs/micro.lua"\nname = "llama"\nmodel = { norm = "rmsnorm", position = "rope", mlp = "swiglu", n_ffn = 160, n_kv_head = 1, bias = false, tie_embeddings = false }\n' "$ROOT" > "$WORK/llama.lua"
printf 'base "%s/tests/configs/micro.lua"\nname = "nano"\nmodel = { norm = "rmsnorm", position = "rope", mlp = "relu2", qk_norm = true, bias = false, tie_embeddings = false, logit_softcap = 15 }\n' "$ROOT" > "$WORK/nano.lua"

# the GPU build: every family's kernels generated and compiled (NVRTC), grouped-query attention said in plan.txt
for m in llama nano; do
    out=$(cd "$WORK" && "$GPT2GEN" build $m.lua --arch sm_90 2>&1); rc=$?
    n=$(ls "$WORK/build/$m/kernels/"*.sm_90.cubin 2>/dev/null | wc -l)
    if [ $rc -eq 0 ] && [ -f "$WORK/build/$m/kernels/rmsnorm.cu" ] && [ -f "$WORK/build/$m/kernels/rope.cu" ] &&
       [ -f "$WORK/build/$m/kernels/activation.cu" ] && [ "$n" -eq "$(ls "$WORK/build/$m/kernels/"*.cu | wc -l)" ]; then
        ok "${m}_gpu_build"
    else fail "${m}_gpu_build" "rc=$rc, $n CUBINs: $out"; fi
done
if grep -q "^gqa        2 query heads, 1 key/value heads" "$WORK/build/llama/plan.txt" &&
   ! grep -q "^gqa" "$WORK/build/nano/plan.txt"; then ok gqa_in_plan
else fail gqa_in_plan "plan.txt's gqa line: $(grep "^gqa" "$WORK/build/llama/plan.txt")"; fi
# LayerNorm at another eps and a GELU MLP of another width build for the GPU: the eps is the relative's NORM_EPS in
# layernorm.cu, and the GELU kernels run over B*T*n_ffn (test_gpu's gt-gelu-eps-fp32 runs them against the CPU)
printf 'base "%s/tests/configs/micro.lua"\nname = "lneps"\nmodel = { norm_eps = 1e-6, n_ffn = 96 }\n' "$ROOT" > "$WORK/lneps.lua"
out=$(cd "$WORK" && "$GPT2GEN" build lneps.lua --arch sm_90 2>&1); rc=$?
ln="$WORK/build/lneps/kernels/layernorm.cu"
if [ $rc -eq 0 ] && grep -q "NORM_EPS = 9.999999975e-07f" "$ln" && grep -q "LN_EPS = NORM_EPS" "$ln" &&
   grep -q "^matmul fc+gelu  *m=96 " "$WORK/build/lneps/plan.txt"; then ok gpu_build_layernorm_eps_gelu_width
else fail gpu_build_layernorm_eps_gelu_width "rc=$rc: $out"; fi
# and QK-norm at a head size that is not a multiple of 32 (micro's is 16): refused on the GPU, trained on the CPU
printf 'base "%s/tests/configs/micro.lua"\nname = "qk16"\nmodel = { n_head = 4, norm = "rmsnorm", qk_norm = true }\n' "$ROOT" > "$WORK/qk16.lua"
out=$(cd "$WORK" && "$GPT2GEN" build qk16.lua --arch sm_90 2>&1); rc=$?
cpu=$("$GPT2GEN" train "$WORK/qk16.lua" --backend cpu -q --set checkpoint.dir="$WORK/qk16-run" --set train.steps=2 --set eval.val_every=0 2>&1); crc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -qF 'qk16.lua: model.qk_norm = true with a head size of 16' &&
   printf '%s' "$out" | grep -qF -- '--backend cpu' && [ $crc -eq 0 ]; then ok qk_norm_head_size_gpu_refused_cpu_runs
else fail qk_norm_head_size_gpu_refused_cpu_runs "build rc=$rc: $out; cpu rc=$crc: $cpu"; fi

# the ready configs of GPT-2's relatives, shrunk to seconds a step (their architecture keys as they are)
small="--set model.n_layer=2 --set model.max_seq_len=64 --set train.batch_size=4 --set train.seq_len=32
       --set train.total_batch_size=128 --set train.steps=20 --set train.warmup=2 --set train.lr=3e-3 --set eval.val_every=0
       --set eval.sample_every=0 --set data.train=data/fortunes/train_*.bin --set data.val=data/fortunes/val_*.bin"
for c in "llama-124M --set model.n_embd=256 --set model.n_head=8 --set model.n_ffn=512" \
         "nanochat-d12 --set model.n_embd=256 --set model.n_head=2"; do
    set -- $c
    name=$1; shift
    out=$("$GPT2GEN" train "configs/$name.lua" --backend cpu -q $small "$@" --set checkpoint.dir="$WORK/$name" 2>&1); rc=$?
    first=$(metric "$WORK/$name/metrics.jsonl" loss | head -1); last=$(metric "$WORK/$name/metrics.jsonl" loss | tail -1)
    if [ $rc -eq 0 ] && awk "BEGIN{exit !($last < $first - 1.0)}"; then ok "config_${name}_loss_falls ($first -> $last)"
    else fail "config_${name}_loss_falls" "rc=$rc loss $first -> $last: $out"; fi
done

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
