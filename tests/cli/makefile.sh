#!/bin/sh
# The Makefile: `make CFLAGS=...` (and LDFLAGS, LDLIBS) adds the user's flags to the ones the build needs,
# instead of replacing them; warnings are errors (-Werror) in the default flags and in `make sanitize`, not with
# the user's CFLAGS; `make sanitize` builds into build/asan/ with the sanitizers. Only `make -n`: nothing is built.
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
# make as from a shell, whatever make (or the caller's environment) runs this test with
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u CFLAGS -u WERROR make "$@" 2>&1; }
out=$(mk -n -B build/obj/common/err.o)
if printf '%s' "$out" | grep -q -- "-Wall -Wextra -Werror" && printf '%s' "$out" | grep -q -- "-O2"
then ok werror_default; else fail werror_default "a plain make does not compile with -O2 and -Werror: $out"; fi
out=$(mk -n -B CFLAGS=-O1 build/obj/common/err.o)
if printf '%s' "$out" | grep -q -- "-std=c11" && printf '%s' "$out" | grep -q -- "-Wall -Wextra" && printf '%s' "$out" | grep -q -- "-O1"
then ok cflags_kept; else fail cflags_kept "make CFLAGS=-O1 lost the build's flags: $out"; fi
if printf '%s' "$out" | grep -q -- "-Werror"
then fail werror_not_user "make CFLAGS=-O1 compiles with -Werror: $out"; else ok werror_not_user; fi
out=$(mk -n -B LDLIBS=-lrt gpt2gen | grep -- "-o gpt2gen")
if printf '%s' "$out" | grep -q -- "-lpthread" && printf '%s' "$out" | grep -q -- "-lrt"
then ok ldlibs_kept; else fail ldlibs_kept "make LDLIBS=-lrt lost the build's libraries: $out"; fi
out=$(mk -n -B sanitize CFLAGS=-O1 | grep -- "-o build/asan/obj/common/err.o")
if printf '%s' "$out" | grep -q -- "-fsanitize=address,undefined" && printf '%s' "$out" | grep -q -- "-Werror"
then ok sanitize_target; else fail sanitize_target "make sanitize does not build with the sanitizers and -Werror into build/asan: $out"; fi
finish
