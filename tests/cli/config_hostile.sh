#!/bin/sh
# Hostile configs and command lines: nothing crashes, hangs or writes outside build/ and runs/. Every case ends
# within the time limit (2 s, or 3 s where the watchdog has to stop C code) with exit code 2 and one message
# naming the file, and nothing is written. gpt2gen runs under `timeout 20`, so a hang fails instead of blocking.
. "$(dirname "$0")/../lib.sh"
scratch
MODEL='model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 64, vocab_size = 512 }'
GOOD="$MODEL
train = { batch_size = 2 }"

# verdict NAME RC OUTPUT WANT DIR: exit code 2 in time, WANT and the file's name in the message, nothing in DIR
# but the config (and what the case put there itself: names in $KEEP).
verdict() {
    name=$1; rc=$2; out=$3; want=$4; dir=$5
    extra=$(cd "$dir" && ls -A | grep -v -x -e bad.lua ${KEEP:+-e "$KEEP"})
    if [ "$rc" -eq 124 ]; then fail "$name" "still running after 20 s (a hang)"
    elif [ "$rc" -ne 2 ]; then fail "$name" "exit code $rc, expected 2 (output: $(printf '%s' "$out" | head -c 300))"
    elif ! printf '%s' "$out" | grep -qF -- "$want"; then fail "$name" "message lacks '$want': $(printf '%s' "$out" | head -c 300)"
    elif ! printf '%s' "$out" | grep -qF "bad.lua"; then fail "$name" "message does not name the file: $(printf '%s' "$out" | head -c 300)"
    elif [ -n "$extra" ]; then fail "$name" "wrote $extra despite the error"
    else ok "$name"; fi
}

# hostile NAME CONFIG_TEXT WANT [gpt2gen build options...]
hostile() {
    name=$1; text=$2; want=$3; shift 3
    d="$WORK/$name"; mkdir -p "$d"
    printf '%s\n' "$text" > "$d/bad.lua"
    out=$(cd "$d" && timeout 20 "$GPT2GEN" build bad.lua --arch sm_90 "$@" 2>&1); rc=$?
    verdict "$name" "$rc" "$out" "$want" "$d"
}

LIMIT="ran for more than 2 s"

# ---- Lua code that would run outside the limits
hostile index_loop            "$GOOD
eval = setmetatable({}, {__index = function() while true do end end})" "eval: a table with a metatable is not allowed"
hostile index_error           "$GOOD
eval = setmetatable({}, {__index = function() error('boom') end})" "eval: a table with a metatable is not allowed"
hostile newindex_error_on_set "$GOOD
eval = setmetatable({}, {__newindex = function() error('boom') end})" "eval: a table with a metatable is not allowed" \
    --set eval.val_every=5
hostile tune_metatable        "$GOOD
tune = { layernorm = setmetatable({}, {__index = function() while true do end end}) }" "tune.layernorm: a table with a metatable"
hostile gc_loop               "$GOOD
setmetatable({}, {__gc = function() while true do end end})" "a metatable with __gc is not allowed"
hostile gc_loop_kept          "$GOOD
keep = setmetatable({}, {__gc = function() while true do end end})" "a metatable with __gc is not allowed"
hostile gc_error              "$GOOD
setmetatable({}, {__gc = function() error('boom') end})" "a metatable with __gc is not allowed"
hostile string_metatable      "$GOOD
getmetatable('').__index = function() while true do end end" "attempt to index a boolean value"
hostile env_metatable         "$GOOD
getmetatable(_ENV).__index = function() while true do end end" "attempt to index a boolean value"
hostile pcall_catches_limit   "$GOOD
while true do pcall(function() while true do end end) end" "$LIMIT"
hostile xpcall_handler_loop   "$GOOD
while true do xpcall(function() while true do end end, function() while true do end end) end" "$LIMIT"
hostile close_loop            "$GOOD
do local x <close> = setmetatable({}, {__close = function() while true do end end}) end" "$LIMIT"
hostile pattern_backtracking  "$GOOD
string.find(string.rep('a', 40), string.rep('a?', 40) .. string.rep('a', 40))" "$LIMIT"
hostile gsub_backtracking     "$GOOD
string.gsub(string.rep('a', 40), string.rep('a?', 40) .. string.rep('a', 40) .. 'b', '')" "$LIMIT"
hostile rep_of_empty_string   "$GOOD
local s = string.rep('', 1e18)" "$LIMIT"
hostile table_move_huge       "$GOOD
table.move({}, 1, 1 << 62, 2)" "$LIMIT"
hostile coroutine_unavailable "$GOOD
local co = coroutine.wrap(function() while true do end end) co()" "global 'coroutine'"
hostile deep_recursion        "$GOOD
local function f(n) return 1 + f(n + 1) end f(1)" "stack overflow"
hostile c_stack_recursion     "$GOOD
local function f(s) return (string.gsub(s, '.', f)) end f('aaaa')" "C stack overflow"
hostile huge_string           "$GOOD
local s = string.rep('x', 1 << 40)" "too large"
hostile memory_in_chunks      "$GOOD
local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1 << 24) .. i end" "allocated more than 64 MiB"
hostile error_not_a_string     "$GOOD
error(setmetatable({}, {__tostring = function() while true do end end}))" "raised an error that is not a string (a table)"
hostile override_endless      "$GOOD" "$LIMIT" --set 'train.steps=(function() while true do end end)()'
hostile override_rep_of_empty "$GOOD" "$LIMIT" --set "data.train=(''):rep(1e18)"
hostile override_empty_part   "$GOOD" "--set train.=5: the key has an empty part" --set train.=5
hostile override_no_key       "$GOOD" "--set =5: expected KEY=VALUE" --set =5

# a FIFO as the config: refused before it is opened (opening one would block until a writer came)
d="$WORK/fifo_config"; mkdir -p "$d"
if mkfifo "$d/bad.lua" 2>/dev/null; then
    out=$(cd "$d" && timeout 20 "$GPT2GEN" build bad.lua --arch sm_90 2>&1); rc=$?
    verdict fifo_config "$rc" "$out" "not a regular file" "$d"
else skip fifo_config "mkfifo failed"; fi

# ---- integers: every int key class, beyond int, beyond int64, not finite, not integral
for key in model.n_layer model.n_embd model.max_seq_len train.batch_size train.seq_len train.steps train.warmup \
           train.recompute train.num_gpus eval.val_every eval.sample_tokens checkpoint.every; do
    sec=${key%%.*}; k=${key#*.}
    i=0
    for v in 3e9 2147483648 2^63 -2^63 math.mininteger math.maxinteger 0/0 1/0 -1/0 2.5; do
        i=$((i + 1))
        hostile "int_${key}_$i" "$GOOD
$sec = { $k = $v }" "$key: "
    done
done
for key in train.total_batch_size train.seed; do
    sec=${key%%.*}; k=${key#*.}
    i=0
    for v in 2^63 -2^63 math.mininteger 0/0 1/0 -1/0 2.5; do
        i=$((i + 1))
        hostile "int_${key}_$i" "$GOOD
$sec = { $k = $v }" "$key: "
    done
done
hostile int_message_out_of_range "$GOOD
train = { steps = 3e9 }" "train.steps: 3000000000.0 is out of range: at most 2147483646"
hostile accum_overflows_int   "$GOOD
train = { total_batch_size = 128 * 4294967296 }" "train.total_batch_size: 549755813888 is out of range: at most 274877906816"
hostile total_batch_1e18      "$GOOD
train = { total_batch_size = 1e18 }" "train.total_batch_size: 1000000000000000000 is out of range"
hostile tokens_overflow_int   "$GOOD
train = { batch_size = 2^31 - 1 }" "train.batch_size: batch_size*seq_len*num_gpus = 2147483647*64*1 is out of range"
hostile tokens_overflow_int64 "$GOOD
model = { max_seq_len = 2^31 - 1 }
train = { batch_size = 2^31 - 1, num_gpus = 2^31 - 1 }" "train.batch_size: batch_size*seq_len*num_gpus"
hostile params_overflow       "model = { n_layer = 2, n_head = 2^24, n_embd = 2^30, max_seq_len = 64, vocab_size = 512 }" \
    "model: n_layer=2, n_embd=1073741824"
hostile memory_overflow       "model = { n_layer = 1024, n_head = 8, n_embd = 512, max_seq_len = 2^20, vocab_size = 512 }
train = { batch_size = 1024 }" "of activations per micro-step: out of range"
hostile tune_value_overflow   "$GOOD
tune = { layernorm = { BLOCK_SIZE = { 256, 2^32 } } }" "tune.layernorm.BLOCK_SIZE: expected a positive integer"

# ---- names and paths: nothing leaves build/ or runs/, nothing is cut short
hostile name_dotdot           "$GOOD
name = '..'"                  "name: \"..\" may not start with '.'"
hostile name_dot              "$GOOD
name = '.'"                   "name: \".\" may not start with '.'"
hostile name_hidden           "$GOOD
name = '.hidden'"             "name: \".hidden\" may not start with '.'"
hostile name_slash            "$GOOD
name = 'a/../../b'"           "may hold only letters"
hostile name_nul              "$GOOD
name = 'ok\\0/../../x'"       "name: the string holds a NUL byte"
hostile name_too_long         "$GOOD
name = string.rep('n', 200)"  "name: 200 characters is too long: at most 127"
hostile data_too_long         "$GOOD
data = { train = string.rep('d', 2000) }" "data.train: 2000 characters is too long: at most 1023"
hostile checkpoint_dir_too_long "$GOOD
checkpoint = { dir = string.rep('c', 1024) }" "checkpoint.dir: 1024 characters is too long: at most 1023"
hostile data_nul              "$GOOD
data = { train = 'data/x\\0y' }" "data.train: the string holds a NUL byte"
hostile precision_nul         "$GOOD
precision = 'fp32\\0junk'"    "precision: expected one of fp32, bf16, fp16"
hostile tune_family_too_long  "$GOOD
tune = { [string.rep('f', 40)] = { BLOCK_SIZE = 256 } }" "tune: a family name: 40 characters is too long: at most 31"
hostile arch_junk             "$GOOD
arch = 'sm_90junk'"           "arch: expected \"sm_XX\""

# a config's file name gives the name when the config sets none
for case in .hidden:.hidden.lua "long:$(printf '%0200d' 0).lua"; do
    n=${case%%:*}; f=${case#*:}
    d="$WORK/file_name_$n"; mkdir -p "$d"
    printf '%s\n' "$GOOD" > "$d/$f"
    out=$(cd "$d" && timeout 20 "$GPT2GEN" build "$f" --arch sm_90 2>&1); rc=$?
    KEEP=$f verdict "file_name_$n" "$rc" "$(printf '%s' "$out" | sed "s|$f|bad.lua|")" "(from the file name" "$d"
done

# a config path, and a base's path, longer than CONFIG_PATH_MAX - 1 = 1023 (valid paths: "./" repeated)
d="$WORK/long_path"; mkdir -p "$d"
printf '%s\n' "$GOOD" > "$d/bad.lua"
long=$(printf './%.0s' $(seq 520))bad.lua
out=$(cd "$d" && timeout 20 "$GPT2GEN" build "$long" --arch sm_90 2>&1); rc=$?
verdict config_path_too_long "$rc" "$out" "characters long: at most 1023" "$d"
hostile base_path_too_long    "base '$(printf './%.0s' $(seq 520))x.lua'" "the path is longer than 1023 characters"

# ---- the command line
# many --set options, in both forms (the words of $(sets ...) are the options)
sets() { seq "$2" | sed "s/^/$1train.steps=/"; }
d="$WORK/many_sets"; mkdir -p "$d"; printf '%s\n' "$GOOD" > "$d/bad.lua"
for form in --set= "--set "; do
    tag=$([ "$form" = --set= ] && echo equals || echo space)
    # shellcheck disable=SC2046
    out=$(cd "$d" && timeout 20 "$GPT2GEN" build bad.lua --arch sm_90 $(sets "$form" 5000) 2>&1); rc=$?
    if [ $rc -eq 2 ] && printf '%s' "$out" | grep -qF "more than 64 --set options"; then ok "many_sets_$tag"
    else fail "many_sets_$tag" "rc=$rc: $(printf '%s' "$out" | head -c 300)"; fi
    # shellcheck disable=SC2046
    out=$(cd "$d" && timeout 20 "$GPT2GEN" build bad.lua --arch sm_90 -q $(sets "$form" 64) 2>&1); rc=$?
    if [ $rc -eq 0 ] && grep -q "steps = 64," "$d/build/bad/config.lua"; then ok "sets_up_to_the_limit_$tag"
    else fail "sets_up_to_the_limit_$tag" "rc=$rc: $(printf '%s' "$out" | head -c 300)"; fi
    rm -rf "$d/build"
done
# shellcheck disable=SC2046
out=$(cd "$d" && timeout 20 "$GPT2GEN" build bad.lua --arch sm_90 $(sets --set= 64) --resume 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -qF "more than 64 --set options"; then ok resume_past_the_limit
else fail resume_past_the_limit "rc=$rc: $(printf '%s' "$out" | head -c 300)"; fi

# usage errors: exit code 2, the option named, nothing written
usage() {
    name=$1; want=$2; shift 2
    d="$WORK/$name"; mkdir -p "$d"; printf '%s\n' "$GOOD" > "$d/bad.lua"
    out=$(cd "$d" && timeout 20 "$GPT2GEN" build bad.lua "$@" 2>&1); rc=$?
    if [ $rc -eq 2 ] && printf '%s' "$out" | grep -qF -- "$want" && [ ! -e "$d/build" ]; then ok "$name"
    else fail "$name" "rc=$rc: $(printf '%s' "$out" | head -c 300)"; fi
}
usage set_without_value   "option '--set' needs a value" --arch sm_90 --set
usage jobs_not_a_number   "-j: expected a number of parallel compiles from 1 to 1024, got 'abc'" --arch sm_90 -j abc
usage jobs_too_many       "-j: expected a number of parallel compiles from 1 to 1024, got '99999999999'" --arch sm_90 -j 99999999999
usage arch_too_long       "--arch: expected sm_XX with XX >= 70 (e.g. sm_90), got 'sm_90xxxxxxxxxxxxxxxx'" --arch sm_90xxxxxxxxxxxxxxxx

finish
