#!/bin/sh
# gpt2gen prepare on corpora as they come: a folder of text files, JSON lines, gzip and zstd (files, folders
# of them, standard input) each give byte for byte the shards of the same text given as plain files; the
# JSON lines are written from the text by Python with the documented blank-line rule, so that rule is held
# against an independent reader too. The shards are the same for 1, 2 and 7 threads; one big text file
# gets a validation shard; bad inputs get one message naming the file (and line) and exit code 1; a
# terminal shows a progress line. Then the data set trains (the micro config pointed at it), a missing
# validation set trains without validation, and missing shards name the command that makes them.
. "$(dirname "$0")/../lib.sh"
RANKS="$ROOT/data/gpt2.tiktoken"
TESTS="folder_is_its_files output_inside_input jsonl_is_the_text jsonl_whole_files gzip_folder zstd_jsonl mixed_folder stdin_zstd_jsonl
gzip_members threads_identical big_file_val_shard bad_json_line misnamed_gz truncated_gz json_array progress_tty
trains_on_it no_val_trains missing_shards_named"
why=""
[ -f "$RANKS" ] || why="$RANKS is missing (run tools/setup_data.sh)"
[ -z "$why" ] && ! command -v python3 >/dev/null && why="no python3"
if [ -n "$why" ]; then
    for t in $TESTS; do skip "$t" "$why"; done
    finish
fi
scratch
cd "$WORK" || exit 1
have_zstd=1; command -v zstd >/dev/null || have_zstd=0

prep() { "$GPT2GEN" prepare --ranks "$RANKS" --shard-tokens 20K "$@"; }

# same_dir A B: the same file names, and every file the same bytes (cmp).
same_dir() {
    [ -d "$1" ] && [ -d "$2" ] && [ "$(ls -A "$1")" = "$(ls -A "$2")" ] || return 1
    for f in "$1"/*; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
}

# expect_same NAME DIR LOG: DIR is the reference data set ref/, byte for byte
expect_same() {
    if same_dir "$2" ref; then ok "$1" "$(ls ref | wc -l) files"
    else fail "$1" "$(ls "$2" 2>/dev/null | tr '\n' ' ') vs $(ls ref | tr '\n' ' '): $(tail -2 "$3")"; fi
}

# The corpus: paragraphs (blank lines between, some CRLF, runs of blank and whitespace-only lines), a
# document longer than a thread's chunk (it is cut for the threads), non-ASCII text, nested folders, and
# a hidden file that must not be read. docs.jsonl: the same text's documents, cut by Python.
python3 - <<'PY' || { fail folder_is_its_files "could not write the corpus"; finish; }
import json, os, random, re
rng = random.Random(5)
words = "the of and to in a is that for it as was with be by on not he I this are or his from at which but have an they you were her she there one all we their its can said will would about more who".split()
uni = ["café", "naïve", "日本語", "Ελληνικά", "😀", "x²", "—", "’s", "\u00a0", "\u3000"]
def para(n):
    lines = []
    for _ in range(rng.randint(1, 6)):
        ws = [rng.choice(words) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.3: ws.insert(rng.randrange(len(ws) + 1), rng.choice(uni))
        if rng.random() < 0.2: ws.append(str(rng.randint(0, 99999)))
        lines.append(" ".join(ws) + rng.choice(["", ".", "!", "?", ",", "  ", " '", "\t"]))
    return "\n".join(lines)
def blank():
    return "\n" + rng.choice(["\n", "\n\n", "  \n", "\t\n \n", "\n\n\n"])
def text(n, crlf=False):
    t = "".join(para(0) + blank() for _ in range(n))
    return t.replace("\n", "\r\n") if crlf else t
files = {
    "corpus/a.txt": text(60),
    "corpus/sub/b.txt": "\n\n" + text(40, crlf=True),
    "corpus/sub/deeper/c.md": "\n".join(para(0) for _ in range(5000)) + "\n",   # one long document
    "corpus/z.txt": "last file, " + rng.choice(uni) + " no newline at its end",
    "corpus/.hidden": "never read\n",
    "corpus/sub/.git/HEAD": "ref: never read\n",
}
for path, t in files.items():
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f: f.write(t)
with open("big.txt", "w", encoding="utf-8") as f:
    for _ in range(20): f.write(text(100))

def blank_docs(t):
    """docs/data.md's rule: runs of blank lines (only spaces, tabs, CR, VT, FF) separate documents."""
    docs, cur = [], ""
    for line in re.findall(r"[^\n]*\n|[^\n]+$", t):
        if line.rstrip("\n").strip(" \t\r\v\f") == "":
            if cur: docs.append(cur)
            cur = ""
        else: cur += line
    if cur: docs.append(cur)
    return [d for d in docs if d.strip()]
order = sorted(p for p in files if "/." not in p)    # the folder's files in byte order of their paths
with open("order.txt", "w") as f: f.write("\n".join(order) + "\n")
n = 0
with open("docs.jsonl", "w") as f, open("whole.jsonl", "w") as w:
    for p in order:
        for d in blank_docs(files[p]):
            n += 1
            f.write(json.dumps({"id": n, "text": d, "url": "https://example.com/%d" % n}) + "\n")
        w.write(json.dumps({"text": files[p]}) + "\n")
PY

# the reference: the folder's files named one by one, as plain text
# shellcheck disable=SC2046
prep $(cat order.txt) -o ref > ref.log 2>&1 || { fail folder_is_its_files "prepare of the plain files failed: $(tail -1 ref.log)"; finish; }

prep corpus -o folder > folder.log 2>&1; expect_same folder_is_its_files folder folder.log
# a data set written inside the folder it reads is not read the next time
cp -r corpus corpus_in && prep corpus_in -o corpus_in/ds > /dev/null 2>&1 && prep corpus_in -o corpus_in/ds > inside.log 2>&1
expect_same output_inside_input corpus_in/ds inside.log
prep docs.jsonl -o jsonl > jsonl.log 2>&1; expect_same jsonl_is_the_text jsonl jsonl.log
# shellcheck disable=SC2046
prep $(cat order.txt) -o whole_ref --split-docs none > /dev/null 2>&1
prep whole.jsonl -o whole > whole.log 2>&1
if same_dir whole whole_ref; then ok jsonl_whole_files; else fail jsonl_whole_files "$(tail -2 whole.log)"; fi

cp -r corpus corpus_gz && find corpus_gz -type f -exec gzip {} \;
prep corpus_gz -o gz > gz.log 2>&1; expect_same gzip_folder gz gz.log

if [ $have_zstd -eq 1 ]; then
    zstd -q -k docs.jsonl -o docs.jsonl.zst
    prep docs.jsonl.zst -o zst > zst.log 2>&1; expect_same zstd_jsonl zst zst.log
    cp -r corpus corpus_mix && gzip corpus_mix/a.txt && zstd -q --rm corpus_mix/sub/deeper/c.md
    prep corpus_mix -o mix > mix.log 2>&1; expect_same mixed_folder mix mix.log
    zstd -dc docs.jsonl.zst | prep - --format jsonl -o stdin > stdin.log 2>&1; expect_same stdin_zstd_jsonl stdin stdin.log
else
    for t in zstd_jsonl mixed_folder stdin_zstd_jsonl; do skip $t "no zstd command (apt-get install zstd)"; done
fi

# concatenated gzip members are one stream: a.txt.gz + z.txt.gz is the text of a.txt + z.txt
cat corpus_gz/a.txt.gz corpus_gz/z.txt.gz > az.txt.gz
cat corpus/a.txt corpus/z.txt > az.txt
prep az.txt -o az_ref > /dev/null 2>&1
prep az.txt.gz -o az > az.log 2>&1
if same_dir az az_ref; then ok gzip_members; else fail gzip_members "$(tail -2 az.log)"; fi

# the threads: the same shards whatever their number (small shards, so that many are written)
prep corpus big.txt -o t1 --threads 1 --shard-tokens 3K > t1.log 2>&1
prep corpus big.txt -o t2 --threads 2 --shard-tokens 3K > t2.log 2>&1
prep corpus big.txt -o t7 --threads 7 --shard-tokens 3K > t7.log 2>&1
if same_dir t1 t2 && same_dir t1 t7 && [ "$(ls t1 | wc -l)" -gt 10 ]; then ok threads_identical "$(ls t1 | wc -l) files"
else fail threads_identical "$(ls t1 | wc -l) / $(ls t2 | wc -l) / $(ls t7 | wc -l) files: $(tail -1 t7.log)"; fi

# one big text file is many documents, so it has a validation shard
prep big.txt -o big > big.log 2>&1
if [ -f big/val_000000.bin ] && grep -q "^prepared 1 inputs, [0-9]\{3,\} documents" big.log; then ok big_file_val_shard "$(grep '^prepared' big.log)"
else fail big_file_val_shard "$(cat big.log)"; fi

# bad inputs: one message naming the file (and line), exit code 1, nothing written
# expect_error NAME WANT INPUT...
expect_error() {
    name=$1; want=$2; shift 2
    out=$(prep "$@" -o "err_$name" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -qF -- "$want" && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [ ! -e "err_$name" ]
    then ok "$name" "$out"; else fail "$name" "exit code $rc: $out"; fi
}
printf '{"text": "one"}\n{"text": "two"}\n{"text": "three"\n' > bad.jsonl
expect_error bad_json_line "bad.jsonl: line 3: not JSON" bad.jsonl
cp corpus/a.txt notgz.gz
expect_error misnamed_gz "notgz.gz: named as gzip-compressed" notgz.gz
head -c 3000 corpus_gz/a.txt.gz > cut.txt.gz
expect_error truncated_gz "cut.txt.gz: truncated gzip data" cut.txt.gz
printf '[{"text": "a"},\n {"text": "b"}]\n' > array.json
expect_error json_array "array.json: line 1: a JSON array" array.json

# on a terminal, a progress line with bytes, tokens, tokens/s and an ETA (script gives the command a tty)
if command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1; then
    i=0; while [ $i -lt 100 ]; do cat big.txt; i=$((i + 1)); done > huge.txt   # 40 MB: a second or so
    script -qec "\"$GPT2GEN\" prepare --ranks \"$RANKS\" huge.txt -o tty --threads 1" /dev/null > tty.log 2>&1
    line=$(tr '\r' '\n' < tty.log | tr -d '\033' | sed 's/\[K$//' | grep '^prepare: ' | grep 'ETA' | tail -1)
    if printf '%s' "$line" | grep -q "^prepare: [0-9.]* MB of [0-9.]* MB ([0-9]*%), [0-9.]*[KM]* tokens, [0-9.]*[KM]* tokens/s, ETA "
    then ok progress_tty "$line"; else fail progress_tty "no progress line with an ETA: $(tr '\r' '\n' < tty.log | head -5)"; fi
else skip progress_tty "no script command (util-linux) to give prepare a terminal"; fi

# the data set trains: the micro config on a folder and a JSON lines file, with validation
prep corpus docs.jsonl -o both > both.log 2>&1
M="$ROOT/tests/configs/micro.lua"
train() { "$GPT2GEN" train "$M" --backend cpu --set train.steps=2 --set eval.val_every=2 --set eval.val_batches=1 \
          --set data.tokenizer="$WORK/both/tokenizer.bin" "$@"; }
out=$(train --set checkpoint.dir="$WORK/run" --set data.train="$WORK/both/train_*.bin" --set data.val="$WORK/both/val_*.bin" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c '| val loss')" -eq 2 ] && [ -f run/model_00000002.bin ]; then
    ok trains_on_it "$(printf '%s\n' "$out" | grep '| val loss' | tail -1)"
else fail trains_on_it "exit code $rc: $(printf '%s' "$out" | tail -3)"; fi

# no validation shards: said once, and training goes on without validation
out=$(train --set checkpoint.dir="$WORK/noval" --set data.train="$WORK/both/train_*.bin" --set data.val="$WORK/none/val_*.bin" 2>&1); rc=$?
note="note: no validation set ($WORK/none/val_*.bin matches no shards): training without validation"
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -cF "$note")" -eq 1 ] && ! printf '%s' "$out" | grep -q 'val loss' \
   && [ -f noval/model_00000002.bin ]; then ok no_val_trains
else fail no_val_trains "exit code $rc: $(printf '%s' "$out" | tail -3)"; fi

# missing training shards: the message names the command that makes them, in their folder
out=$(train --set checkpoint.dir="$WORK/notrain" --set data.train="$WORK/none/train_*.bin" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -qF "none/train_*.bin: no token shards match this pattern (make them with \`gpt2gen prepare FILE... -o $WORK/none\`"
then ok missing_shards_named; else fail missing_shards_named "exit code $rc: $(printf '%s' "$out" | tail -2)"; fi
finish
