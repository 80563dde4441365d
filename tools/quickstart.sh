#!/bin/sh
# The README's first command: install what is missing, build, make the default data set, and train the
# tiny model on it (on the GPU if there is one, else on the CPU backend).
set -eu
cd "$(dirname "$0")/.."
sh tools/install_deps.sh
make -j"$(nproc)"
sh tools/setup_data.sh
exec ./gpt2gen configs/tiny.lua "$@"
