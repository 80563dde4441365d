#!/bin/sh
# gpt2gen prepare against hostile input and interruptions: standard input, /dev/stdin and a FIFO give the
# shards of the same file (each input is read once); a failed or killed prepare leaves the old data set
# byte for byte; a successful one replaces it whole; empty inputs, foreign files and bad folders get one
# message and exit code 1 (2 for usage errors), and so do files that are named like a data set's but are not
# one (a user's train_my_notes.bin) and a second prepare into a folder while one runs; memory stays bounded on a
# long pipe.
. "$(dirname "$0")/../lib.sh"
RANKS="$ROOT/data/gpt2.tiktoken"
FORTUNE=/usr/share/games/fortunes/fortunes
TESTS="stdin_dash stdin_dev_stdin stdin_between_files fifo failed_missing_input failed_unreadable_input
failed_empty_input failed_blank_input failed_write_error foreign_file_refused lookalike_shard_refused
lookalike_tokenizer_refused second_prepare_refused not_a_folder out_dot_usage killed_midway
leftovers_cleaned interrupted_swap_restored replaced_whole val_every_tenth pipe_memory_bounded"
why=""
[ -f "$RANKS" ] || why="$RANKS is missing (run tools/setup_data.sh)"
[ -z "$why" ] && [ ! -f "$FORTUNE" ] && why="no $FORTUNE (apt-get install fortunes)"
if [ -n "$why" ]; then
    for t in $TESTS; do skip "$t" "$why"; done
    finish
fi
scratch
cd "$WORK" || exit 1

prep() { "$GPT2GEN" prepare --ranks "$RANKS" "$@"; }

# same_dir A B: the same file names, and every file the same bytes (cmp).
same_dir() {
    [ "$(ls -A "$1")" = "$(ls -A "$2")" ] || return 1
    for f in "$1"/* "$1"/.[!.]*; do
        [ -e "$f" ] || continue
        cmp -s "$f" "$2/$(basename "$f")" || return 1
    done
}

# leftovers DIR: what prepare left beside DIR (temporary or set-aside folders), one per line.
leftovers() { ls -A "$(dirname "$1")" | grep -F ".$(basename "$1")." ; }

# survives NAME DIR SNAPSHOT WANT -- PREPARE-ARGS...: prepare fails with exit code 1 and one message naming
# WANT, and DIR stays byte for byte what SNAPSHOT holds, with no leftovers beside it. Files it writes may
# grow to FSIZE (ulimit -f; writes beyond fail with EFBIG, as on a full disk).
FSIZE=unlimited
survives() {
    name=$1; dir=$2; snap=$3; want=$4; shift 5
    out=$(trap '' XFSZ; ulimit -f "$FSIZE"; timeout 60 "$GPT2GEN" prepare --ranks "$RANKS" "$@" -o "$dir" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 1 ]; then fail "$name" "exit code $rc, expected 1 ($out)"
    elif ! printf '%s' "$out" | grep -qF -- "$want"; then fail "$name" "message does not name '$want': $out"
    elif [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then fail "$name" "not one message: $out"
    elif ! same_dir "$dir" "$snap"; then fail "$name" "$dir changed: $(ls "$dir" | tr '\n' ' ')"
    elif [ -n "$(leftovers "$dir")" ]; then fail "$name" "left beside $dir: $(leftovers "$dir")"
    else ok "$name" "$out"; fi
}

# the reference: the fortune file prepared from its path, in small shards
cp "$FORTUNE" f.txt
printf 'first file\n%%\nsecond document\n' > a.txt
printf 'last file, one document\n' > c.txt
prep f.txt -o ref --shard-tokens 2K > ref.log 2>&1 || { cat ref.log; fail stdin_dash "prepare from the file failed"; finish; }
prep c.txt -o c_ref_early > /dev/null 2>&1

# 1. standard input, /dev/stdin and a FIFO: the same shards as from the file
cat f.txt | prep - -o dash --shard-tokens 2K > dash.log 2>&1; rc=$?
if [ $rc -eq 0 ] && same_dir dash ref; then ok stdin_dash "$(ls ref | wc -l) files"
else fail stdin_dash "exit code $rc; shards differ from the file's: $(tail -1 dash.log)"; fi

cat f.txt | prep /dev/stdin -o devstdin --shard-tokens 2K > devstdin.log 2>&1; rc=$?
if [ $rc -eq 0 ] && same_dir devstdin ref; then ok stdin_dev_stdin
else fail stdin_dev_stdin "exit code $rc; shards differ from the file's: $(tail -1 devstdin.log)"; fi

prep a.txt f.txt c.txt -o three_ref --shard-tokens 2K > /dev/null 2>&1
cat f.txt | prep a.txt - c.txt -o three --shard-tokens 2K > three.log 2>&1; rc=$?
if [ $rc -eq 0 ] && same_dir three three_ref; then ok stdin_between_files
else fail stdin_between_files "exit code $rc; shards differ from the files': $(tail -1 three.log)"; fi

mkfifo fifo
(cat f.txt > fifo &)
timeout 30 "$GPT2GEN" prepare --ranks "$RANKS" fifo -o fromfifo --shard-tokens 2K > fifo.log 2>&1; rc=$?
if [ $rc -eq 0 ] && same_dir fromfifo ref; then ok fifo
elif [ $rc -eq 124 ]; then fail fifo "hung (killed after 30 s)"
else fail fifo "exit code $rc; shards differ from the file's: $(tail -1 fifo.log)"; fi
# a writer still blocked on the FIFO (when prepare opened it twice or never) is released
timeout 2 cat fifo > /dev/null 2>&1

# 2. a failed prepare leaves the data set as it was, byte for byte
cp -a ref good_snapshot
cp -a ref good
mkdir a_folder
: > empty.txt
printf ' \n\t\n%%\n \n' > blank.txt
survives failed_missing_input good good_snapshot missing.txt -- f.txt missing.txt
survives failed_unreadable_input good good_snapshot a_folder -- f.txt a_folder
survives failed_empty_input good good_snapshot empty.txt -- empty.txt
survives failed_blank_input good good_snapshot "no documents" -- blank.txt empty.txt

# a write error (here: the file size limit, below tokenizer.bin's size and above a shard's) after every
# shard is written; the old set has other shard sizes, so that a mix of old and new files shows
cp -a good_snapshot write_snapshot
prep f.txt -o write_snapshot --shard-tokens 3K > /dev/null 2>&1 && cp -a write_snapshot write
FSIZE=200    # dash counts 512-byte blocks, bash 1024: 100 or 200 KB
survives failed_write_error write write_snapshot tokenizer.bin -- f.txt --shard-tokens 2K
FSIZE=unlimited

# a folder holding anything but a data set is refused, and nothing in it deleted
cp -a ref mixed; echo notes > mixed/notes.txt; cp -a mixed mixed_snapshot
survives foreign_file_refused mixed mixed_snapshot notes.txt -- f.txt

# a user's file that is named like a data set's file but is not one (no shard's or tokenizer's magic) is refused
# and kept (prepare knows its files by their first bytes too)
cp -a ref lookalike; echo "my notes" > lookalike/train_my_notes.bin; cp -a lookalike lookalike_snapshot
survives lookalike_shard_refused lookalike lookalike_snapshot "train_my_notes.bin, which is named like" -- f.txt
cp -a ref lookalike_tok; cp ref/train_000000.bin lookalike_tok/tokenizer.bin; cp -a lookalike_tok lookalike_tok_snapshot
survives lookalike_tokenizer_refused lookalike_tok lookalike_tok_snapshot "not a tokenizer file" -- f.txt

# a second prepare into the folder while one runs (here blocked reading a FIFO) is refused; the first finishes
mkfifo slow
"$GPT2GEN" prepare --ranks "$RANKS" slow -o racing > racing1.log 2>&1 &
pid=$!
tries=0; while [ ! -e .racing.lock ] && [ $tries -lt 200 ]; do sleep 0.05; tries=$((tries + 1)); done
out=$(prep c.txt -o racing 2>&1 >/dev/null); rc=$?
cat c.txt > slow
wait $pid; rc1=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "another prepare is writing this data set (pid $pid" && [ $rc1 -eq 0 ] \
   && same_dir racing c_ref_early && [ ! -e .racing.lock ]; then ok second_prepare_refused "$out"
else fail second_prepare_refused "exit codes $rc, $rc1: $out $(cat racing1.log)"; fi

echo "not a folder" > plainfile; cp plainfile plainfile_snapshot
out=$(prep f.txt -o plainfile 2>&1 >/dev/null); rc=$?
if [ $rc -eq 1 ] && cmp -s plainfile plainfile_snapshot && printf '%s' "$out" | grep -qF plainfile; then ok not_a_folder "$out"
else fail not_a_folder "exit code $rc: $out"; fi

mkdir dotdir && cp -a ref/. dotdir/
out=$(cd dotdir && "$GPT2GEN" prepare --ranks "$RANKS" ../f.txt -o . 2>&1 >/dev/null); rc=$?
if [ $rc -eq 2 ] && same_dir dotdir ref; then ok out_dot_usage "$out"; else fail out_dot_usage "exit code $rc: $out"; fi

# 3. kill -9 in the middle of a long prepare: the folder holds the whole old or the whole new data set.
# The old set is the same text with another split, so that each of its shards differs from the new ones.
i=0; while [ $i -lt 1500 ]; do cat f.txt; i=$((i + 1)); done > big.txt
prep big.txt -o big_new --shard-tokens 20K > /dev/null 2>&1
prep big.txt -o big --shard-tokens 20K --val-fraction 0.5 > /dev/null 2>&1
cp -a big big_old
touch marker
"$GPT2GEN" prepare --ranks "$RANKS" big.txt -o big --shard-tokens 20K > killed.log 2>&1 &
pid=$!
# kill once the run has written a few shards (wherever it writes them)
n=0; tries=0
while [ "$n" -lt 3 ] && [ $tries -lt 600 ] && kill -0 $pid 2>/dev/null; do
    sleep 0.05; tries=$((tries + 1))
    n=$(find . -name 'train_*.bin' -newer marker 2>/dev/null | wc -l)
done
if kill -9 $pid 2>/dev/null; then killed="killed after $n new shards"; else killed="finished before the kill"; fi
wait $pid 2>/dev/null
if same_dir big big_old; then ok killed_midway "$killed; the old data set whole"
elif same_dir big big_new; then ok killed_midway "$killed; the new data set whole"
else fail killed_midway "$killed; $(ls big | wc -l) files, neither the old set ($(ls big_old | wc -l)) nor the new ($(ls big_new | wc -l))"; fi

# what the killed run left beside the folder goes with the next run (here one that fails)
left=$(leftovers big | tr '\n' ' ')
prep empty.txt -o big > /dev/null 2>&1
if [ -z "$(leftovers big)" ]; then ok leftovers_cleaned "${left:-nothing was left}"
else fail leftovers_cleaned "still beside big: $(leftovers big | tr '\n' ' ')"; fi

# a run killed between the two renames of a swap (file systems without an atomic exchange) left the old
# set aside and no folder: the next run puts the old set back before anything else
mkdir swap_parent && cp -a ref swap_parent/.ds.old-999999999
prep empty.txt -o swap_parent/ds > /dev/null 2>&1
if [ -d swap_parent/ds ] && same_dir swap_parent/ds ref && [ -z "$(leftovers swap_parent/ds)" ]; then ok interrupted_swap_restored
else fail interrupted_swap_restored "$(ls -A swap_parent | tr '\n' ' ')"; fi

# 4. a second prepare replaces the data set whole: no shard of the first stays when the second has fewer
cp -a big_new shrink
prep c.txt -o c_ref > /dev/null 2>&1
prep c.txt -o shrink > shrink.log 2>&1; rc=$?
if [ $rc -eq 0 ] && same_dir shrink c_ref; then ok replaced_whole "$(ls big_new | wc -l) files, then $(ls shrink | wc -l)"
else fail replaced_whole "exit code $rc: $(ls shrink | tr '\n' ' ')"; fi

# the validation split: every tenth document (the 10th, 20th, ...) at 0.1, whatever the count (23 here)
j=1; while [ $j -le 23 ]; do printf 'document %d\n%%\n' $j; j=$((j + 1)); done > docs.txt
prep docs.txt -o split > split.log 2>&1
val=$(od -An -tu2 -v -j1024 split/val_000000.bin 2>/dev/null | tr -s ' \n' ' ')
if [ "$val" = " 50256 22897 838 198 50256 22897 1160 198 " ]; then ok val_every_tenth "documents 10 and 20"
else fail val_every_tenth "val tokens:$val; $(grep val_ split.log)"; fi

# 5. a long pipe is not held in memory: 70 MB through standard input (in shards of 1M tokens, 2 MB) take
# less than 20 MB more than one line does (with 2 encoding threads: each holds a few chunks of 256 KiB); under
# AddressSanitizer (make sanitize sets ASAN_OPTIONS), whose shadow memory, redzones and quarantine of freed blocks
# add to it (seen: 20.04 MB more), less than 40 MB: still far below the 70 MB that holding the pipe would take
rss() { /usr/bin/time -f %M "$GPT2GEN" prepare --ranks "$RANKS" /dev/stdin -o "$1" --shard-tokens 1M --threads 2 2>&1 >/dev/null | tail -1; }
if [ -x /usr/bin/time ]; then
    cat big.txt big.txt > huge.txt
    base=$(echo "one line" | rss small)
    kb=$(cat huge.txt | rss huge)
    mb=$(( $(wc -c < huge.txt) / 1000000 ))
    more=20000; [ -n "$ASAN_OPTIONS" ] && more=40000
    if [ -d huge ] && [ "$kb" -lt $((base + more)) ] 2>/dev/null; then ok pipe_memory_bounded "$mb MB in: $((kb / 1000)) MB resident, $((base / 1000)) MB for one line"
    else fail pipe_memory_bounded "$mb MB in: $kb KB resident, $base KB for one line (expected under $((more / 1000)) MB more)"; fi
else skip pipe_memory_bounded "no /usr/bin/time"; fi
# a ranks file over its limit (16 MiB) is one message naming it and the limit, before it is read (a sparse file)
echo "some text" > small.txt
truncate -s 20M sparse.tiktoken
out=$("$GPT2GEN" prepare --ranks sparse.tiktoken small.txt -o sparse_out 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "sparse.tiktoken: 20971520 bytes, more than the 16 MiB such a file may have" && [ ! -e sparse_out ]; then
    ok ranks_file_size_limit
else fail ranks_file_size_limit "rc=$rc: $(printf '%s' "$out" | head -c 300)"; fi
finish
