#!/bin/sh
# `gpt2gen tune` on the GPU (run by tests/gpu.sh, i.e. `make test-gpu`), on a small config in bf16 and fp32, with
# its own tuning database: the tune finishes and reports every family and matmul, and times the GELU's paths
# (train.gelu: four on Hopper in 16 bits, else three), whose first losses agree; its tuned training step
# matches the untuned one (the tune itself holds the first three losses to the precision's tolerance: its line
# "ok tuned step matches the untuned one"); `gpt2gen test` then builds from the database (its one line says so)
# and every chosen variant passes the per-kernel regression tests (the decode plan's too); a second tune resumes
# from the database without measuring again. In bf16 the tune also sweeps the decode plan of `gpt2gen sample` and
# the eval plan of `gpt2gen eval` (fp32 tunes the training step alone: --only train), records their best, and
# sample and eval of a tiny checkpoint then say they take them (their "tune db" line; the checkpoint is trained
# for one step on the CPU from data/fortunes: without it, that check skips). A Llama-shaped relative of tiny is
# tuned too (bf16, the training step), and `gpt2gen test` passes on its chosen variants. Skips without a GPU.
# TUNE_PRECISIONS (default "bf16 fp32") picks the precisions. TUNE_PHASE picks a part: "tune" (the tunes, their
# checks, sample and eval, the resumed tune: none of them reads the GPU's free memory, so they may share the GPU),
# "test" (`gpt2gen test` on the tuned variants, whose "plan memory" checks need the GPU alone), or "all" (default);
# the two share the folder TUNE_WORK (default: a scratch folder), where the tune phase leaves its database.
. "$(dirname "$0")/../lib.sh"
scratch
cd "$ROOT" || exit 1
phase=${TUNE_PHASE:-all}
case $phase in all|tune|test) ;; *) echo "tests/gpu/tune.sh: TUNE_PHASE: expected all, tune or test, got '$phase'" >&2; exit 2 ;; esac
scratch_dir=$WORK   # finish removes WORK: the shared folder stays for the other phase
if [ -n "$TUNE_WORK" ]; then mkdir -p "$TUNE_WORK" && WORK=$TUNE_WORK; fi
# the logs into build/test-logs, then the counts
end() { cp "$WORK"/*.log "$WORK"/*.err "$GPT2GEN_TUNE_DB" "$ROOT/build/test-logs/" 2>/dev/null; WORK=$scratch_dir; finish; }
export NCCL_NVLS_ENABLE=0
export GPT2GEN_TUNE_DB="$WORK/tune-db.txt"
if ! nvidia-smi >/dev/null 2>&1; then skip gpu_tune "no GPU here"; end; fi
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | head -1)
# a tiny checkpoint (one step on the CPU) and a multiple-choice set of 40 examples (more than 32 rows, the longest
# under 64 positions: eval's one bucket of tiny), for sample and eval on the tuned plans
ck=""
if [ "$phase" != test ] && [ -f data/fortunes/train_000000.bin ] &&
   "$GPT2GEN" train configs/tiny.lua --backend cpu -q --set train.steps=1 --set checkpoint.dir="$WORK/ck" > "$WORK/ck.log" 2>&1; then
    ck="$WORK/ck/model_00000001.bin"
    python3 "$ROOT/tests/evalset.py" "$WORK/set.bin" 40 1 12 6
fi
# the decode and eval plans after a tune: swept in its report, best records for their shapes, and sample and eval
# take them (each says so in its one "tune db" line)
plans_tuned() {   # PREC LOG
    dl=$(grep '^plan decode (1 row): the database gives it [1-9][0-9]* kernel famil' "$2")
    el=$(grep '^plan eval (32 rows, T=64): the database gives it [1-9][0-9]* kernel families and [1-9][0-9]* matmul' "$2")
    if grep -q '^## plan decode (1 row)' "$2" && [ -n "$dl" ] && [ -n "$el" ] &&
       grep -q '^best kernel decode .*shape=B1,T1,' "$GPT2GEN_TUNE_DB" && grep -q '^best matmul qkv .*shape=m384,n2048,' "$GPT2GEN_TUNE_DB"
    then ok "decode_eval_tuned_$1" "$dl; $el"
    else fail "decode_eval_tuned_$1" "no decode or eval plan lines in $2, or no best records: $(grep '^plan \|^## plan' "$2" | head -6)"; fi
    if [ -z "$ck" ]; then skip "sample_eval_take_db_$1" "no checkpoint (data/fortunes missing, or training failed: $(tail -2 "$WORK/ck.log" 2>/dev/null))"; return; fi
    "$GPT2GEN" sample --checkpoint "$ck" --tokenizer data/fortunes/tokenizer.bin --prompt Hi --tokens 8 --precision "$1" \
        > "$WORK/sample-$1.out" 2> "$WORK/sample-$1.err"; src=$?
    "$GPT2GEN" eval --checkpoint "$ck" --data "$WORK/set.bin" --precision "$1" > "$WORK/eval-$1.out" 2> "$WORK/eval-$1.err"; erc=$?
    su=$(grep '^tune db .*from the database' "$WORK/sample-$1.err"); eu=$(grep '^tune db .*matmuls* .*from the database' "$WORK/eval-$1.err")
    if [ $src -eq 0 ] && [ $erc -eq 0 ] && [ -n "$su" ] && [ -n "$eu" ]; then ok "sample_eval_take_db_$1" "sample: $su; eval: $eu"
    else fail "sample_eval_take_db_$1" "sample rc=$src: $(tail -3 "$WORK/sample-$1.err"); eval rc=$erc: $(tail -3 "$WORK/eval-$1.err")"; fi
}
# `gpt2gen test` on tiny with the SETTINGS the tune ran with: every chosen variant passes, built from the database
# (its one "tune db" line says so)
tuned_test() {   # NAME LOG SETTINGS...
    t_name=$1 t_log=$2; shift 2
    "$GPT2GEN" test configs/tiny.lua "$@" > "$t_log" 2>&1; rc=$?
    used=$(grep '^tune db' "$t_log")
    if [ $rc -eq 0 ] && grep -q '^RESULT [0-9]* 0 ' "$t_log" && printf '%s' "$used" | grep -q 'from the database'; then
        ok "$t_name" "$(grep '^RESULT' "$t_log"); $used"
    else fail "$t_name" "rc=$rc, $used: $(grep -E '^FAIL' "$t_log" | head -5)"; fi
}
for prec in ${TUNE_PRECISIONS:-bf16 fp32}; do
    log="$WORK/tune-$prec.log"
    if [ "$phase" != test ]; then
    # bf16: the three plans (about a quarter more to measure than the training step alone: a longer budget, which
    # only a tune that would not finish reaches); fp32: the training step alone
    opts="--budget 180"; [ "$prec" = bf16 ] || opts="--budget 120 --only train"
    # shellcheck disable=SC2086
    "$GPT2GEN" tune configs/tiny.lua --set precision=$prec $opts > "$log" 2> "$WORK/tune-$prec.err"; rc=$?
    fams=$(grep -c '^kernel ' "$log"); mms=$(grep -c '^matmul ' "$log")
    if [ $rc -eq 0 ] && [ "$fams" -ge 8 ] && [ "$mms" -ge 15 ] && [ -f build/tiny/tune_report.txt ]; then
        ok "tune_tiny_$prec" "$fams families, $mms matmuls, $(grep '^tune took' "$log")"
    else fail "tune_tiny_$prec" "rc=$rc, $fams families, $mms matmuls: $(tail -5 "$WORK/tune-$prec.err") $(tail -3 "$log")"; fi
    # train.gelu = "auto": the four paths timed as whole steps, the fastest recorded (tune/gelu_path.c); "fused"
    # (our fc matmuls with the GELU) runs on Hopper in 16 bits only, elsewhere its time is printed as -1.00
    fused='[0-9.]*'
    [ "$prec" = fp32 ] || [ "$cc" != 9.0 ] && fused='-1\.00'
    gl=$(grep "^gelu path: epilogues [0-9.]* ms/step, kernels [0-9.]*, split (kernel forward, epilogue backward) [0-9.]*, fused $fused:" "$log")
    # the other paths compute the same step: their first losses agree with the epilogues' (else rejected)
    rejected=$(grep '^gelu path: path=[a-z]* rejected' "$log")
    if [ -n "$gl" ] && [ -z "$rejected" ] && grep -q '^best gelu path path=' "$GPT2GEN_TUNE_DB"; then ok "gelu_path_timed_$prec" "$gl"
    else fail "gelu_path_timed_$prec" "no gelu path line with 'fused $fused' (GPU compute capability $cc) in $log, or no best record, or $rejected: $(grep '^gelu path' "$log" | head -5) $(grep '^tune \[.*gelu' "$WORK/tune-$prec.err" | head -4)"; fi
    line=$(grep 'tuned step matches the untuned one' "$log")
    case "$line" in ok*) ok "tuned_step_matches_$prec" "$(grep '^step ' "$log" | sed 's/  */ /g'); ${line#ok }" ;;
                    *) fail "tuned_step_matches_$prec" "${line:-no such line in $log}" ;; esac
    [ "$prec" = bf16 ] && plans_tuned "$prec" "$log"
    fi
    [ "$phase" = tune ] && continue
    if [ ! -s "$GPT2GEN_TUNE_DB" ]; then fail "tuned_variants_pass_$prec" "no tuning database at $GPT2GEN_TUNE_DB (TUNE_PHASE=tune first)"; continue; fi
    tuned_test "tuned_variants_pass_$prec" "$WORK/test-$prec.log" --set precision="$prec"
done
# a relative (Llama-shaped: RMSNorm, RoPE, SwiGLU, grouped-query 4:2, no biases, an untied head) in bf16, its
# training step alone: the tune sweeps its own families (rmsnorm, rope, activation) and its matmuls, its tuned step
# matches the untuned one, and `gpt2gen test` then passes on the variants it chose
rel="--set name=tiny-llama --set precision=bf16 --set model.n_kv_head=2 --set model.norm=rmsnorm --set model.position=rope
     --set model.mlp=swiglu --set model.n_ffn=384 --set model.bias=false --set model.tie_embeddings=false"
if [ "$phase" != test ]; then
    # shellcheck disable=SC2086
    "$GPT2GEN" tune configs/tiny.lua $rel --budget 90 --only train > "$WORK/tune-llama.log" 2> "$WORK/tune-llama.err"; rc=$?
    own=$(grep -c -E '^kernel (rmsnorm|rope|activation) +default' "$WORK/tune-llama.log"); mms=$(grep -c '^matmul ' "$WORK/tune-llama.log")
    line=$(grep 'tuned step matches the untuned one' "$WORK/tune-llama.log")
    case "$rc $own $line" in "0 3 ok"*) ok tune_relative "rmsnorm, rope and activation swept, $mms matmuls; ${line#ok }" ;;
        *) fail tune_relative "rc=$rc, $own of rmsnorm/rope/activation swept, ${line:-no tuned-step line}: $(tail -3 "$WORK/tune-llama.err")" ;; esac
fi
# shellcheck disable=SC2086
[ "$phase" != tune ] && tuned_test tuned_relative_variants_pass "$WORK/test-llama.log" $rel
# resume: everything measured is in the database, so a second tune measures nothing again
[ "$phase" = test ] && end
"$GPT2GEN" tune configs/tiny.lua --set precision=bf16 > "$WORK/again.log" 2> "$WORK/again.err"; rc=$?
fresh=$(grep '^tune \[' "$WORK/again.err" | grep -vc 'from the database\|path=')
if [ $rc -eq 0 ] && [ "$fresh" -eq 0 ]; then ok tune_resumes "$(grep -c 'from the database' "$WORK/again.err") results reused"
else fail tune_resumes "rc=$rc, $fresh results measured again: $(grep '^tune \[' "$WORK/again.err" | grep -v 'from the database' | head -3)"; fi
end
