#!/bin/sh
# The Makefile: `make CFLAGS=...` (and LDFLAGS, LDLIBS) adds the user's flags to the ones the build needs,
# instead of replacing them; `make sanitize` builds into build/asan/ with the sanitizers.
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
out=$(make -n -B CFLAGS=-O1 build/obj/common/err.o 2>&1)
if printf '%s' "$out" | grep -q -- "-std=c11" && printf '%s' "$out" | grep -q -- "-Werror" && printf '%s' "$out" | grep -q -- "-O1"
then ok cflags_kept; else fail cflags_kept "make CFLAGS=-O1 lost the build's flags: $out"; fi
out=$(make -n -B LDLIBS=-lrt gpt2gen 2>&1 | grep -- "-o gpt2gen")
if printf '%s' "$out" | grep -q -- "-lnvrtc" && printf '%s' "$out" | grep -q -- "-lrt"
then ok ldlibs_kept; else fail ldlibs_kept "make LDLIBS=-lrt lost the build's libraries: $out"; fi
out=$(make -n sanitize 2>&1)
if printf '%s' "$out" | grep -q -- "-fsanitize=address,undefined" && printf '%s' "$out" | grep -q "build/asan/obj"
then ok sanitize_target; else fail sanitize_target "make sanitize does not build with the sanitizers into build/asan: $out"; fi
finish
