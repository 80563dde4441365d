#!/bin/sh
# The README's first command: install what is missing, build, make the default data set, and train the
# tiny model on it (on the GPU if there is one, else on the CPU backend). Arguments go to gpt2gen train
# (e.g. --set train.steps=50). Run again, it goes on where it can: an unfinished run in runs/tiny (stopped with
# Ctrl-C) continues, a finished one starts over (gpt2gen train --again), and the first lines say which.
set -eu
cd "$(dirname "$0")/.."
sh tools/install_deps.sh
make -j"$(nproc)"
sh tools/setup_data.sh
exec ./gpt2gen train configs/tiny.lua --again "$@"
