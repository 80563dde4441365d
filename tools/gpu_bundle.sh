#!/bin/sh
# tools/gpu_bundle.sh: the built programs, for a GPU machine that is sent a copy of the source tree but not its
# build (a lent runner whose upload is limited in size, with no compiler or no time to build).
#   pack     ./gpt2gen and the test programs of build/tests, stripped, into one gzip'd tar: about 25 MB against
#            150 MB as built. Run `make gpt2gen tests-bin` first.
#   unpack   (on the GPU machine, in the repository root) puts them back where `make test-gpu`'s scripts and bench/
#            expect them: ./gpt2gen and build/tests/. Then `sh tests/gpu.sh` (make test-gpu without make) and the
#            benchmarks run as on the machine that built them; gpt2gen compiles the kernels there, with NVRTC.
# The bundle is $GPU_BUNDLE, default build/gpu-bundle.tgz; pack writes it whole or not at all. Also needed there,
# and ignored by git: the default data set (data/fortunes, data/gpt2.tiktoken).
cd "$(dirname "$0")/.." || exit 1
bundle=${GPU_BUNDLE:-build/gpu-bundle.tgz}
die() { echo "gpu_bundle: $*" >&2; exit 1; }
pack() {
    [ -x gpt2gen ] && [ -x build/tests/test_gpu ] || die "no ./gpt2gen or build/tests/test_gpu here: run make gpt2gen tests-bin first"
    command -v strip > /dev/null || die "no strip here (binutils)"
    stage=$(mktemp -d) || die "cannot make a temporary folder"
    trap 'rm -rf "$stage"' EXIT
    mkdir -p "$stage/tests" && cp gpt2gen "$stage/" && cp build/tests/* "$stage/tests/" || die "cannot copy the programs"
    for f in "$stage/gpt2gen" "$stage"/tests/*; do
        case $f in *.so) strip --strip-unneeded "$f" ;; *) strip "$f" ;; esac || die "strip failed on $f"
    done
    mkdir -p "$(dirname "$bundle")" && tar czf "$bundle.part" -C "$stage" . && mv "$bundle.part" "$bundle" ||
        { rm -f "$bundle.part"; die "cannot write $bundle"; }
    echo "gpu_bundle: $bundle: $(ls "$stage/tests" | wc -l | tr -d ' ') test programs and gpt2gen, $(du -k "$bundle" | cut -f1) KiB"
}
unpack() {
    [ -f "$bundle" ] || die "no bundle $bundle: make it with \`sh tools/gpu_bundle.sh pack\` where the programs are built"
    stage=$(mktemp -d) || die "cannot make a temporary folder"
    trap 'rm -rf "$stage"' EXIT
    tar xzf "$bundle" -C "$stage" 2> "$stage.err" || { cat "$stage.err" >&2; rm -f "$stage.err"; die "$bundle: not a gzip'd tar"; }
    rm -f "$stage.err"
    [ -f "$stage/gpt2gen" ] && [ -d "$stage/tests" ] || die "$bundle: no gpt2gen and tests/ in it (not made by pack?)"
    mkdir -p build/tests && cp "$stage"/tests/* build/tests/ && cp "$stage/gpt2gen" gpt2gen.part && mv gpt2gen.part gpt2gen ||
        die "cannot put the programs in place"
    echo "gpu_bundle: ./gpt2gen and $(ls "$stage/tests" | wc -l | tr -d ' ') programs in build/tests from $bundle"
}
case ${1:-} in
pack) pack ;;
unpack) unpack ;;
*) echo "usage: sh tools/gpu_bundle.sh pack|unpack   (the bundle: \$GPU_BUNDLE, default build/gpu-bundle.tgz)" >&2; exit 2 ;;
esac
