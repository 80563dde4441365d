#!/bin/sh
# bench/sample.sh: text generation with a key/value cache, ours against its peers in the same run. GPT-2 124M and
# 350M (random weights, maxT 1024, bf16), a PROMPT-token prompt, TOKENS new tokens, greedy, at each batch of BATCHES:
#   (a) ours: gpt2gen sample with its cache        (b) ours with --no-cache (TOKENS_NOCACHE new tokens: it is slow)
#   (c) Hugging Face GPT2LMHeadModel.generate, use_cache=True
#   (d) a PyTorch static-cache decode loop (bench/sample_peers.py: CUDA graphs, torch.compile; the fastest mode)
# and the prefill of a ~1024-token prompt by each (ours: 1023 tokens and --tokens 1, as maxT leaves no more room).
# MODELS may also name llama-124M (configs/llama-124M.lua's shape: RMSNorm, RoPE, SwiGLU, 4 key/value heads, no
# biases, untied head): (c) is then LlamaForCausalLM.generate and (d) the same loop over the Llama block, its caches
# of the 4 key/value heads; every part above, prefill included, runs for it.
# tok/s = rows x new tokens / decode time (prefill excluded); every number is the median of RUNS timed runs after a
# warm-up. Run from the repository root on the GPU machine, with ./gpt2gen built. Checkpoints (fp32, written
# by sample_peers.py with the same random weights for every side: llm.c's for GPT-2; for llama-124M a
# LlamaForCausalLM folder, llama-124M-hf/, that `gpt2gen import` makes our llama-124M.bin of) and prompt texts go
# to build/bench-sample/ (made once); logs to build/bench-logs/sample-*.log; the tables to
# build/bench-logs/sample-summary.md.
# Knobs: MODELS (default "124M 350M"; also 774M, 1558M and llama-124M, in any mix: "124M llama-124M"), BATCHES
# ("1 8"), TOKENS (256), PROMPT (128), TOKENS_NOCACHE (64), RUNS (3),
# TORCH_MODES ("graph,compile+graph"; also eager, reduce-overhead), SAMPLE_ARGS (more options for gpt2gen sample),
# NO_NOCACHE=1, NO_HF=1, NO_TORCH=1, NO_PREFILL=1 skip those parts; PROFILE=1 adds, for each model and batch, one
# more run of ours under GPT2GEN_PROFILE=1 and its per-op table of the decode step (the ops launched one by one,
# without the graph: each carries its launch) at the summary's end. Ours' rows also give the µs a decode step takes
# and its MBU (the bytes it must read over its time, over the copy bandwidth sample_peers.py measures); OURS=path/to/another/gpt2gen runs that build as
# ours (say, the commit before a change, in the same call, with NO_HF=1 NO_TORCH=1; it also makes llama-124M.bin,
# with its import, when that is not there yet).
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
MODELS=${MODELS:-"124M 350M"}
BATCHES=${BATCHES:-"1 8"}
TOKENS=${TOKENS:-256}
PROMPT=${PROMPT:-128}
TOKENS_NOCACHE=${TOKENS_NOCACHE:-64}
RUNS=${RUNS:-3}
TORCH_MODES=${TORCH_MODES:-"graph,compile+graph"}
SAMPLE_ARGS=${SAMPLE_ARGS:-}
OURS=${OURS:-./gpt2gen}
PREFILL_TOKENS=1023          # ours: maxT 1024 leaves room for a prompt of 1023 and one new token
PEER_PREFILL_TOKENS=1024
dir=build/bench-sample
logs=build/bench-logs
mkdir -p "$dir" "$logs"
results=$dir/.results; failures=$dir/.failures; runs=$dir/.runs; warm=$dir/.warm; err=$dir/.stderr
profiles=$dir/.profiles
: > "$results"; : > "$failures"; : > "$profiles"
summary=$logs/sample-summary.md
start=$(date +%s)
[ -x "$OURS" ] || echo "sample.sh: no $OURS here: build it first (make); ours will fail"

put() { echo "$1 $2 $3 $4" >> "$results"; }           # put MODEL BATCH KEY VALUE
get() {                                                 # get MODEL BATCH KEY: the value, or "failed"
    awk -v m="$1" -v b="$2" -v k="$3" '$1 == m && $2 == b && $3 == k { v = $4 } END { print (v == "" ? "failed" : v) }' "$results"
}
fail() {                                                # fail LOG WHAT: noted, and shown with the log's tail at the end
    echo "$2: FAILED (see $1)"
    echo "$1 $2" >> "$failures"
}
jnum() { sed -n -E "s/.*\"$1\" *: *(-?[0-9][0-9.eE+-]*).*/\1/p"; }   # jnum FIELD: FIELD of each JSON line on stdin
jstr() { sed -n -E "s/.*\"$1\" *: *\"([^\"]*)\".*/\1/p"; }
jlist() { sed -n -E "s/.*\"$1\" *: *\[([^]]*)\].*/\1/p"; }
median() {
    sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) m = a[(NR + 1) / 2]; else m = (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.1f\n", m }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
# step_us TOK_S B: microseconds a decode step (B rows, one token each)
step_us() { awk -v t="$1" -v b="$2" 'BEGIN { if (t + 0 > 0) printf "%.0f", 1e6 * b / t; else print "-" }'; }
label() { case $1 in llama-*) echo "$1" ;; *) echo "gpt2-$1" ;; esac; }   # label MODEL: its name in the tables
ckfile() { echo "$dir/$(label "$1").bin"; }                                # ckfile MODEL: our checkpoint of it
# shape MODEL: mL layers, mC channels, mNH query heads, mNKV key/value heads (the cache holds mNKV of them), mU the
# parameters of the checkpoint a decode step does not read (an untied embedding: it reads one row of Vp; GPT-2's wte
# is also its head, read whole)
shape() {
    mU=0
    case $1 in
    124M) mL=12 mC=768 mNH=12 mNKV=12 ;; 350M) mL=24 mC=1024 mNH=16 mNKV=16 ;;
    774M) mL=36 mC=1280 mNH=20 mNKV=20 ;; llama-124M) mL=12 mC=768 mNH=12 mNKV=4 mU=$(( (50304 - 1) * 768 )) ;;
    *) mL=48 mC=1600 mNH=25 mNKV=25 ;;
    esac
}
# mbu MODEL TOK_S B: the bytes a decode step must read (the bf16 weights once, less the mU it does not read, and each
# row's cached keys and values of bf16, mNKV heads of mC/mNH, at the mean length PROMPT + TOKENS/2 over every layer)
# over the step's time, over the measured copy bandwidth (sample_peers.py bandwidth: read + written bytes a second)
mbu() {
    shape "$1"
    mP=$(( ($(wc -c < "$(ckfile "$1")") - 1024) / 4 - mU ))   # an fp32 checkpoint: 1024 header bytes, 4 a parameter
    awk -v t="$2" -v b="$3" -v p="$mP" -v l="$mL" -v c="$((mC / mNH * mNKV))" -v n="$((PROMPT + TOKENS / 2))" -v bw="$(cat "$dir/.bandwidth" 2>/dev/null)" \
        'BEGIN { if (t + 0 > 0 && bw + 0 > 0) printf "%.0f%%", 100 * (2 * p + b * l * 2 * n * c * 2) / (b / t) / (bw * 1e9); else print "-" }'
}

# ours LOG PROMPT_FILE BATCH NEW [OPTION...]: one run of gpt2gen sample; prints its sample-stats JSON
ours() {
    o_log=$1 o_prompt=$2 o_b=$3 o_n=$4; shift 4
    echo "\$ $OURS sample --checkpoint $ckpt --prompt-file $o_prompt --tokens $o_n --batch $o_b --temperature 0" \
        "--backend cuda --precision bf16 --ignore-eot --stats $SAMPLE_ARGS $*" >> "$o_log"
    # shellcheck disable=SC2086
    "$OURS" sample --checkpoint "$ckpt" --prompt-file "$o_prompt" --tokens "$o_n" --batch "$o_b" --temperature 0 \
        --backend cuda --precision bf16 --ignore-eot --stats $SAMPLE_ARGS "$@" > /dev/null 2> "$err"
    o_rc=$?
    cat "$err" >> "$o_log"
    [ $o_rc -eq 0 ] || { echo "(exit code $o_rc)" >> "$o_log"; return 1; }
    grep '^sample-stats ' "$err" | tail -n 1 | sed 's/^sample-stats //' | grep '"tok_per_s"'
}
# ours_runs LOG PROMPT_FILE BATCH NEW WARM_NEW [OPTION...]: a warm-up run of WARM_NEW new tokens, then RUNS runs of
# NEW; the runs' JSON lines in $runs (the warm-up's in $warm); fails unless every run gave its stats
ours_runs() {
    r_log=$1 r_prompt=$2 r_b=$3 r_n=$4 r_w=$5; shift 5
    : > "$runs"; : > "$warm"
    ours "$r_log" "$r_prompt" "$r_b" "$r_w" "$@" > "$warm" || return 1
    r_i=0
    while [ $r_i -lt "$RUNS" ]; do
        ours "$r_log" "$r_prompt" "$r_b" "$r_n" "$@" >> "$runs" || return 1
        r_i=$((r_i + 1))
    done
    [ "$(wc -l < "$runs")" -eq "$RUNS" ]
}
# profile MODEL BATCH: one run of ours under GPT2GEN_PROFILE=1; its decode step's per-op table into $profiles
profile() {
    f_log=$logs/sample-profile-$1-b$2.log; : > "$f_log"
    if (export GPT2GEN_PROFILE=1; ours "$f_log" "$pfile" "$2" "$TOKENS" > /dev/null) &&
        grep -q '^GPT2GEN_PROFILE: mean per decode step' "$f_log"; then
        { echo; echo "$(label "$1"), batch $2:"; echo '```'
          sed -n '/^GPT2GEN_PROFILE: mean per decode step/,/^  total/p' "$f_log"; echo '```'; } >> "$profiles"
    else
        fail "$f_log" "profile ours $(label "$1") B=$2"
    fi
}
# the prompt texts: WORDS words of one GPT-2 token each
prompt_file() {
    p_f=$dir/prompt-$1w.txt
    [ -f "$p_f" ] || python3 bench/sample_peers.py write-prompt --words "$1" --out "$p_f" > /dev/null || return 1
    echo "$p_f"
}
# checkpoint MODEL: its file, written once, into .ckpt; the peers' weights (--checkpoint of sample_peers.py) into
# .peer: the same file for GPT-2, a LlamaForCausalLM folder for llama-* (which gpt2gen import made ours of)
checkpoint() {
    c_f=$(ckfile "$1")
    c_log=$logs/sample-checkpoint-$1.log
    case $1 in llama-*) c_p=$dir/$1-hf ;; *) c_p=$c_f ;; esac
    if [ "$c_p" != "$c_f" ] && [ ! -f "$c_f" ]; then
        : > "$c_log"
        if [ ! -f "$c_p/model.safetensors" ] || [ ! -f "$c_p/config.json" ]; then
            python3 bench/sample_peers.py write-checkpoint --model "$1" --out "$c_p" >> "$c_log" 2>&1 ||
                { fail "$c_log" "checkpoint $1 (the Hugging Face folder)"; return 1; }
        fi
        echo "\$ $OURS import $c_p -o $c_f" >> "$c_log"
        "$OURS" import "$c_p" -o "$c_f" >> "$c_log" 2>&1 || { fail "$c_log" "checkpoint $1 (gpt2gen import)"; return 1; }
        cat "$c_log"
    elif [ ! -f "$c_f" ]; then
        python3 bench/sample_peers.py write-checkpoint --model "$1" --out "$c_f" > "$c_log" 2>&1 ||
            { fail "$c_log" "checkpoint gpt2-$1"; return 1; }
        cat "$c_log"
    fi
    echo "$c_f" > "$dir/.ckpt"
    echo "$c_p" > "$dir/.peer"
}

# how many tokens gpt2gen makes of a prompt file of N words (N, unless it adds some of its own, say an <|endoftext|>):
# one probe on the first model, so that the prompts come out at PROMPT and PREFILL_TOKENS tokens
delta=0
set -- $MODELS
if checkpoint "$1"; then
    ckpt=$(cat "$dir/.ckpt")
    plog=$logs/sample-probe.log; : > "$plog"
    pt=$(ours "$plog" "$(prompt_file "$PROMPT")" 1 1 | jnum prompt_tokens | head -n 1)
    if [ -n "$pt" ]; then delta=$((pt - PROMPT)); echo "probe: a prompt of $PROMPT words is $pt tokens to gpt2gen"
    else fail "$plog" "probe (ours, $(label "$1"), B=1)"; fi
fi
# the copy bandwidth the MBU column divides by (a table without it says "-")
python3 bench/sample_peers.py bandwidth > "$logs/sample-bandwidth.log" 2>&1
jnum gb_per_s < "$logs/sample-bandwidth.log" | head -n 1 > "$dir/.bandwidth"
[ -s "$dir/.bandwidth" ] && echo "copy bandwidth: $(cat "$dir/.bandwidth") GB/s (read + written)"
pfile=$(prompt_file $((PROMPT - delta)))
prefill_file=$(prompt_file $((PREFILL_TOKENS - delta)))

for model in $MODELS; do
    checkpoint "$model" || continue
    ckpt=$(cat "$dir/.ckpt"); peer=$(cat "$dir/.peer"); name=$(label "$model")
    n=$PROMPT                                  # the peers' prompt length: ours' prompt_tokens when it ran
    for b in $BATCHES; do
        log=$logs/sample-ours-$model-b$b.log; : > "$log"
        if ours_runs "$log" "$pfile" "$b" "$TOKENS" 8; then
            put "$model" "$b" ours "$(jnum tok_per_s < "$runs" | median)"
            put "$model" "$b" ours_prefill_ms "$(jnum prefill_ms < "$runs" | median)"
            pt=$(jnum prompt_tokens < "$runs" | head -n 1); [ -n "$pt" ] && n=$pt
            echo "ours $name B=$b: $(tail -n 1 "$runs")"
        else
            fail "$log" "ours $name B=$b"
        fi
        [ -n "$PROFILE" ] && profile "$model" "$b"
        [ -n "$NO_NOCACHE" ] && continue
        log=$logs/sample-ours-nocache-$model-b$b.log; : > "$log"
        if ours_runs "$log" "$pfile" "$b" "$TOKENS_NOCACHE" 4 --no-cache; then
            put "$model" "$b" nocache "$(jnum tok_per_s < "$runs" | median)"
            echo "ours --no-cache $name B=$b: $(tail -n 1 "$runs")"
        else
            fail "$log" "ours --no-cache $name B=$b"
        fi
    done
    put "$model" - prompt_tokens "$n"
    if [ -z "$NO_HF" ]; then
        log=$logs/sample-hf-$model.log
        # shellcheck disable=SC2086
        python3 bench/sample_peers.py hf --model "$model" --checkpoint "$peer" --batch $BATCHES --prompt-tokens "$n" \
            --tokens "$TOKENS" --runs "$RUNS" > "$log" 2>&1
        for b in $BATCHES; do
            line=$(grep '^hf-generate ' "$log" | grep "\"rows\":$b,")
            v=$(echo "$line" | jnum tok_per_s | head -n 1)
            if [ -n "$v" ]; then
                put "$model" "$b" hf "$v"; put "$model" "$b" hf_first "$(echo "$line" | jlist first_tokens | head -n 1)"
                echo "$line"
            else
                fail "$log" "HF generate $name B=$b"
            fi
        done
    fi
    if [ -z "$NO_TORCH" ]; then
        log=$logs/sample-torch-$model.log
        # shellcheck disable=SC2086
        python3 bench/sample_peers.py torch-loop --model "$model" --checkpoint "$peer" --batch $BATCHES \
            --prompt-tokens "$n" --tokens "$TOKENS" --runs "$RUNS" --mode "$TORCH_MODES" > "$log" 2>&1
        for b in $BATCHES; do
            line=$(grep '^torch-loop ' "$log" | grep "\"rows\":$b,")
            v=$(echo "$line" | jnum tok_per_s | head -n 1)
            if [ -n "$v" ]; then
                put "$model" "$b" torch "$v"; put "$model" "$b" torch_mode "$(echo "$line" | jstr mode | head -n 1)"
                put "$model" "$b" torch_first "$(echo "$line" | jlist first_tokens | head -n 1)"
                echo "$line"
            else
                fail "$log" "torch loop $name B=$b"
            fi
        done
    fi
    [ -n "$NO_PREFILL" ] && continue
    log=$logs/sample-ours-prefill-$model.log; : > "$log"
    if ours_runs "$log" "$prefill_file" 1 1 1; then
        while read -r line; do
            t=$(echo "$line" | jnum prefill_tokens | head -n 1); m=$(echo "$line" | jnum prefill_ms | head -n 1)
            awk -v t="$t" -v m="$m" 'BEGIN { if (m + 0 > 0) printf "%.1f\n", t / (m / 1000) }'
        done < "$runs" | median > "$dir/.v"
        put "$model" - ours_prefill "$(cat "$dir/.v")"
        put "$model" - ours_prefill_tokens "$(jnum prefill_tokens < "$runs" | head -n 1)"
        echo "ours prefill $name: $(tail -n 1 "$runs")"
    else
        fail "$log" "ours prefill $name"
    fi
    if [ -z "$NO_HF" ] || [ -z "$NO_TORCH" ]; then
        log=$logs/sample-prefill-$model.log
        python3 bench/sample_peers.py prefill --model "$model" --checkpoint "$peer" --tokens "$PEER_PREFILL_TOKENS" \
            --runs "$RUNS" --mode "$TORCH_MODES" ${NO_HF:+--no-hf} ${NO_TORCH:+--no-torch} > "$log" 2>&1
        for side in hf torch; do
            [ "$side" = hf ] && [ -n "$NO_HF" ] && continue
            [ "$side" = torch ] && [ -n "$NO_TORCH" ] && continue
            line=$(grep "^$side-prefill " "$log")
            v=$(echo "$line" | jnum tok_per_s | head -n 1)
            if [ -n "$v" ]; then
                put "$model" - "${side}_prefill" "$v"; echo "$line"
                [ "$side" = torch ] && put "$model" - torch_prefill_mode "$(echo "$line" | jstr mode | head -n 1)"
            else
                fail "$log" "$side prefill $name"
            fi
        done
    fi
done

{
    set -- $MODELS
    echo
    echo "== text generation, bf16, random weights, greedy: prompt $(get "$1" - prompt_tokens) tokens (ours' prompt_tokens;" \
        "the peers: random ids of that count), $TOKENS new tokens (ours --no-cache: $TOKENS_NOCACHE); tok/s = rows x new" \
        "tokens / decode time, prefill excluded; median of $RUNS runs after a warm-up; torch loop: its fastest mode"
    echo
    echo "| model | batch | ours tok/s | ours µs a step | ours MBU | ours no-cache tok/s ($TOKENS_NOCACHE new) | HF generate tok/s | torch loop tok/s | ours/HF | ours/torch |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for model in $MODELS; do
        for b in $BATCHES; do
            o=$(get "$model" "$b" ours); h=$(get "$model" "$b" hf); t=$(get "$model" "$b" torch)
            nc=$(get "$model" "$b" nocache); [ -n "$NO_NOCACHE" ] && nc="-"
            [ -n "$NO_HF" ] && h="-"
            tm=""; [ -z "$NO_TORCH" ] && [ "$t" != failed ] && tm=" ($(get "$model" "$b" torch_mode))"
            [ -n "$NO_TORCH" ] && t="-"
            echo "| $(label "$model") | $b | $o | $(step_us "$o" "$b") | $(mbu "$model" "$o" "$b") | $nc | $h | $t$tm | $(ratio "$o" "$h") | $(ratio "$o" "$t") |"
        done
    done
    if [ -z "$NO_HF" ] && [ -z "$NO_TORCH" ]; then
        a=""
        for model in $MODELS; do
            for b in $BATCHES; do
                h=$(get "$model" "$b" hf_first); t=$(get "$model" "$b" torch_first)
                if [ "$h" = failed ] || [ "$t" = failed ]; then y="-"; elif [ "$h" = "$t" ]; then y=yes; else y=no; fi
                a="$a${a:+, }$(label "$model") B=$b $y"
            done
        done
        echo
        echo "HF and the torch loop (same weights and prompt ids), the first 16 greedy tokens of row 0 the same: $a" \
            "(a \"no\" can be bf16 rounding: random weights make near-ties)"
    fi
    if [ -z "$NO_PREFILL" ]; then
        echo
        echo "== prefill, batch 1, tok/s = prompt tokens / prefill time (ours: a prompt of $PREFILL_TOKENS and --tokens 1, its" \
            "prefill_tokens / prefill_ms; torch loop and HF: $PEER_PREFILL_TOKENS tokens, HF with the logits of every position)"
        echo
        echo "| model | ours prefill tok/s | torch prefill tok/s | HF prefill tok/s |"
        echo "|---|---|---|---|"
        for model in $MODELS; do
            o=$(get "$model" - ours_prefill); t=$(get "$model" - torch_prefill); h=$(get "$model" - hf_prefill)
            [ "$o" != failed ] && o="$o ($(get "$model" - ours_prefill_tokens) tokens)"
            [ "$t" != failed ] && t="$t ($(get "$model" - torch_prefill_mode))"
            [ -n "$NO_TORCH" ] && t="-"
            [ -n "$NO_HF" ] && h="-"
            echo "| $(label "$model") | $o | $t | $h |"
        done
    fi
    if [ -s "$profiles" ]; then
        echo
        echo "== where ours' decode step goes, op by op (GPT2GEN_PROFILE=1: GPU time between events around each op," \
            "launched one by one without the graph, so each op also carries its launch)"
        cat "$profiles"
    fi
    echo
    echo "($(($(date +%s) - start)) s; logs: $logs/sample-*.log)"
} > "$summary"
cat "$summary"
while read -r flog what; do
    echo
    echo "== $what failed: the end of $flog"
    tail -n 15 "$flog"
done < "$failures"
[ -s "$failures" ] && exit 1
exit 0
