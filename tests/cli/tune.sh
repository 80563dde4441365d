#!/bin/sh
# The tuning database as `gpt2gen build` sees it, without a GPU (the test hook GPT2GEN_TUNE_ENV names the machine):
# a build takes the database's choice and says so in one line; --no-tune-db ignores it; the config's own tune value
# wins; a stale record (another GPU) and a corrupt line are reported and ignored, never fatal; a missing database is
# reported; a database past its size limit is refused at once, a binary one gets one line, a CRLF line is a record;
# the database's cuDNN attention path gives way to the template on the CPU backend under attention = "auto". And
# `gpt2gen tune` itself: its usage errors (the plans' options too), and a clear message without a GPU.
. "$(dirname "$0")/../lib.sh"
scratch
cd "$WORK" || exit 1
cp -r "$ROOT/configs" configs
export GPT2GEN_TUNE_DB="$WORK/tune-db.txt"
export GPT2GEN_TUNE_ENV="gpu=TestGPU arch=sm_90 driver=13000 cuda=13000 nvrtc=13.0 cudnn=none"
hash=$(cat "$ROOT/templates/common.cuh" "$ROOT/templates/gelu.cu" | sha256sum | cut -c1-16)
key="template=$hash shape=B8,T64,C128,NH4,L4,V50257,maxT64,recompute1 precision=fp32"
env_key="gpu=TestGPU arch=sm_90 driver=13000 cuda=13000 nvrtc=13.0 cudnn=none"
gelu_block() { sed -n 's/^constexpr int BLOCK_SIZE = \([0-9]*\);.*/\1/p' build/tiny/kernels/gelu.cu; }

# missing database: said, default variants
out=$("$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "tune db .*tune-db.txt: not found" && [ "$(gelu_block)" = 256 ]; then ok missing_db
else fail missing_db "rc=$rc: $out"; fi

# the database's choice is used, and the build says so
printf '# a comment\nbest kernel gelu BLOCK_SIZE=512 us=10.000 status=ok default_us=12.000 %s %s\n' "$env_key" "$key" > tune-db.txt
out=$("$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c '^tune db')" = 1 ] &&
   printf '%s' "$out" | grep -q "tune db .*: 1 kernel family from the database, for TestGPU" && [ "$(gelu_block)" = 512 ] &&
   grep -q "BLOCK_SIZE *= 512 *(tune-db" build/tiny/plan.txt; then ok build_uses_db
else fail build_uses_db "rc=$rc, gelu BLOCK_SIZE $(gelu_block): $out"; fi

# --no-tune-db
out=$("$GPT2GEN" build configs/tiny.lua --no-tune-db 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "not used (--no-tune-db)" && [ "$(gelu_block)" = 256 ]; then ok no_tune_db
else fail no_tune_db "rc=$rc, gelu BLOCK_SIZE $(gelu_block): $out"; fi

# the config's tune value wins over the database
out=$("$GPT2GEN" build configs/tiny.lua --set tune.gelu.BLOCK_SIZE=128 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(gelu_block)" = 128 ] && printf '%s' "$out" | grep -q "1 tunable set by the config kept"; then
    ok config_wins
else fail config_wins "rc=$rc, gelu BLOCK_SIZE $(gelu_block): $out"; fi

# stale: another GPU, another precision
out=$(GPT2GEN_TUNE_ENV="gpu=OtherGPU arch=sm_90 driver=13000 cuda=13000 nvrtc=13.0 cudnn=none" "$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "tune-db.txt:2: kernel gelu is for another GPU: gpu=TestGPU (here OtherGPU); ignored" &&
   [ "$(gelu_block)" = 256 ]; then ok stale_gpu
else fail stale_gpu "rc=$rc, gelu BLOCK_SIZE $(gelu_block): $out"; fi
out=$("$GPT2GEN" build configs/tiny.lua --set precision=bf16 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "another precision" && [ "$(gelu_block)" = 256 ]; then ok stale_precision
else fail stale_precision "rc=$rc: $out"; fi

# corrupt lines: reported with their line, the good record still used
printf 'best kernel gelu BLOCK_SIZE=512 us=banana status=ok\n\001\002garbage\nbest kernel gelu BLOCK_SIZE=1024 us=3' >> tune-db.txt
out=$("$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "tune-db.txt:3: us: 'banana' is not a time; line ignored" &&
   printf '%s' "$out" | grep -q "tune-db.txt:4: " && printf '%s' "$out" | grep -q "tune-db.txt:5: the last line is cut short" &&
   [ "$(gelu_block)" = 512 ]; then ok corrupt_lines
else fail corrupt_lines "rc=$rc, gelu BLOCK_SIZE $(gelu_block): $out"; fi
head -c 100 /dev/urandom > tune-db.txt
out=$("$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(gelu_block)" = 256 ]; then ok garbage_file; else fail garbage_file "rc=$rc: $out"; fi
mkdir -p dbdir
out=$(GPT2GEN_TUNE_DB="$WORK/dbdir" "$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "tune db .*dbdir: .*default variants"; then ok db_is_a_folder
else fail db_is_a_folder "rc=$rc: $out"; fi

# past the size limit (a sparse 5 GB file): refused at once, in one line naming it and the limit; the build goes on
truncate -s 5G tune-db.txt
out=$("$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c 'tune-db.txt')" = 2 ] &&
   printf '%s' "$out" | grep -q "tune-db.txt: 5368709120 bytes, past the tuning database's limit of 4 MiB" &&
   [ "$(gelu_block)" = 256 ]; then ok oversized_db
else fail oversized_db "rc=$rc: $(printf '%s' "$out" | head -c 2000)"; fi
# a binary file: one line for it, not one per line; a CRLF record is still a record
{ head -c 200000 /dev/urandom | tr '\n#' 'xy'; printf '\n'; head -c 200000 /dev/zero | tr '\0' '\n' | sed 's/^/\x01/'; } > tune-db.txt
printf 'best kernel gelu BLOCK_SIZE=512 us=10.000 status=ok %s %s\r\n' "$env_key" "$key" >> tune-db.txt
out=$("$GPT2GEN" build configs/tiny.lua 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c 'corrupt')" = 1 ] &&
   printf '%s' "$out" | grep -q "tune-db.txt: 200001 corrupt lines ignored, the first at line 1" && [ "$(gelu_block)" = 512 ]; then
    ok binary_db_one_line
else fail binary_db_one_line "rc=$rc, gelu BLOCK_SIZE $(gelu_block): $(printf '%s' "$out" | head -c 2000)"; fi
# the database's attention path is the plan's: cudnn from the database with attention = "auto" trains on the CPU,
# whose plan has no cuDNN: the template, saying why
ahash=$(cat "$ROOT/templates/common.cuh" "$ROOT/templates/attention.cu" | sha256sum | cut -c1-16)
printf 'best attention path path=cudnn us=1.000 status=ok %s template=%s shape=B4,T32,C64,NH2,L2,V50257,maxT32,recompute1 precision=fp32\n' \
    "$env_key" "$ahash" > tune-db.txt
mkdir -p tests && cp -r "$ROOT/tests/configs" tests/configs && ln -s "$ROOT/data" data
backend=auto   # without a GPU, auto is the CPU backend (where the refusal of an explicit "cudnn" is said)
if nvidia-smi >/dev/null 2>&1; then backend=cpu; fi
out=$("$GPT2GEN" train tests/configs/micro.lua --backend $backend --set train.steps=1 --set checkpoint.dir="$WORK/attn" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "attention: the flash template runs, not the tuning database's cuDNN: no cuDNN" &&
   printf '%s' "$out" | grep -q "the attention path (flash) from the database" &&
   ! printf '%s' "$out" | grep -q 'needs the CUDA backend'; then ok "db_cudnn_trains_on_cpu (--backend $backend)"
else fail db_cudnn_trains_on_cpu "rc=$rc: $out"; fi

# gpt2gen tune: help, usage errors, and no GPU
out=$("$GPT2GEN" tune --help); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "usage: gpt2gen tune CONFIG.lua"; then ok tune_help; else fail tune_help "rc=$rc"; fi
out=$("$GPT2GEN" tune configs/tiny.lua --budget soon 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "budget: expected seconds"; then ok tune_bad_budget; else fail tune_bad_budget "rc=$rc: $out"; fi
out=$("$GPT2GEN" tune configs/tiny.lua --algos 99 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "algos: expected 1 to 32"; then ok tune_bad_algos; else fail tune_bad_algos "rc=$rc: $out"; fi
# the plans' options: one message naming the option and what it takes, exit code 2, before anything runs
for bad in "--only sample" "--only train,train" "--decode-rows 0" "--decode-rows 1,2,3,4,5,6,7,8,9" "--eval-rows many" "--eval-T 64,"; do
    set -- $bad
    out=$("$GPT2GEN" tune configs/tiny.lua "$1" "$2" 2>&1); rc=$?
    if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && printf '%s' "$out" | grep -q "^gpt2gen tune: $1: expected .*, got '$2'"
    then ok "tune_bad_option ($bad)"; else fail "tune_bad_option ($bad)" "rc=$rc: $out"; fi
done
out=$("$GPT2GEN" tune --help); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q -- "--only PLANS" && printf '%s' "$out" | grep -q -- "--decode-rows" &&
   printf '%s' "$out" | grep -q -- "--eval-T"; then ok tune_help_plans; else fail tune_help_plans "rc=$rc"; fi
if nvidia-smi >/dev/null 2>&1; then skip tune_no_gpu "there is a GPU here"
else
    # one message, one clause: no arch line before it, no "needs a GPU: no GPU: ... not found (...: cannot open ...)"
    out=$(env -u GPT2GEN_TUNE_ENV "$GPT2GEN" tune configs/tiny.lua 2>&1); rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "gpt2gen tune: needs a GPU" && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] &&
       ! printf '%s' "$out" | grep -q "no GPU" && [ "$(printf '%s' "$out" | grep -o 'libcuda' | wc -l)" -le 1 ]
    then ok tune_no_gpu; else fail tune_no_gpu "rc=$rc: $out"; fi
fi
finish
