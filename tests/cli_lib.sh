# Helpers for the shell tests in tests/cli/: each test prints "ok   name" or "FAIL name: why", and the
# script ends with "RESULT passed failed skipped" (tests/run.sh adds these up).
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GPT2GEN="$ROOT/gpt2gen"
PASSED=0; FAILED=0; SKIPPED=0
ok()   { PASSED=$((PASSED + 1)); echo "ok   $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "skip $1: $2"; }
finish() { echo "RESULT $PASSED $FAILED $SKIPPED"; rm -rf "$WORK"; }
# Every test runs in a fresh scratch folder with its own CUBIN cache.
WORK=$(mktemp -d)
export GPT2GEN_CACHE="$WORK/cache"
unset GPT2GEN_TEMPLATES
# A minimal valid config body to derive bad ones from.
GOOD_MODEL='model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 64, vocab_size = 512 }'
GOOD_TRAIN='train = { batch_size = 2, seq_len = 32 }'
