#!/bin/sh
# Installs what gpt2gen needs on Debian/Ubuntu (run as root): a C compiler and make, Lua 5.4 (linked
# statically into ./gpt2gen), the fortunes text for the default data set, and tiktoken and procps (pgrep: tests
# only).
# The CUDA toolkit (NVRTC headers and library, cuDNN 9's headers) must already be at $CUDA_HOME (default
# /usr/local/cuda).
set -eu
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
need=""
for p in build-essential liblua5.4-dev libjansson-dev libzstd-dev zlib1g-dev fortunes python3-pip procps; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
    echo "install_deps: apt-get install$need"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
fi
python3 -c "import tiktoken" 2>/dev/null || python3 -m pip install -q tiktoken 2>/dev/null \
    || python3 -m pip install -q --break-system-packages tiktoken
if [ ! -f "$CUDA_HOME/include/nvrtc.h" ]; then
    echo "install_deps: no CUDA toolkit at $CUDA_HOME (need include/nvrtc.h and lib64/libnvrtc.so);" >&2
    echo "install_deps: install CUDA 12 or 13, or set CUDA_HOME" >&2
    exit 1
fi
if [ ! -f "$CUDA_HOME/include/cudnn_graph.h" ]; then
    echo "install_deps: no cuDNN 9 headers at $CUDA_HOME/include (cudnn_graph.h): install cuDNN 9's development" >&2
    echo "install_deps: files (the library itself is loaded at run time, only where there is a GPU)" >&2
    exit 1
fi
echo "install_deps: ok"
