# tests/train_env.sh: what the CPU training tests (tests/cli/train.sh, tests/cli/run_dir.sh) share, sourced
# after tests/lib.sh: a scratch folder ($WORK), the repository root as the working folder, the default data set
# (or one failure saying how to make it), and M, the micro config.
scratch
cd "$ROOT" || exit 1
if [ ! -f data/fortunes/train_000000.bin ]; then
    fail default_data "data/fortunes is missing: run \`make data\` first"; finish
fi
M=tests/configs/micro.lua
