#!/bin/sh
# Makes the default data set, skipping any step already done:
#   1. GPT-2's BPE ranks, data/gpt2.tiktoken, taken from the openai-whisper source package on PyPI
#      (whisper ships them as whisper/assets/gpt2.tiktoken; the download is cached in data/.cache);
#   2. data/fortunes/{train,val}_*.bin and tokenizer.bin: the fortunes package's English text files,
#      tokenized by `gpt2gen prepare`.
# Usage: tools/setup_data.sh [--force]     (--force redoes step 2)
# Needs: python3 -m pip (network to PyPI, first run only), tar, and the fortunes package
# (apt-get install fortunes); builds ./gpt2gen with make when it is missing.
set -eu
cd "$(dirname "$0")/.."

WHISPER_VERSION=20250625
SDIST=data/.cache/openai_whisper-$WHISPER_VERSION.tar.gz
MEMBER=openai_whisper-$WHISPER_VERSION/whisper/assets/gpt2.tiktoken
RANKS=data/gpt2.tiktoken
RANKS_SHA256=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930   # the file of that release
FORTUNES=${FORTUNES_DIR:-/usr/share/games/fortunes}
OUT=data/fortunes
force=0
case "${1:-}" in
    --force) force=1 ;;
    "") ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup_data.sh: unknown argument '$1' (see tools/setup_data.sh --help)" >&2; exit 2 ;;
esac

say() { echo "setup_data: $*"; }
die() { echo "setup_data: $*" >&2; exit 1; }

# ---- 1. the ranks ----
if [ -f "$RANKS" ]; then
    say "$RANKS present"
else
    mkdir -p data/.cache
    if [ ! -f "$SDIST" ]; then
        say "downloading openai-whisper==$WHISPER_VERSION (source package) into data/.cache"
        python3 -m pip download --quiet --no-deps --no-binary :all: "openai-whisper==$WHISPER_VERSION" -d data/.cache \
            || die "pip download of openai-whisper==$WHISPER_VERSION failed (network to PyPI needed once)"
        [ -f "$SDIST" ] || die "pip did not leave $SDIST"
    fi
    tar -xzf "$SDIST" -O "$MEMBER" > "$RANKS.tmp" || { rm -f "$RANKS.tmp"; die "$SDIST holds no $MEMBER"; }
    mv "$RANKS.tmp" "$RANKS"
    say "extracted $RANKS"
fi
if command -v sha256sum >/dev/null 2>&1; then
    sum=$(sha256sum "$RANKS" | cut -d' ' -f1)
    [ "$sum" = "$RANKS_SHA256" ] || die "$RANKS has sha256 $sum, expected $RANKS_SHA256 (delete it to fetch it again)"
fi

# ---- 2. the token shards ----
[ -d "$FORTUNES" ] || die "no $FORTUNES: install the fortunes package (apt-get install fortunes)"
inputs=""
for f in "$FORTUNES"/*; do
    case "$f" in *.dat|*.u8) continue ;; esac     # index files and symlinks to the text files
    [ -f "$f" ] && inputs="$inputs $f"
done
[ -n "$inputs" ] || die "no fortune text files in $FORTUNES"
[ -x ./gpt2gen ] || { say "building gpt2gen"; make gpt2gen >/dev/null; }

# A stamp of the inputs (names and sizes) and ranks says whether the shards are current.
stamp=$( (echo "$RANKS_SHA256"; ls -l $inputs | awk '{print $5, $NF}') | cksum)
if [ $force -eq 0 ] && [ -f "$OUT/tokenizer.bin" ] && [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$stamp" ]; then
    say "$OUT is up to date ($(ls "$OUT"/train_*.bin "$OUT"/val_*.bin | wc -l) shards); --force redoes it"
    exit 0
fi
rm -f "$OUT/.stamp"
# shellcheck disable=SC2086
./gpt2gen prepare $inputs -o "$OUT" --ranks "$RANKS"
echo "$stamp" > "$OUT/.stamp"
say "done: $OUT"
