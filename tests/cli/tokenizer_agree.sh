#!/bin/sh
# Holds our GPT-2 encoder and `gpt2gen prepare` against tiktoken: the same text must give the same ids.
#
# tiktoken's own get_encoding("gpt2") downloads its ranks; instead this builds the same encoding from
# data/gpt2.tiktoken (tools/setup_data.sh fetches it) with GPT-2's pattern and <|endoftext|> = 50256.
# Inputs: every fortunes text file (when the fortunes package is installed) and synthetic stress text
# (random Unicode from every general category, whitespace runs of every White_Space character and of
# characters Python calls space but the pattern does not, numbers in many scripts, contractions in both
# cases, punctuation, emoji sequences, and very long pieces).
# Prints "ok name" / "FAIL name: why" / "skip name: why" lines, then "RESULT passed failed skipped" (tests/lib.sh).
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
RANKS=data/gpt2.tiktoken
BIN=$TEST_DIR/test_tokenizer
FORTUNES=/usr/share/games/fortunes
TESTS="agree_tokenizer_file agree_raw_text agree_prepare_stress agree_prepare_fortunes"

why=""
python3 -c "import tiktoken" 2>/dev/null || why="python3 with tiktoken is not installed (pip install tiktoken)"
[ -z "$why" ] && [ ! -f "$RANKS" ] && why="$RANKS is missing (run tools/setup_data.sh)"
[ -z "$why" ] && [ ! -x "$BIN" ] && why="$BIN is not built (run make tests-bin)"
if [ -n "$why" ]; then
    for t in $TESTS; do skip "$t" "$why"; done
    finish
fi

scratch
tmp=$WORK
# The real command when the main program has it, else the same code through the test program.
if [ -x "$GPT2GEN" ] && "$GPT2GEN" prepare --help >/dev/null 2>&1; then PREPARE="$GPT2GEN prepare"; else PREPARE="$BIN --prepare"; fi

cat > "$tmp/ref.py" <<'EOF'
"""Reference side: tiktoken's gpt2 encoding, the stress text, and the checks."""
import base64, glob, os, random, struct, sys, unicodedata
import tiktoken

PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = 50256


def encoding(ranks_path):
    ranks = {}
    with open(ranks_path, "rb") as f:
        for line in f:
            if line.strip():
                b64, rank = line.split()
                ranks[base64.b64decode(b64)] = int(rank)
    return tiktoken.Encoding(name="gpt2_local", pat_str=PAT, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": EOT})


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n = struct.unpack("<3i", data[:12])
    assert magic == 20240520 and version == 1 and len(data) == 1024 + 2 * n, f"{path}: bad shard"
    return list(struct.unpack(f"<{n}H", data[1024:]))


def read_split(d, split):
    ids = []
    for p in sorted(glob.glob(os.path.join(d, f"{split}_*.bin"))):
        ids += read_shard(p)
    return ids


def split_docs(data):
    """The rule of gpt2gen prepare: lines holding only "%" (or "%\\r") separate documents; blank ones drop."""
    docs, start, i, n = [], 0, 0, len(data)
    while i < n:
        j = data.find(b"\n", i)
        end = n if j < 0 else j
        if data[i:end] in (b"%", b"%\r"):
            docs.append(data[start:i])
            start = n if j < 0 else end + 1
        i = n if j < 0 else end + 1
    docs.append(data[start:])
    return [d for d in docs if d.strip()]


def first_difference(got, want, enc):
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    ctx = lambda ids: repr(b"".join(enc.decode_single_token_bytes(t) for t in ids if t < 50257))[:120]
    return (f"{len(got)} ids vs tiktoken's {len(want)}; first difference at {k}: ours {got[k:k+8]} "
            f"tiktoken {want[k:k+8]} near {ctx(want[max(0, k-8):k+8])}")


def check_prepare(enc, outdir, frac, files):
    docs = []
    for f in files:
        with open(f, "rb") as fh:
            docs += split_docs(fh.read())
    f = round(frac * 1e6)   # the fraction in millionths
    want = {"val": [], "train": []}
    for i, d in enumerate(docs):
        is_val = (i + 1) * f // 1000000 > i * f // 1000000   # floor((i+1)F) > floor(iF): every tenth for 0.1
        want["val" if is_val else "train"] += [EOT] + enc.encode_ordinary(d.decode("utf-8"))
    for split in ("val", "train"):
        got = read_split(outdir, split)
        if got != want[split]:
            print(f"{split}: {first_difference(got, want[split], enc)}")
            return 1
    print(f"{len(docs)} documents, {len(want['val']) + len(want['train'])} tokens identical")
    return 0


def check_raw(enc, text_path, shard_path):
    with open(text_path, "rb") as f:
        text = f.read().decode("utf-8")
    want, got = enc.encode_ordinary(text), read_shard(shard_path)
    if got != want:
        print(first_difference(got, want, enc))
        return 1
    print(f"{len(text.encode())} bytes, {len(want)} tokens identical")
    return 0


def check_tokenizer_file(enc, path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, vocab, eot = struct.unpack("<4i", data[:16])
    if (magic, version, vocab, eot) != (20240328, 2, 50257, EOT):
        print(f"header {magic} {version} {vocab} {eot}")
        return 1
    at = 1024
    for i in range(vocab):
        n = data[at]
        b = data[at + 1:at + 1 + n]
        at += 1 + n
        if b != enc.decode_single_token_bytes(i):
            print(f"token {i}: {b!r} vs tiktoken's {enc.decode_single_token_bytes(i)!r}")
            return 1
    if at != len(data):
        print(f"{len(data) - at} bytes after the last token")
        return 1
    print(f"{vocab} tokens identical")
    return 0


# ---------- stress text ----------

SPACES = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2005", "\u200a",
          "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\r\n"]
# Letters and digits new in Unicode 15.0-16.0 (Kawi, CJK Ext H, Cyrillic TJE, Latin, Garay, Kirat Rai digits):
# our tables follow tiktoken's regex crate (Unicode 16.0), not Python's older unicodedata.
NEWER_UNICODE = ["\U00011F04", "\U00031350", "\u1C89", "\u1C8A", "\uA7CB", "\uA7DA", "\U00010D50", "\U00016D70", "\U00016D79"]
NOT_SPACES = ["\x1c", "\x1d", "\x1e", "\x1f", "\u200b", "\u180e", "\ufeff"]   # Python isspace() or look-alikes


def by_category():
    cats = {}
    for cp in range(0x30000):
        c = unicodedata.category(chr(cp))
        if c not in ("Cn", "Cs", "Co"):
            cats.setdefault(c, []).append(chr(cp))
    return cats


def stress_text(rng, cats, n_items):
    names = sorted(cats)
    letters = cats["Ll"] + cats["Lu"] + cats["Lo"][:3000] + cats["Lm"] + cats["Lt"]
    digits = cats["Nd"] + cats["Nl"] + cats["No"]
    gens = [
        lambda: "".join(rng.choice(cats[rng.choice(names)]) for _ in range(rng.randint(1, 6))),
        lambda: rng.choice(["", " "]) + "".join(rng.choice(letters) for _ in range(rng.randint(1, 12))),
        lambda: rng.choice(["", " "]) + "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(1, 15))),
        lambda: rng.choice(["", " "]) + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 14))),
        lambda: rng.choice(["", " "]) + "".join(rng.choice(digits) for _ in range(rng.randint(1, 5))),
        lambda: "".join(rng.choice(SPACES + NOT_SPACES[:2]) for _ in range(rng.randint(1, 8))),
        lambda: rng.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "''s", "'", "' s", "'x", "’s"]),
        lambda: rng.choice(["", " "]) + "".join(rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~—–…«»¿¡") for _ in range(rng.randint(1, 6))),
        lambda: rng.choice(["👩‍👩‍👧‍👦", "👍🏽", "🇯🇵", "❤️", "🤖", "e\u0301", "\u0915\u094d\u0937", "<|endoftext|>", "%"]),
        lambda: rng.choice(NOT_SPACES) * rng.randint(1, 3),
        lambda: rng.choice(["", " "]) + "".join(rng.choice(NEWER_UNICODE) for _ in range(rng.randint(1, 4))),
    ]
    out = [rng.choice(gens)() for _ in range(n_items)]
    # a few long pieces: the merge loop's worst case
    out.insert(rng.randrange(len(out)), " " * 3000)
    out.insert(rng.randrange(len(out)), "a" * 2000)
    out.insert(rng.randrange(len(out)), "7" * 1500)
    out.insert(rng.randrange(len(out)), "\n" * 700 + "\t " * 300)
    out.insert(rng.randrange(len(out)), " " + "".join(rng.choice("abcdefghij") for _ in range(6000)))
    out.insert(rng.randrange(len(out)), "".join(rng.choice(letters) for _ in range(2500)))
    out.insert(rng.randrange(len(out)), "".join(rng.choice("0123456789") for _ in range(4000)))
    out.insert(rng.randrange(len(out)), "".join(rng.choice("!#$%&()*+,-./:;<=>?@[]^_{|}~") for _ in range(3000)))
    return "".join(out)


def write_stress(outdir):
    rng, cats = random.Random(20240328), by_category()
    files = []
    for k in range(4):
        path = os.path.join(outdir, f"stress{k}.txt")
        text = stress_text(rng, cats, 40000)
        if k == 3:   # a fortune-style file: many documents
            text = "\n%\n".join(stress_text(rng, cats, 200) for _ in range(150)) + "\n%\n"
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        files.append(path)
    print(" ".join(files))
    return 0


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "stress":
        sys.exit(write_stress(args[0]))
    enc = encoding(args[0])
    if mode == "prepare":
        sys.exit(check_prepare(enc, args[1], float(args[2]), args[3:]))
    if mode == "raw":
        sys.exit(check_raw(enc, args[1], args[2]))
    if mode == "tokfile":
        sys.exit(check_tokenizer_file(enc, args[1]))
EOF

ref() { python3 "$tmp/ref.py" "$@" > "$tmp/ref.out" 2>&1; }
stress=$(python3 "$tmp/ref.py" stress "$tmp") || { fail agree_prepare_stress "could not write the stress text"; finish; }

# 1. the stress files with small shards and a validation split: shards, split and ids must match (split at
# "%" lines, the reference's rule: --split-docs separator)
if $PREPARE $stress -o "$tmp/stress" --ranks "$RANKS" --val-fraction 0.3 --shard-tokens 20000 --split-docs separator > "$tmp/prep.out" 2>&1; then
    if ref prepare "$RANKS" "$tmp/stress" 0.3 $stress; then ok agree_prepare_stress; echo "    $(cat "$tmp/ref.out")"
    else fail agree_prepare_stress "$(tail -1 "$tmp/ref.out")"; fi
else fail agree_prepare_stress "prepare failed: $(tail -1 "$tmp/prep.out")"; fi

# 2. the tokenizer file it wrote: every token's bytes as tiktoken has them
if [ -f "$tmp/stress/tokenizer.bin" ] && ref tokfile "$RANKS" "$tmp/stress/tokenizer.bin"; then ok agree_tokenizer_file
else fail agree_tokenizer_file "$(tail -1 "$tmp/ref.out" 2>/dev/null)"; fi

# 3. everything as one text (no document split): the encoder alone, and its speed
fortune_files=""
if [ -d "$FORTUNES" ]; then
    for f in "$FORTUNES"/*; do
        case "$f" in *.dat|*.u8) continue ;; esac
        [ -f "$f" ] && fortune_files="$fortune_files $f"
    done
fi
cat $fortune_files $stress > "$tmp/all.txt"
if $BIN --encode "$RANKS" "$tmp/all.txt" "$tmp/all.bin" > "$tmp/enc.out" 2>&1; then
    if ref raw "$RANKS" "$tmp/all.txt" "$tmp/all.bin"; then ok agree_raw_text; echo "    $(cat "$tmp/ref.out"); ours: $(cat "$tmp/enc.out")"
    else fail agree_raw_text "$(tail -1 "$tmp/ref.out")"; fi
else fail agree_raw_text "encode failed: $(tail -1 "$tmp/enc.out")"; fi

# 4. the default data set's inputs, as tools/setup_data.sh prepares them
if [ -z "$fortune_files" ]; then skip agree_prepare_fortunes "no fortune files in $FORTUNES (apt-get install fortunes)"
elif $PREPARE $fortune_files -o "$tmp/fortunes" --ranks "$RANKS" > "$tmp/prep.out" 2>&1; then
    if ref prepare "$RANKS" "$tmp/fortunes" 0.1 $fortune_files; then ok agree_prepare_fortunes; echo "    $(cat "$tmp/ref.out"); $(grep '^prepared' "$tmp/prep.out")"
    else fail agree_prepare_fortunes "$(tail -1 "$tmp/ref.out")"; fi
else fail agree_prepare_fortunes "prepare failed: $(tail -1 "$tmp/prep.out")"; fi
finish
