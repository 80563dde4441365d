#!/bin/sh
# Build time of the generator: a cold build of a config (empty CUBIN cache) and a warm one (nothing
# changed), each the best of 3. Usage: bench/build_time.sh [CONFIG.lua] [ARCH]
# The peer is llm.c's own nvcc build, 15 s (+151 s for its cuDNN unit) on the same 2-core machine, as
# measured there (docs/kernels-and-tuning.md, "The build"); our targets: cold < 10 s, warm < 0.5 s.
cd "$(dirname "$0")/.." || exit 1
cfg=${1:-configs/gpt2-124M.lua}; arch=${2:-sm_90}
[ -x ./gpt2gen ] || make -s gpt2gen || exit 1
tmp=$(mktemp -d)
best() { sort -n | head -1; }
cold=$(for i in 1 2 3; do
    rm -rf "$tmp/cache"
    GPT2GEN_CACHE="$tmp/cache" ./gpt2gen build "$cfg" --arch "$arch" | sed -n 's/.* \([0-9.]*\) s$/\1/p'
done | best)
warm=$(for i in 1 2 3; do
    s=$(date +%s.%N); GPT2GEN_CACHE="$tmp/cache" ./gpt2gen build "$cfg" --arch "$arch" -q; e=$(date +%s.%N)
    awk "BEGIN { printf \"%.3f\\n\", $e - $s }"
done | best)
modules=$(find build/$(basename "$cfg" .lua)/kernels -name "*.cu" | wc -l)
echo "config $cfg, arch $arch, $modules kernel families (every plan), $(nproc) cores"
echo "cold build (compile everything): $cold s   (target < 10 s)"
echo "warm build (all from cache, whole process): $warm s   (target < 0.5 s)"
rm -rf "$tmp"
