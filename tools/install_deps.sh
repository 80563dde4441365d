#!/bin/sh
# Installs what gpt2gen needs on Debian/Ubuntu (run as root): a C compiler and make, Lua 5.4 (linked
# statically into ./gpt2gen), the fortunes text for the default data set, and tiktoken, numpy, safetensors,
# zstd (the command, for prepare's tests) and procps (pgrep) (tests only). numpy comes from Debian for its python3 and
# from PyPI where the python3 on PATH is another one (pyenv's, say), which does not see Debian's packages.
# It says what it installs, and installs no CUDA: with the CUDA toolkit (12 or 13) and cuDNN 9's headers at
# $CUDA_HOME (default /usr/local/cuda), `make` builds the CUDA backend; without them, a CPU-only gpt2gen (it says so).
set -eu
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
need=""
for p in build-essential liblua5.4-dev libjansson-dev libzstd-dev zlib1g-dev zstd fortunes python3-pip python3-numpy procps; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
    echo "install_deps: apt-get install$need"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
fi
# pip_install MODULE: from PyPI where python3 lacks it; where pip refuses to touch the system's Python (PEP 668),
# again with --break-system-packages, saying so
pip_install() {
    python3 -c "import $1" 2>/dev/null && return 0
    echo "install_deps: pip install $1"
    out=$(python3 -m pip install -q "$1" 2>&1) && return 0
    case $out in *externally-managed*) ;; *) printf '%s\n' "$out" >&2; return 1 ;; esac
    echo "install_deps: pip install --break-system-packages $1 (Debian's Python is externally managed)"
    python3 -m pip install -q --break-system-packages "$1"
}
pip_install numpy
pip_install tiktoken
pip_install safetensors
# what the Makefile looks for (cuDNN's header there or on the compiler's path)
if [ ! -f "$CUDA_HOME/include/cuda.h" ] || [ ! -f "$CUDA_HOME/include/cublasLt.h" ]; then
    echo "install_deps: no CUDA toolkit at $CUDA_HOME: building the CPU-only gpt2gen (install CUDA 12/13 and cuDNN 9"
    echo "install_deps: headers, or set CUDA_HOME, for the GPU)"
elif ! printf '#include <cudnn_graph.h>\n' | cc -I"$CUDA_HOME/include" -E -x c - >/dev/null 2>&1; then
    echo "install_deps: no cuDNN 9 headers (cudnn_graph.h) at $CUDA_HOME/include: building the CPU-only gpt2gen"
    echo "install_deps: (install cuDNN 9's development files for the GPU; its library is loaded at run time)"
fi
echo "install_deps: ok"
