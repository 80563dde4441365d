#!/bin/sh
# The kernel cache and build/<name>/ under hostile conditions. A bad cache entry (truncated, garbage, a wrong
# hash, another key's, a FIFO, a folder, too large) is reported, compiled again and written back, and the build
# equals a clean one; a cache that cannot be written, or whose path is very long, is a note at most. One build of
# a name at a time: a second one waits (with a message), gives up after GPT2GEN_LOCK_TIMEOUT, and is not
# blocked by a killed one; a killed build leaves build/<name>/ as it was; two builds of one name at once leave
# one whole build or the other.
. "$(dirname "$0")/../lib.sh"
scratch own-cache
cd "$WORK" || exit 1
cp -r "$ROOT/configs" configs
A="--arch sm_90"
# every build here ends within two minutes or counts as failed (a hang is a failure, not a stuck test run)
build() { timeout 120 "$GPT2GEN" build "$@"; }
LN128="--set tune.layernorm.BLOCK_SIZE=128"
LN256="--set tune.layernorm.BLOCK_SIZE=256"

# the reference builds, kept in ref<v>/build/tiny (built here: the CUBINs' line info holds the folder they were
# compiled in)
for v in plain 128 256; do
    case $v in plain) set -- ;; 128) set -- $LN128 ;; 256) set -- $LN256 ;; esac
    GPT2GEN_CACHE="$WORK/refcache" timeout 120 "$GPT2GEN" build configs/tiny.lua $A -q "$@" || fail "reference_build_$v"
    mkdir -p "ref$v/build" && mv build/tiny "ref$v/build/"
    [ $v = plain ] && cp -r "$WORK/refcache" "$WORK/plaincache"   # the plain build's entries alone
done
# warm_cache: $GPT2GEN_CACHE becomes a copy of the plain build's cache (what a first build there would leave)
warm_cache() { rm -rf "$GPT2GEN_CACHE" && cp -r "$WORK/plaincache" "$GPT2GEN_CACHE"; }
N=$(find refplain/build/tiny/kernels -name '*.cubin' | wc -l)   # both plans' (kernels/ and kernels/decode/)

# differs DIR REF: the first file of the build REF that DIR lacks or holds other bytes in, or a file DIR has
# that REF lacks (the lock file aside); nothing when DIR is REF's build exactly
differs() {
    (cd "$2" && find . -type f ! -name .lock | sort) > "$WORK/ref.list"
    (cd "$1" && find . -type f ! -name .lock | sort) > "$WORK/dir.list"
    cmp -s "$WORK/ref.list" "$WORK/dir.list" || { echo "file lists differ: $(diff "$WORK/ref.list" "$WORK/dir.list" | head -3 | tr '\n' ' ')"; return; }
    while read -r f; do cmp -s "$1/$f" "$2/$f" || { echo "$f"; return; }; done < "$WORK/ref.list"
}

# the cache's entries, one a line
entries() { find "$GPT2GEN_CACHE" -maxdepth 1 -type f | sort; }

# ways to damage one entry
truncate_half() { head -c $(( $(wc -c < "$1") / 2 )) "$1" > "$WORK/x" && mv "$WORK/x" "$1"; }
garbage() { head -c "$(wc -c < "$1")" /dev/urandom > "$WORK/x" && mv "$WORK/x" "$1"; }
flip_middle() {   # one byte in the middle changed: same size, the ELF header intact
    off=$(( $(wc -c < "$1") / 2 )); b=$(od -An -tu1 -j $off -N1 "$1" | tr -d ' ')
    printf "\\$(printf %o $(( (b + 1) % 256 )))" | dd of="$1" bs=1 seek=$off conv=notrunc 2>/dev/null
}
fifo() { rm -f "$1" && mkfifo "$1"; }

# damaged NAME HOW WORD: a warm cache whose every entry is then damaged by HOW; the next build reports each one
# (a line naming the entry and saying WORD), equals the clean build, and the build after it is all from the cache
damaged() {
    export GPT2GEN_CACHE="$WORK/cache-$1"
    rm -rf build/tiny
    warm_cache
    for e in $(entries); do $2 "$e"; done
    out=$(build configs/tiny.lua $A 2>&1); rc=$?
    reports=$(printf '%s\n' "$out" | grep -c "^gpt2gen: kernel cache: $GPT2GEN_CACHE/[0-9a-f]*\.[a-z]*: .*$3.*; compiling it again$")
    d=$(differs build/tiny refplain/build/tiny)
    again=$(build configs/tiny.lua $A 2>&1)
    case "$again" in *": 0 compiled, $N from cache"*) warm=1 ;; *) warm=0 ;; esac
    if [ $rc -eq 0 ] && [ "$reports" -eq "$N" ] && [ -z "$d" ] && [ $warm = 1 ] && [ "$(printf '%s' "$again" | wc -l)" -eq 0 ]; then ok "$1"
    else fail "$1" "rc=$rc, $reports of $N entries reported, differs: '$d', next build: $again; output: $(printf '%s' "$out" | head -3)"; fi
}
damaged cache_truncated_entry truncate_half truncated
damaged cache_garbage_entry garbage "not a cache entry"
damaged cache_hash_mismatch flip_middle SHA-256

# every entry holds the one of the next key: well-formed, but another kernel
export GPT2GEN_CACHE="$WORK/cache-swapped"
rm -rf build/tiny
warm_cache
set -- $(entries)
cp "$1" "$WORK/first"
while [ $# -gt 1 ]; do cp "$2" "$1"; shift; done
cp "$WORK/first" "$1"
out=$(build configs/tiny.lua $A 2>&1); rc=$?
reports=$(printf '%s\n' "$out" | grep -c "^gpt2gen: kernel cache: .*; compiling it again$")
d=$(differs build/tiny refplain/build/tiny)
if [ $rc -eq 0 ] && [ "$reports" -eq "$N" ] && [ -z "$d" ]; then ok cache_entry_of_another_key
else fail cache_entry_of_another_key "rc=$rc, $reports of $N reported, differs: '$d'"; fi

# a FIFO at an entry's name: reported, never read from (no hang), replaced by a good entry
damaged cache_fifo_entry fifo "not a regular file"

# a folder at an entry's name: reported, compiled, the build goes on (the entry cannot be written back)
export GPT2GEN_CACHE="$WORK/cache-folder"
rm -rf build/tiny
warm_cache
e=$(entries | head -1); rm "$e"; mkdir "$e"; touch "$e/x"
out=$(build configs/tiny.lua $A 2>&1); rc=$?
d=$(differs build/tiny refplain/build/tiny)
if [ $rc -eq 0 ] && [ -z "$d" ] && printf '%s' "$out" | grep -q "kernel cache: $e: not a regular file" \
   && printf '%s' "$out" | grep -q "note: 1 of $N kernels not written to the kernel cache"; then ok cache_folder_entry
else fail cache_folder_entry "rc=$rc, differs: '$d': $out"; fi

# an entry far larger than any CUBIN (sparse): reported without reading it all, replaced
export GPT2GEN_CACHE="$WORK/cache-huge"
rm -rf build/tiny
warm_cache
e=$(entries | head -1); truncate -s 300M "$e"
out=$(build configs/tiny.lua $A 2>&1); rc=$?
d=$(differs build/tiny refplain/build/tiny)
size=$(wc -c < "$e")
if [ $rc -eq 0 ] && [ -z "$d" ] && [ "$size" -lt 1000000 ] && printf '%s' "$out" | grep -q "kernel cache: $e: .*more than"; then ok cache_huge_entry
else fail cache_huge_entry "rc=$rc, differs: '$d', entry now $size bytes: $(printf '%s' "$out" | head -3)"; fi
rm -rf "$GPT2GEN_CACHE"

# a cache folder that cannot be made (under a regular file; this holds for root too): a note, and a good build
echo "a file" > afile
export GPT2GEN_CACHE="$WORK/afile/cache"
rm -rf build/tiny
out=$(build configs/tiny.lua $A 2>&1); rc=$?
d=$(differs build/tiny refplain/build/tiny)
if [ $rc -eq 0 ] && [ -z "$d" ] && printf '%s' "$out" | grep -q "note: $N of $N kernels not written to the kernel cache" \
   && [ "$(printf '%s\n' "$out" | grep -c '^gpt2gen:')" -eq 1 ]; then ok cache_unwritable
else fail cache_unwritable "rc=$rc, differs: '$d': $out"; fi

# a long cache path (over 2 KiB) is used whole; one too long for a path is a note (a truncated path could
# name another file, or one file for every key)
long="$WORK"; while [ ${#long} -lt 2200 ]; do long="$long/cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"; done
export GPT2GEN_CACHE="$long"
rm -rf build/tiny
build configs/tiny.lua $A -q
out=$(build configs/tiny.lua $A 2>&1)
d=$(differs build/tiny refplain/build/tiny)
n=$(ls "$long" | grep -c '^[0-9a-f]\{64\}\.')
case "$out" in *": 0 compiled, $N from cache"*) hit=1 ;; *) hit=0 ;; esac
if [ -z "$d" ] && [ $hit = 1 ] && [ "$n" -eq "$N" ]; then ok cache_long_path
else fail cache_long_path "differs: '$d', $n entries, second build: $out"; fi
while [ ${#long} -lt 4200 ]; do long="$long/cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"; done
export GPT2GEN_CACHE="$long"
rm -rf build/tiny
build configs/tiny.lua $A -q 2>/dev/null
out=$(build configs/tiny.lua $A 2>&1); rc=$?
d=$(differs build/tiny refplain/build/tiny)
if [ $rc -eq 0 ] && [ -z "$d" ] && printf '%s' "$out" | grep -q "note: $N of $N kernels not written to the kernel cache (.*too long"; then ok cache_path_too_long
else fail cache_path_too_long "rc=$rc, differs: '$d': $(printf '%s' "$out" | cut -c1-300)"; fi

# a warm cache for the lock and concurrency tests: every module but layernorm at BLOCK_SIZE 128 and 256 hits,
# so a build's compile is layernorm's alone (a second or so)
export GPT2GEN_CACHE="$WORK/cache-warm"
warm_cache
build configs/tiny.lua $A -q --set tune.layernorm.BLOCK_SIZE=512
cp -r "$GPT2GEN_CACHE" warm
fresh_cache() { rm -rf "$GPT2GEN_CACHE" && cp -r warm "$GPT2GEN_CACHE"; }

# hold_lock SECONDS: another process holds build/tiny/.lock (its pid written in it, as a build does) for that long;
# returns once it holds it, with its pid in $holder
hold_lock() {
    mkdir -p build/tiny
    sh -c 'echo $$ > build/tiny/.lock; exec flock -F build/tiny/.lock sleep '"$1" & holder=$!
    while flock -n build/tiny/.lock true; do sleep 0.1; done
}

# a second build of the name waits for the first, saying so, then builds
rm -rf build/tiny
hold_lock 3
out=$(build configs/tiny.lua $A -q 2>&1); rc=$?
wait $holder
d=$(differs build/tiny refplain/build/tiny)
if [ $rc -eq 0 ] && [ -z "$d" ] && printf '%s' "$out" | grep -qx "gpt2gen: waiting for another build of tiny (pid $holder)"; then ok lock_waits_with_message
else fail lock_waits_with_message "rc=$rc, differs: '$d': $out"; fi

# ... at most GPT2GEN_LOCK_TIMEOUT seconds; then it fails, naming the holder, and build/tiny/ is untouched
cp -r build/tiny before
hold_lock 3
out=$(GPT2GEN_LOCK_TIMEOUT=1 timeout 120 "$GPT2GEN" build configs/tiny.lua $A -q $LN128 2>&1); rc=$?
wait $holder
d=$(differs build/tiny before)
if [ $rc -eq 1 ] && [ -z "$d" ] && printf '%s' "$out" | grep -q "another build of tiny (pid $holder) still holds build/tiny/.lock after 1 s; giving up"; then
    ok lock_timeout
else fail lock_timeout "rc=$rc, differs: '$d': $out"; fi

# a build killed at any moment leaves build/tiny/ as it was (here the 256 build) and no lock: the next build
# neither waits nor finds leftovers
rm -rf build/tiny
build configs/tiny.lua $A -q $LN256
bad=""
for delay in 0.1 0.2 0.3 0.4 0.6 0.9; do
    fresh_cache
    "$GPT2GEN" build configs/tiny.lua $A -q $LN128 & pid=$!
    sleep $delay; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    d256=$(differs build/tiny ref256/build/tiny); d128=$(differs build/tiny ref128/build/tiny)
    [ -n "$d256" ] && [ -n "$d128" ] && bad="$bad killed after ${delay}s: a mix ($d256 / $d128);"
    out=$(GPT2GEN_LOCK_TIMEOUT=5 timeout 120 "$GPT2GEN" build configs/tiny.lua $A -q $LN256 2>&1); rc=$?
    [ $rc -ne 0 ] || [ -n "$out" ] && bad="$bad after the kill at ${delay}s: rc=$rc $out;"
    [ -n "$(differs build/tiny ref256/build/tiny)" ] && bad="$bad the build after the kill at ${delay}s differs;"
    left=$(ls -d build/tiny~* 2>/dev/null; find build/tiny -name '*.tmp.*')
    [ -n "$left" ] && bad="$bad left behind: $left;"
done
if [ -z "$bad" ]; then ok killed_build_leaves_no_mix_or_lock; else fail killed_build_leaves_no_mix_or_lock "$bad"; fi

# two builds of one name at once (BLOCK_SIZE 128 and 256), five times: build/tiny/ is then one of them whole,
# the plan's layernorm tunable agreeing with the source's constant
bad=""; waited=0
for round in 1 2 3 4 5; do
    fresh_cache
    build configs/tiny.lua $A -q $LN128 2> one.err & p1=$!
    build configs/tiny.lua $A -q $LN256 2> two.err & p2=$!
    wait $p1; r1=$?; wait $p2; r2=$?
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || bad="$bad round $round: exit codes $r1 $r2 ($(cat one.err two.err));"
    grep -q "waiting for another build of tiny" one.err two.err && waited=$((waited + 1))
    plan=$(sed -n '/^family layernorm/,/^family [a-z]/p' build/tiny/plan.txt | awk '$1 == "tunable" && $2 == "BLOCK_SIZE" {print $4}' | head -1)   # the training plan's section
    src=$(awk '$1 == "constexpr" && $3 == "BLOCK_SIZE" {print $5}' build/tiny/kernels/layernorm.cu | tr -d ';')
    [ "$plan" = "$src" ] || bad="$bad round $round: plan.txt says $plan, layernorm.cu $src;"
    case "$plan" in
        128|256) d=$(differs build/tiny "ref$plan/build/tiny"); [ -n "$d" ] && bad="$bad round $round: $d is not the $plan build's;" ;;
        *) bad="$bad round $round: no layernorm BLOCK_SIZE in plan.txt;" ;;
    esac
done
if [ -z "$bad" ]; then ok concurrent_builds_one_whole "one waited for the other in $waited of 5 rounds"
else fail concurrent_builds_one_whole "$bad"; fi

# a config named like the cache folder cannot build into it
printf 'base "configs/tiny.lua"\nname = "cache"\n' > cache.lua
mkdir -p build/cache && echo keep > build/cache/keep
out=$(env -u GPT2GEN_CACHE timeout 120 "$GPT2GEN" build cache.lua $A -q 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "the kernel cache build/cache is this build folder" && [ ! -e build/cache/plan.txt ] \
   && [ "$(cat build/cache/keep)" = keep ]; then ok build_name_is_the_cache
else fail build_name_is_the_cache "rc=$rc: $(printf '%s' "$out" | head -3)"; fi

finish
