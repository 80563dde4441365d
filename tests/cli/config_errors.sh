#!/bin/sh
# Every kind of bad config gets one clear message (file, key, what was expected), exit code 2, and
# nothing written to build/.
. "$(dirname "$0")/../lib.sh"
scratch
# A minimal valid config body to derive bad ones from.
GOOD_MODEL='model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 64, vocab_size = 512 }'
GOOD_TRAIN='train = { batch_size = 2, seq_len = 32 }'

# expect_error NAME CONFIG_TEXT EXPECTED_SUBSTRING [gpt2gen build options...]
expect_error() {
    name=$1; text=$2; want=$3; shift 3
    d="$WORK/$name"; mkdir -p "$d"
    printf '%s\n' "$text" > "$d/bad.lua"
    out=$(cd "$d" && "$GPT2GEN" build bad.lua --arch sm_90 "$@" 2>&1); rc=$?
    if [ $rc -ne 2 ]; then fail "$name" "exit code $rc, expected 2 (output: $out)"
    elif ! printf '%s' "$out" | grep -qF -- "$want"; then fail "$name" "message lacks '$want': $out"
    elif ! printf '%s' "$out" | grep -qF "bad.lua"; then fail "$name" "message does not name the file: $out"
    elif [ -e "$d/build" ]; then fail "$name" "wrote build/ despite the error"
    elif [ "$(printf '%s\n' "$out" | wc -l)" -gt 3 ]; then fail "$name" "more than one short message: $out"
    else ok "$name"; fi
}

expect_error unknown_top_key      "modle = {}
$GOOD_MODEL"                       "modle: unknown key (did you mean 'model'?)"
expect_error unknown_nested_key   "$GOOD_MODEL
train = { stepz = 10 }"            "train.stepz: unknown key (did you mean 'steps'?)"
expect_error wrong_type_number    "$GOOD_MODEL
train = { lr = 'fast' }"           "train.lr: expected a number, got \"fast\""
expect_error wrong_type_table     "model = 12"                       "model: missing; expected model = {"
expect_error wrong_type_string    "$GOOD_MODEL
data = { train = 5 }"              "data.train: expected a string, got 5"
expect_error wrong_type_bool      "$GOOD_MODEL
checkpoint = { resume = 1 }"       "checkpoint.resume: expected true or false, got 1"
expect_error missing_shape        "model = { n_layer = 2, n_head = 2 }" "model.n_embd: missing"
expect_error non_positive_size    "model = { n_layer = 0, n_head = 2, n_embd = 64 }" "model.n_layer: expected a positive integer, got 0"
expect_error negative_size        "$GOOD_MODEL
train = { batch_size = -3 }"       "train.batch_size: expected a positive integer, got -3"
expect_error non_integer_size     "model = { n_layer = 2.5, n_head = 2, n_embd = 64 }" "model.n_layer: expected an integer, got 2.5"
expect_error embd_not_divisible   "model = { n_layer = 2, n_head = 3, n_embd = 64 }" "model.n_embd: 64 is not divisible by model.n_head 3"
expect_error head_size_unsupported "model = { n_layer = 2, n_head = 16, n_embd = 64 }" "head size n_embd/n_head = 4 is not supported"
expect_error embd_unsupported     "model = { n_layer = 2, n_head = 1, n_embd = 40 }" "model.n_embd: 40 is not supported"
expect_error seq_len_too_long     "$GOOD_MODEL
train = { seq_len = 128 }"         "train.seq_len: 128 is larger than model.max_seq_len 64"
expect_error total_batch_multiple "$GOOD_MODEL
$GOOD_TRAIN
train = { total_batch_size = 100 }" "train.total_batch_size: 100 is not a multiple of batch_size*seq_len*num_gpus"
expect_error unknown_precision    "$GOOD_MODEL
precision = 'fp8'"                 "precision: expected one of fp32, bf16, fp16, got \"fp8\""
expect_error unknown_schedule     "$GOOD_MODEL
train = { schedule = 'exp' }"      "train.schedule: expected one of cosine, linear, constant, wsd, got \"exp\""
expect_error lua_syntax_error     "$GOOD_MODEL
train = { steps = }"               "bad.lua:2:"
expect_error lua_runtime_error    "$GOOD_MODEL
local x = nil
train = { steps = x.y }"           "bad.lua:3:"
expect_error endless_loop         "while true do end"                 "ran for more than"
expect_error unbounded_memory     "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1 << 20) .. i end" "allocated more than"
expect_error sandbox_no_os        "os.execute('touch pwned')"         "global 'os'"
expect_error sandbox_no_io        "io.open('x', 'w')"                 "global 'io'"
expect_error sandbox_no_require   "require('os')"                     "global 'require'"
expect_error sandbox_no_load      "load('return 1')()"                "global 'load'"
expect_error sandbox_no_dofile    "dofile('/etc/passwd')"             "global 'dofile'"
expect_error base_missing         "base 'nope.lua'"                   "no such file"
expect_error unknown_tune_family  "$GOOD_MODEL
tune = { layrnorm = { BLOCK_SIZE = 128 } }" "tune.layrnorm: no such kernel family"
expect_error unknown_tunable      "$GOOD_MODEL
tune = { layernorm = { BLOCK = 128 } }" "tune.layernorm.BLOCK: templates/layernorm.cu has no such tunable"
expect_error tune_not_multiple_of_32 "$GOOD_MODEL" \
    "tune.layernorm.BLOCK_SIZE: 100 is not allowed; the allowed values are a multiple of 32 from 32 to 1024" \
    --set tune.layernorm.BLOCK_SIZE=100
expect_error tune_too_large "$GOOD_MODEL" \
    "tune.layernorm.BLOCK_SIZE: 4096 is not allowed; the allowed values are a multiple of 32 from 32 to 1024" \
    --set tune.layernorm.BLOCK_SIZE=4096
expect_error tune_candidate_out_of_range "$GOOD_MODEL
tune = { bias = { ROW_SPLITS = { 16, 70000 } } }" "tune.bias.ROW_SPLITS: 70000 is not allowed; the allowed values are an integer from 1 to 65535"
expect_error tune_value_overflows_int "$GOOD_MODEL
tune = { layernorm = { BLOCK_SIZE = 4294967424 } }" "tune.layernorm.BLOCK_SIZE: expected a positive integer"
expect_error tune_name_not_a_string "$GOOD_MODEL
tune = { layernorm = { 256 } }" "tune.layernorm: expected NAME = value entries with string names"
expect_error bad_override         "$GOOD_MODEL"                       "train.steps: expected an integer, got \"abc\"" --set train.steps=abc
expect_error override_unknown_key "$GOOD_MODEL"                       "train.step: unknown key (did you mean 'steps'?)" --set train.step=5
expect_error bad_arch             "$GOOD_MODEL
arch = 'gfx90a'"                   "arch: expected \"sm_XX\""
expect_error bad_name             "$GOOD_MODEL
name = '../escape'"                "name: \"../escape\" may hold only"

# a cycle of bases
d="$WORK/base_cycle"; mkdir -p "$d"
echo 'base "b.lua"' > "$d/a.lua"; echo 'base "a.lua"' > "$d/b.lua"
out=$(cd "$d" && "$GPT2GEN" build a.lua --arch sm_90 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "cycle"; then ok base_cycle; else fail base_cycle "rc=$rc: $out"; fi

# a missing config file
out=$("$GPT2GEN" build "$WORK/none.lua" 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "none.lua: no such config file"; then ok missing_file; else fail missing_file "rc=$rc: $out"; fi

# A path with a name longer than the file system allows is said so, not "no such file"
out=$("$GPT2GEN" build "$WORK/$(printf '%0300d' 0).lua" 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "longer than the file system allows"; then ok name_too_long
else fail name_too_long "rc=$rc: $(printf '%s' "$out" | tail -c 300)"; fi

# A config file over its limit (1 MiB) is one message naming it and the limit, before it is read
head -c 1100000 /dev/zero | tr '\0' ' ' > "$WORK/huge.lua"
out=$("$GPT2GEN" build "$WORK/huge.lua" --arch sm_90 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q "huge.lua: 1100000 bytes, more than the 1 MiB such a file may have"; then ok config_size_limit
else fail config_size_limit "rc=$rc: $out"; fi

# the architecture's keys (docs/config.md, "model"): each value checked, naming the key
M2='n_layer = 2, n_head = 4, n_embd = 64, max_seq_len = 64, vocab_size = 512'
expect_error bad_norm             "model = { $M2, norm = 'batchnorm' }"  "model.norm: expected one of layernorm, rmsnorm"
expect_error bad_position         "model = { $M2, position = 'alibi' }"  "model.position: expected one of learned, rope"
expect_error bad_mlp              "model = { $M2, mlp = 'geglu' }"       "model.mlp: expected one of gelu, relu2, swiglu"
expect_error kv_head_not_divisor  "model = { $M2, n_kv_head = 3 }"       "model.n_kv_head: 3 does not divide model.n_head 4"
expect_error bad_norm_eps         "model = { $M2, norm_eps = 0 }"        "model.norm_eps: expected a number in (0, 1), got 0"
expect_error bad_rope_theta       "model = { $M2, rope_theta = 0 }"      "model.rope_theta: expected a number > 0, got 0"
expect_error negative_softcap     "model = { $M2, logit_softcap = -1 }"  "model.logit_softcap: expected a finite number >= 0"
expect_error bad_n_ffn            "model = { $M2, n_ffn = 100 }"         "model.n_ffn: 100 is not supported; expected a multiple of 32"
expect_error bias_not_bool        "model = { $M2, bias = 'no' }"         "model.bias: expected true or false, got \"no\""


# User strings in messages are cut at 200 characters with "...", and the reason is always there
long=$(printf '%05000d' 0)
d="$WORK/msg"; mkdir -p "$d"; printf '%s\n%s\n' "$GOOD_MODEL" "$GOOD_TRAIN" > "$d/ok.lua"
check_short() {  # NAME RC WANT OUTPUT
    if [ "$2" -eq 2 ] && printf '%s' "$4" | grep -qF -- "$3" && printf '%s' "$4" | grep -qF "00000..." \
       && [ "$(printf '%s' "$4" | wc -c)" -lt 1200 ]; then ok "$1"
    else fail "$1" "rc=$2, $(printf '%s' "$4" | wc -c) bytes: $(printf '%s' "$4" | tail -c 300)"; fi
}
out=$("$GPT2GEN" build "$WORK/$long.lua" 2>&1); check_short long_config_path $? "the config path is 5" "$out"
out=$(cd "$d" && "$GPT2GEN" build ok.lua --arch sm_90 --set "train.$long=1" 2>&1); check_short long_set_key $? ": unknown key" "$out"
out=$("$GPT2GEN" build "$d/ok.lua" --arch "sm_$long" 2>&1); check_short long_arch $? "expected sm_XX" "$out"
out=$("$GPT2GEN" build "$d/ok.lua" "--x$long" 2>&1); check_short long_unknown_option $? "unknown option" "$out"

finish
