#!/bin/sh
# The README's first command, twice, in a fresh clone of the repository (its committed HEAD): tools/quickstart.sh
# exits 0 both times, and the second run says that runs/tiny holds a finished run and starts it over (the same
# run again: the same model file). Kept fast with what this machine already has, so that it tests quickstart,
# not the build or the download: the packages (install_deps.sh says ok), the build (the object folder of the
# binary under test, build/obj for ./gpt2gen or <dir>/obj for <dir>/gpt2gen, copied in and made newer than the
# clone's sources, so quickstart's `make` has nothing to do and the binary it runs is the one under test) and the
# default data set (data/ copied in: setup_data.sh finds it up to date). A tiny step count goes through
# quickstart's arguments. QUICKSTART_FROM=worktree tests the working tree's files instead of HEAD (uncommitted
# work, for development; CI tests the commit).
. "$(dirname "$0")/../lib.sh"
scratch
C=$WORK/clone
if [ "${QUICKSTART_FROM:-}" = worktree ]; then
    mkdir -p "$C" && (cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$C"
elif ! git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then skip quickstart_twice "$ROOT is not a git checkout"; finish
else git clone -q "$ROOT" "$C" 2> "$WORK/clone.err" || { fail clone "$(cat "$WORK/clone.err")"; finish; }
fi
case "$GPT2GEN" in "$ROOT/gpt2gen") OBJ=$ROOT/build/obj ;; *) OBJ=$(dirname "$GPT2GEN")/obj ;; esac
if [ ! -f "$OBJ/cli/main.o" ] || [ ! -d "$ROOT/build/gen" ] || [ ! -d "$ROOT/build/tools" ]; then
    fail build_to_copy "no $OBJ/cli/main.o, build/gen or build/tools beside $GPT2GEN: run make first"; finish
fi
if [ ! -f "$ROOT/data/fortunes/train_000000.bin" ] || [ ! -f "$ROOT/data/gpt2.tiktoken" ]; then
    fail default_data "data/fortunes is missing: run \`make data\` first"; finish
fi
mkdir -p "$C/build" "$C/data"
cp -r "$ROOT/build/tools" "$ROOT/build/gen" "$C/build/" && cp -r "$OBJ" "$C/build/obj" && cp "$GPT2GEN" "$C/gpt2gen" &&
    cp -r "$ROOT/data/fortunes" "$ROOT/data/gpt2.tiktoken" "$C/data/" || { fail copy "cannot copy the build and data in"; finish; }
# newer than every source, in the order make builds them: the generator, its headers, the objects, the binary
find "$C/build/tools" -type f -exec touch {} +; find "$C/build/gen" -type f -exec touch {} +
find "$C/build/obj" -type f -exec touch {} +; touch "$C/gpt2gen"

quick="--set train.steps=4 --set eval.val_every=4 --set eval.val_batches=1 --set eval.sample_every=4 --set eval.sample_tokens=4"
# quickstart runs make as from a shell, whatever make (or the caller's environment) runs this test with
qs() { (cd "$C" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u CFLAGS -u WERROR timeout 300 sh tools/quickstart.sh $quick) > "$WORK/$1.log" 2>&1; }
qs first; rc=$?
if [ $rc -eq 0 ] && grep -q "^training tiny on " "$WORK/first.log" && grep -q "^done: 4 steps" "$WORK/first.log" &&
   ! grep -q "holds a" "$WORK/first.log" && [ -f "$C/runs/tiny/model_00000004.bin" ]; then ok quickstart_first
else fail quickstart_first "rc=$rc: $(tail -20 "$WORK/first.log")"; fi
if grep -q "^cc " "$WORK/first.log"; then fail quickstart_build_copied "make compiled in the clone: $(grep -c '^cc ' "$WORK/first.log") commands"
else ok quickstart_build_copied; fi
cp "$C/runs/tiny/model_00000004.bin" "$WORK/first.bin" 2>/dev/null
qs second; rc=$?
if [ $rc -eq 0 ] && grep -q "^runs/tiny holds a finished run (1 checkpoint, at step 4 of 4): starting over" "$WORK/second.log" &&
   grep -q "^done: 4 steps" "$WORK/second.log"; then ok quickstart_second_starts_over
else fail quickstart_second_starts_over "rc=$rc: $(tail -20 "$WORK/second.log")"; fi
if [ $rc -eq 0 ] && cmp -s "$WORK/first.bin" "$C/runs/tiny/model_00000004.bin" &&
   [ "$(grep -c '"event":"start"' "$C/runs/tiny/metrics.jsonl")" = 1 ]
then ok quickstart_second_same_run; else fail quickstart_second_same_run "the second run's model or metrics differ from a new run's"; fi
finish
