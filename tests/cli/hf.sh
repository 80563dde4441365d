#!/bin/sh
# gpt2gen export and import (Hugging Face folders), from a checkpoint of the micro model trained one step on the CPU:
# the exported model.safetensors read back with the safetensors package (PyPI) holds our weights in Hugging Face's
# names and layouts (the Conv1D weights transposed, no vocabulary padding, no lm_head) and its header follows the
# format; a numpy GPT-2 forward over the exported tensors (Hugging Face's conventions) gives the logits our CPU
# backend gives (build/tests/dump_logits); config.json has the shape; vocab.json and merges.txt are GPT-2's (a BPE
# from them encodes text as tiktoken does, and merge k makes token 256 + k); export then import gives the same
# bytes, in fp32 and for llm.c's bf16 checkpoint; bf16 and fp16 exports round to nearest even; import reads a
# sharded folder with an index, names without "transformer.", the old attn.bias buffers and a tied lm_head; each
# hostile or mismatched folder is one message naming the file and tensor, a non-zero exit and no checkpoint; an
# existing model.safetensors or checkpoint is kept unless --force; without a tokenizer the model is still exported.
# The safetensors package is installed by tools/install_deps.sh: in CI ($CI set) its absence fails the test, on a
# development machine it skips the checks that need it.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$WORK/run" --set train.steps=1 > "$WORK/train.log" 2>&1 \
    || { fail setup_checkpoint "$(tail -5 "$WORK/train.log")"; finish; }
CK=$WORK/run/model_00000001.bin
DUMP=$TEST_DIR/dump_logits
HF=$WORK/hf

PY_OK=1
if ! python3 -c "import numpy, safetensors" 2>/dev/null; then
    PY_OK=0
    if [ -n "$CI" ]; then fail python_safetensors "python3 cannot import numpy and safetensors (tools/install_deps.sh installs them)"
    else skip python_safetensors "python3 cannot import numpy and safetensors (pip install numpy safetensors): the checks of the files' contents skip"; fi
fi
TIKTOKEN_OK=1
python3 -c "import tiktoken, regex, numpy" 2>/dev/null && [ -f data/gpt2.tiktoken ] || TIKTOKEN_OK=0

cat > "$WORK/check.py" <<'PY'
"""The reference side: our checkpoint read with numpy, the safetensors package, a numpy GPT-2 forward."""
import json, os, struct, sys
import numpy as np


def read_checkpoint(path):
    raw = np.fromfile(path, dtype=np.uint8)
    h = raw[:1024].view(np.int32)
    assert h[0] == 20240326 and h[1] in (3, 5), f"{path}: bad header {h[:2]}"
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    body = raw[1024:]
    if h[1] == 3:
        p = body.view(np.float32)
    else:   # bf16: the top half of an fp32
        p = (body.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, 3 * C, C)),
              ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
              ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
              ("lnfw", (C,)), ("lnfb", (C,))]
    out, off = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape))
        out[name] = p[off:off + n].reshape(shape)
        off += n
    assert off == p.size, f"{path}: {p.size} parameters, the shape needs {off}"
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), out


def hf_names(shape, w, prefix="transformer."):
    """Our tensors in Hugging Face's names and layouts: the Conv1D weights are (in, out), ours (out, in)."""
    V, L = shape["V"], shape["L"]
    t = {prefix + "wte.weight": w["wte"][:V], prefix + "wpe.weight": w["wpe"],
         prefix + "ln_f.weight": w["lnfw"], prefix + "ln_f.bias": w["lnfb"]}
    for i in range(L):
        h = f"{prefix}h.{i}."
        t[h + "ln_1.weight"], t[h + "ln_1.bias"] = w["ln1w"][i], w["ln1b"][i]
        t[h + "attn.c_attn.weight"], t[h + "attn.c_attn.bias"] = w["qkvw"][i].T, w["qkvb"][i]
        t[h + "attn.c_proj.weight"], t[h + "attn.c_proj.bias"] = w["attprojw"][i].T, w["attprojb"][i]
        t[h + "ln_2.weight"], t[h + "ln_2.bias"] = w["ln2w"][i], w["ln2b"][i]
        t[h + "mlp.c_fc.weight"], t[h + "mlp.c_fc.bias"] = w["fcw"][i].T, w["fcb"][i]
        t[h + "mlp.c_proj.weight"], t[h + "mlp.c_proj.bias"] = w["fcprojw"][i].T, w["fcprojb"][i]
    return t


def bf16_round(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def header(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return n, json.loads(raw[8:8 + n])


def cmd_tensors(ck, st, dtype):
    """The exported file holds our weights (rounded to dtype), in Hugging Face's names and layouts."""
    import safetensors
    from safetensors import safe_open
    shape, w = read_checkpoint(ck)
    want = hf_names(shape, w)
    n, hdr = header(st)
    assert (8 + n) % 8 == 0, f"the data starts at {8 + n}, not a multiple of 8"
    assert hdr.get("__metadata__") == {"format": "pt"}, f"__metadata__ is {hdr.get('__metadata__')}"
    with safe_open(st, framework="numpy") as f:
        assert f.metadata() == {"format": "pt"}
    # the package's own parse: every tensor's dtype, shape and bytes (numpy has no bf16, so the bytes)
    got = {name: t for name, t in safetensors.deserialize(open(st, "rb").read())}
    assert set(got) == set(want), f"names differ: extra {sorted(set(got) - set(want))[:5]}, missing {sorted(set(want) - set(got))[:5]}"
    st_dtype = {"fp32": "F32", "bf16": "BF16", "fp16": "F16"}[dtype]
    for k, v in want.items():
        g = got[k]
        assert g["dtype"] == st_dtype, f"{k}: dtype {g['dtype']}, expected {st_dtype}"
        assert tuple(g["shape"]) == v.shape, f"{k}: shape {g['shape']}, expected {v.shape}"
        if dtype == "fp32":
            ok = np.array_equal(np.frombuffer(bytes(g["data"]), dtype="<f4").reshape(v.shape), v)
        elif dtype == "fp16":
            ok = np.array_equal(np.frombuffer(bytes(g["data"]), dtype="<u2"), v.astype(np.float16).view(np.uint16).ravel())
        else:
            ok = np.array_equal(np.frombuffer(bytes(g["data"]), dtype="<u2"), bf16_round(v).ravel())
        assert ok, f"{k}: values differ from the checkpoint's"
    if dtype != "bf16":   # and through safetensors.numpy, as a user reads them
        from safetensors.numpy import load_file
        for k, v in load_file(st).items():
            assert np.array_equal(v, want[k].astype(v.dtype)), f"{k}: safetensors.numpy.load_file differs"
    print(f"{len(want)} tensors equal")


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def forward(t, cfg, ids):
    """GPT2LMHeadModel's forward, in float64, over Hugging Face's tensors (x @ W for Conv1D)."""
    g = lambda k: t["transformer." + k].astype(np.float64)
    C, NH, T = cfg["n_embd"], cfg["n_head"], len(ids)
    hs = C // NH
    x = g("wte.weight")[ids] + g("wpe.weight")[:T]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        h = layernorm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"))
        qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")
        q, k, v = (qkv[:, j * C:(j + 1) * C].reshape(T, NH, hs).transpose(1, 0, 2) for j in range(3))
        a = q @ k.transpose(0, 2, 1) / np.sqrt(hs) + mask
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        y = (a @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
        h = layernorm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"))
        x = x + gelu_new(h @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias")) @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    x = layernorm(x, g("ln_f.weight"), g("ln_f.bias"))
    return x @ g("wte.weight").T   # the tied lm_head


def cmd_forward(folder, logits_path, *ids):
    """Our CPU backend's logits (dump_logits) against a numpy forward of the exported folder."""
    from safetensors.numpy import load_file
    cfg = json.load(open(os.path.join(folder, "config.json")))
    t = load_file(os.path.join(folder, "model.safetensors"))
    ids = [int(i) for i in ids]
    ref = forward(t, cfg, ids)
    ours = np.fromfile(logits_path, dtype=np.float32).reshape(len(ids), cfg["vocab_size"])
    err = np.abs(ours - ref).max()
    assert err < 1e-4, f"largest difference {err:.3g} (logits up to {np.abs(ref).max():.3g})"
    print(f"largest difference {err:.2g}")


def cmd_config(folder, ck):
    shape, _ = read_checkpoint(ck)
    c = json.load(open(os.path.join(folder, "config.json")))
    want = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": shape["V"], "n_positions": shape["maxT"],
            "n_ctx": shape["maxT"], "n_embd": shape["C"], "n_layer": shape["L"], "n_head": shape["NH"],
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "bos_token_id": 50256, "eos_token_id": 50256,
            "tie_word_embeddings": True, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    bad = {k: c.get(k) for k, v in want.items() if c.get(k) != v}
    assert not bad, f"config.json differs: {bad}"
    print("config.json ok")


def byte_chars():
    """GPT-2's byte-to-unicode map, written out from its definition."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    m, extra = {}, 0
    for b in range(256):
        if b in keep:
            m[b] = chr(b)
        else:
            m[b] = chr(256 + extra)
            extra += 1
    return m


def cmd_tokenizer(folder, ranks_path, text_path):
    """vocab.json and merges.txt are GPT-2's: merge k makes token 256 + k, and a BPE over them encodes as tiktoken."""
    vocab = json.load(open(os.path.join(folder, "vocab.json"), encoding="utf-8"))
    lines = open(os.path.join(folder, "merges.txt"), encoding="utf-8").read().split("\n")
    assert lines[0] == "#version: 0.2", f"first line {lines[0]!r}"
    merges = [tuple(l.split(" ")) for l in lines[1:] if l]
    assert len(vocab) == 50257 and vocab["<|endoftext|>"] == 50256, f"{len(vocab)} tokens"
    assert len(merges) == 50000, f"{len(merges)} merges"
    for k, (a, b) in enumerate(merges):
        assert vocab.get(a + b) == 256 + k, f"merge {k} ({a} {b}) makes {vocab.get(a + b)}, expected {256 + k}"
    bc = byte_chars()
    assert all(vocab[bc[b]] < 256 for b in range(256)), "a byte is not one of the first 256 tokens"
    rank = {m: i for i, m in enumerate(merges)}

    def bpe(word):
        parts = list(word)
        while len(parts) > 1:
            pairs = [(rank.get((parts[i], parts[i + 1]), 1 << 30), i) for i in range(len(parts) - 1)]
            r, _ = min(pairs)
            if r == 1 << 30:
                break
            a, b = merges[r]
            out, i = [], 0
            while i < len(parts):   # every occurrence of the pair, left to right
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b); i += 2
                else:
                    out.append(parts[i]); i += 1
            parts = out
        return parts

    import base64, regex, tiktoken
    pat = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    ranks = {}
    for line in open(ranks_path, "rb"):
        if line.strip():
            b64, r = line.split()
            ranks[base64.b64decode(b64)] = int(r)
    enc = tiktoken.Encoding(name="gpt2_local", pat_str=pat, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
    text = open(text_path, encoding="utf-8", errors="replace").read()[:30000]
    text += " Hello world!  It's 2024: naïve café, 日本語, emoji 🙂🙂, tabs\t\tand\n\nnewlines,   spaces 12345 they'll"
    ids = []
    for piece in regex.findall(pat, text):
        for part in bpe("".join(bc[b] for b in piece.encode("utf-8"))):
            ids.append(vocab[part])
    want = enc.encode_ordinary(text)
    assert ids == want, f"ids differ at {next(i for i, (x, y) in enumerate(zip(ids, want)) if x != y) if ids[:len(want)] != want[:len(ids)] else min(len(ids), len(want))}"
    print(f"{len(ids)} tokens agree with tiktoken")


def cmd_bf16(src, dst):
    """llm.c's bf16 checkpoint (version 5) of an fp32 one, rounded to nearest even."""
    raw = np.fromfile(src, dtype=np.uint8)
    h = raw[:1024].view(np.int32).copy()
    h[1] = 5
    open(dst, "wb").write(h.tobytes() + bf16_round(raw[1024:].view(np.float32)).tobytes())


def cmd_fp16_ck(ck, out):
    """The checkpoint an fp16 export imports as: every weight rounded to fp16 (padding rows stay zero)."""
    raw = np.fromfile(ck, dtype=np.uint8)
    body = raw[1024:].view(np.float32).astype(np.float16).astype(np.float32)
    open(out, "wb").write(raw[:1024].tobytes() + body.tobytes())


def save(path, tensors, dtypes=None):
    from safetensors.numpy import save_file
    save_file(tensors, path, metadata={"format": "pt"})


def cmd_shard(folder, out):
    """The folder as transformers shards it: two files and an index, with old attn.bias buffers and a tied lm_head."""
    from safetensors.numpy import load_file
    t = load_file(os.path.join(folder, "model.safetensors"))
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(folder, "config.json")))
    T = cfg["n_positions"]
    a = {k: v for k, v in t.items() if ".h.0." in k or "wte" in k}
    b = {k: v.astype(np.float16) if "ln_f" in k else v for k, v in t.items() if k not in a}
    a["transformer.h.0.attn.bias"] = np.tril(np.ones((1, 1, T, T), dtype=np.float32))
    a["transformer.h.0.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    b["lm_head.weight"] = t["transformer.wte.weight"]
    save(os.path.join(out, "model-00001-of-00002.safetensors"), a)
    save(os.path.join(out, "model-00002-of-00002.safetensors"), b)
    wm = {k: "model-00001-of-00002.safetensors" for k in a}
    wm.update({k: "model-00002-of-00002.safetensors" for k in b})
    json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))


def cmd_ln_f_fp16_ck(ck, out):
    """What cmd_shard's folder imports as: ln_f rounded to fp16."""
    raw = np.fromfile(ck, dtype=np.uint8)
    shape, _ = read_checkpoint(ck)
    p = raw[1024:].view(np.float32).copy()
    C = shape["C"]
    p[-2 * C:] = p[-2 * C:].astype(np.float16).astype(np.float32)
    open(out, "wb").write(raw[:1024].tobytes() + p.tobytes())


def cmd_rename(folder, out, mode):
    """Variants of the folder: names without "transformer." (GPT2Model, the Hub's gpt2), or a changed tensor."""
    from safetensors.numpy import load_file
    t = load_file(os.path.join(folder, "model.safetensors"))
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(folder, "config.json")))
    if mode == "noprefix":
        t = {k[len("transformer."):]: v for k, v in t.items()}
    elif mode == "lm_head":
        t["lm_head.weight"] = t["transformer.wte.weight"] + 1
    elif mode == "extra":
        t["score.weight"] = np.zeros((2, cfg["n_embd"]), dtype=np.float32)
    elif mode == "missing":
        del t["transformer.h.1.mlp.c_fc.bias"]
    elif mode == "shape":
        t["transformer.h.0.attn.c_attn.weight"] = np.ascontiguousarray(t["transformer.h.0.attn.c_attn.weight"].T)
    elif mode == "int":
        t["transformer.h.0.ln_1.bias"] = t["transformer.h.0.ln_1.bias"].astype(np.int32)
    elif mode == "config_embd":
        cfg["n_embd"] = cfg["n_embd"] * 2
    elif mode == "config_act":
        cfg["activation_function"] = "relu"
    save(os.path.join(out, "model.safetensors"), t)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))


def cmd_hostile(folder, out, mode):
    """model.safetensors broken at the byte level (the header length, its JSON, offsets, dtypes)."""
    import shutil
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(folder, "config.json"), out)
    raw = open(os.path.join(folder, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    first = "transformer.wpe.weight"
    if mode == "tiny":
        blob = raw[:5]
    elif mode == "length":
        blob = struct.pack("<Q", len(raw)) + raw[8:]
    elif mode == "json":
        blob = raw[:8] + b"{not json" + raw[8 + 9:]
    elif mode == "duplicate":
        text = raw[8:8 + n].decode()
        dup = '{"%s":%s,' % (first, json.dumps(hdr[first]))
        text = dup + text[1:]
        blob = struct.pack("<Q", len(text)) + text.encode() + data
    else:
        e = hdr[first]
        if mode == "outside":
            e["data_offsets"] = [len(data) - 4, len(data) + e["data_offsets"][1] - e["data_offsets"][0] - 4]
        elif mode == "overlap":
            b0 = hdr["transformer.wte.weight"]["data_offsets"][0]
            e["data_offsets"] = [b0 + 4, b0 + 4 + e["data_offsets"][1] - e["data_offsets"][0]]
        elif mode == "dtype":
            e["dtype"] = "F33"
        elif mode == "bytes":
            e["shape"] = [e["shape"][0], e["shape"][1] + 1]
        elif mode == "overflow":
            e["shape"] = [1 << 62, 1 << 62]
        elif mode == "negative":
            e["data_offsets"] = [-8, e["data_offsets"][1]]
        text = json.dumps(hdr).encode()
        text += b" " * (-(8 + len(text)) % 8)
        blob = struct.pack("<Q", len(text)) + text + data
    open(os.path.join(out, "model.safetensors"), "wb").write(blob)


if __name__ == "__main__":
    try:
        globals()["cmd_" + sys.argv[1]](*sys.argv[2:])
    except AssertionError as e:
        print(f"FAILED: {e}")
        sys.exit(1)
PY
py() { python3 "$WORK/check.py" "$@"; }

# ---- export ----
all_there() { for f in "$@"; do [ -s "$HF/$f" ] || return 1; done; }
out=$("$GPT2GEN" export --checkpoint "$CK" --to "$HF" --tokenizer data/fortunes/tokenizer.bin 2> "$WORK/err"); rc=$?
if [ $rc -eq 0 ] && [ ! -s "$WORK/err" ] && printf '%s' "$out" | grep -q "^wrote $HF: model.safetensors.*vocab.json, merges.txt" \
    && all_there model.safetensors config.json vocab.json merges.txt tokenizer_config.json; then
    ok export_writes_the_folder
else fail export_writes_the_folder "rc=$rc out='$out' err: $(cat "$WORK/err") files: $(ls "$HF" 2>&1)"; fi
ls "$HF" | grep -q tmp && fail export_no_temporaries "$(ls "$HF")"

if [ $PY_OK -eq 1 ]; then
    r=$(py tensors "$CK" "$HF/model.safetensors" fp32 2>&1) && ok safetensors_holds_our_weights "$r" || fail safetensors_holds_our_weights "$r"
    r=$(py config "$HF" "$CK" 2>&1) && ok config_json "$r" || fail config_json "$r"
    # our CPU backend's logits against a numpy GPT-2 over the exported tensors
    if [ -x "$DUMP" ]; then
        toks="50256 464 2068 7586 21831 18045 625 262 16931 3290 13 198 40 1101 257 1332"
        if "$DUMP" "$CK" "$WORK/logits.f32" $toks 2> "$WORK/err" && r=$(py forward "$HF" "$WORK/logits.f32" $toks 2>&1)
        then ok logits_equal_numpy_forward "$r"; else fail logits_equal_numpy_forward "$(cat "$WORK/err") $r"; fi
    else fail logits_equal_numpy_forward "$DUMP is not built (make tests-bin)"; fi
fi
if [ $TIKTOKEN_OK -eq 1 ]; then
    text=$(ls /usr/share/games/fortunes/* 2>/dev/null | grep -v '\.dat$\|\.u8$' | head -1)
    [ -n "$text" ] || { printf 'The quick brown fox jumps over the lazy dog.\n' > "$WORK/text.txt"; text=$WORK/text.txt; }
    r=$(py tokenizer "$HF" data/gpt2.tiktoken "$text" 2>&1) && ok vocab_and_merges_are_gpt2s "$r" || fail vocab_and_merges_are_gpt2s "$r"
else skip vocab_and_merges_are_gpt2s "needs python3 with tiktoken and numpy, and data/gpt2.tiktoken"; fi

# ---- export then import: the same bytes ----
"$GPT2GEN" import "$HF" -o "$WORK/back.bin" > "$WORK/out" 2> "$WORK/err"; rc=$?
if [ $rc -eq 0 ] && cmp -s "$CK" "$WORK/back.bin" && grep -q "^wrote $WORK/back.bin: .*L=2 C=64 NH=2 maxT=32 V=50257 (padded to 50304)" "$WORK/out"
then ok export_import_same_bytes; else fail export_import_same_bytes "rc=$rc $(cat "$WORK/out" "$WORK/err")"; fi

# llm.c's bf16 checkpoint: exported (fp32 or bf16) and imported as bf16, the same bytes
if [ $PY_OK -eq 1 ]; then
    py bf16 "$CK" "$WORK/bf16.bin"
    "$GPT2GEN" export --checkpoint "$WORK/bf16.bin" --to "$WORK/hf16" --tokenizer data/fortunes/tokenizer.bin > /dev/null 2>&1 \
        && "$GPT2GEN" import "$WORK/hf16" -o "$WORK/bf16_back.bin" --dtype bf16 > /dev/null 2>&1 \
        && cmp -s "$WORK/bf16.bin" "$WORK/bf16_back.bin" && ok bf16_checkpoint_round_trip || fail bf16_checkpoint_round_trip "$(ls -la "$WORK"/bf16*)"
    "$GPT2GEN" export --checkpoint "$CK" --to "$WORK/hfb" --dtype bf16 > /dev/null 2>&1 \
        && r=$(py tensors "$CK" "$WORK/hfb/model.safetensors" bf16 2>&1) \
        && grep -q '"torch_dtype": "bfloat16"' "$WORK/hfb/config.json" \
        && "$GPT2GEN" import "$WORK/hfb" -o "$WORK/b.bin" --dtype bf16 > /dev/null 2>&1 && cmp -s "$WORK/bf16.bin" "$WORK/b.bin" \
        && ok export_bf16_rounds_nearest_even "$r" || fail export_bf16_rounds_nearest_even "$r"
    "$GPT2GEN" export --checkpoint "$CK" --to "$WORK/hfh" --dtype fp16 > /dev/null 2>&1 \
        && r=$(py tensors "$CK" "$WORK/hfh/model.safetensors" fp16 2>&1) && py fp16_ck "$CK" "$WORK/h_want.bin" \
        && "$GPT2GEN" import "$WORK/hfh" -o "$WORK/h.bin" > /dev/null 2>&1 && cmp -s "$WORK/h_want.bin" "$WORK/h.bin" \
        && ok export_fp16_import_fp32 "$r" || fail export_fp16_import_fp32 "$r"

    # transformers' layouts: shards and an index, old buffers, a tied lm_head, an fp16 tensor; names without a prefix
    py shard "$HF" "$WORK/sharded" && py ln_f_fp16_ck "$CK" "$WORK/sh_want.bin"
    "$GPT2GEN" import "$WORK/sharded" -o "$WORK/sh.bin" > "$WORK/out" 2> "$WORK/err" && cmp -s "$WORK/sh_want.bin" "$WORK/sh.bin" \
        && grep -q "ignored" "$WORK/out" && ok import_sharded_index "$(cat "$WORK/out")" || fail import_sharded_index "$(cat "$WORK/out" "$WORK/err")"
    py rename "$HF" "$WORK/noprefix" noprefix
    "$GPT2GEN" import "$WORK/noprefix" -o "$WORK/np.bin" > /dev/null 2> "$WORK/err" && cmp -s "$CK" "$WORK/np.bin" \
        && ok import_names_without_prefix || fail import_names_without_prefix "$(cat "$WORK/err")"
fi

# ---- one clear message each, a non-zero exit, and no checkpoint ----
expect() {   # NAME RC PATTERN -- command...
    name=$1 want=$2 pat=$3; shift 4
    rm -f "$WORK/x.bin"
    "$@" > "$WORK/o" 2> "$WORK/e"; rc=$?
    if [ $rc -eq "$want" ] && [ "$(wc -l < "$WORK/e")" -eq 1 ] && grep -q -- "$pat" "$WORK/e" && [ ! -s "$WORK/o" ] && [ ! -e "$WORK/x.bin" ]
    then ok "$name"
    else fail "$name" "rc=$rc (expected $want), stderr: $(cat "$WORK/e"), stdout: $(head -c 200 "$WORK/o")"; fi
}
imp() { "$GPT2GEN" import "$@" -o "$WORK/x.bin"; }
if [ $PY_OK -eq 1 ]; then
    for m in tiny length json duplicate outside overlap dtype bytes overflow negative; do py hostile "$HF" "$WORK/bad_$m" $m; done
    S=model.safetensors
    expect hostile_truncated 1 "bad_tiny/$S: truncated: 5 bytes" -- imp "$WORK/bad_tiny"
    expect hostile_header_length 1 "bad_length/$S: the header length is .* more than the" -- imp "$WORK/bad_length"
    expect hostile_bad_json 1 "bad_json/$S: the header is not valid JSON" -- imp "$WORK/bad_json"
    expect hostile_duplicate_name 1 "bad_duplicate/$S: the header is not valid JSON: duplicate object key" -- imp "$WORK/bad_duplicate"
    expect hostile_offsets_outside 1 "bad_outside/$S: tensor transformer.wpe.weight: data_offsets .* outside the data" -- imp "$WORK/bad_outside"
    expect hostile_overlap 1 "bad_overlap/$S: tensor .*: data_offsets .* overlap those of tensor" -- imp "$WORK/bad_overlap"
    expect hostile_unknown_dtype 1 "bad_dtype/$S: tensor transformer.wpe.weight: unknown dtype 'F33'" -- imp "$WORK/bad_dtype"
    expect hostile_shape_bytes 1 "bad_bytes/$S: tensor transformer.wpe.weight: its shape holds 2080 F32 elements, 8320 bytes, but data_offsets give 8192" -- imp "$WORK/bad_bytes"
    expect hostile_shape_overflow 1 "bad_overflow/$S: tensor transformer.wpe.weight: the shape's element count overflows" -- imp "$WORK/bad_overflow"
    expect hostile_negative_offset 1 "bad_negative/$S: tensor transformer.wpe.weight: \"data_offsets\" is not \[begin, end\]" -- imp "$WORK/bad_negative"
    for m in lm_head extra missing shape int config_embd config_act; do py rename "$HF" "$WORK/mis_$m" $m; done
    expect lm_head_differs 1 "mis_lm_head/$S: lm_head.weight differs from transformer.wte.weight" -- imp "$WORK/mis_lm_head"
    expect unexpected_tensor 1 "mis_extra/$S: tensor score.weight is not part of a GPT2LMHeadModel" -- imp "$WORK/mis_extra"
    expect missing_tensor 1 "mis_missing/$S: missing tensor transformer.h.1.mlp.c_fc.bias (shape \[256\]" -- imp "$WORK/mis_missing"
    expect wrong_shape 1 "mis_shape/$S: tensor transformer.h.0.attn.c_attn.weight has shape \[192, 64\], expected \[64, 192\]" -- imp "$WORK/mis_shape"
    expect wrong_dtype 1 "mis_int/$S: tensor transformer.h.0.ln_1.bias: dtype I32, expected F32, F16 or BF16" -- imp "$WORK/mis_int"
    expect config_shape_disagrees 1 "mis_config_embd/$S: tensor transformer.wte.weight has shape \[50257, 64\], expected \[50257, 128\]" -- imp "$WORK/mis_config_embd"
    expect config_activation 1 "mis_config_act/config.json: \"activation_function\" is relu, expected \"gelu_new\"" -- imp "$WORK/mis_config_act"
    mkdir -p "$WORK/trav" && cp "$HF/config.json" "$WORK/trav/" \
        && printf '{"weight_map": {"transformer.wte.weight": "../hf/model.safetensors"}}' > "$WORK/trav/model.safetensors.index.json"
    expect index_names_another_folder 1 "trav/model.safetensors.index.json: the weight map names the file '../hf/model.safetensors'" -- imp "$WORK/trav"
fi
mkdir -p "$WORK/pt" && cp "$HF/config.json" "$WORK/pt/" && : > "$WORK/pt/pytorch_model.bin"
expect only_safetensors 1 "pt/pytorch_model.bin: only safetensors import" -- imp "$WORK/pt"
mkdir -p "$WORK/nocfg"
expect no_config 1 "nocfg/config.json" -- imp "$WORK/nocfg"
expect import_no_output 2 "missing -o FILE" -- "$GPT2GEN" import "$HF"
expect export_no_dir 2 "missing --to DIR" -- "$GPT2GEN" export --checkpoint "$CK"
expect export_bad_dtype 2 "dtype: expected fp32, bf16 or fp16" -- "$GPT2GEN" export --checkpoint "$CK" --to "$WORK/y" --dtype int8
expect export_bad_checkpoint 1 "nothere.bin" -- "$GPT2GEN" export --checkpoint "$WORK/nothere.bin" --to "$WORK/y"
expect export_given_tokenizer_missing 1 "none.bin: no such file (--tokenizer)" -- \
    "$GPT2GEN" export --checkpoint "$CK" --to "$WORK/y" --tokenizer "$WORK/none.bin"

# ---- nothing good is overwritten without --force ----
before=$(cksum < "$HF/model.safetensors")
expect export_keeps_existing 1 "$HF/model.safetensors exists: give --force" -- "$GPT2GEN" export --checkpoint "$CK" --to "$HF" --dtype bf16
[ "$(cksum < "$HF/model.safetensors")" = "$before" ] || fail export_keeps_existing "model.safetensors changed"
"$GPT2GEN" export --checkpoint "$CK" --to "$HF" --dtype bf16 --force > /dev/null 2>&1; rc=$?
forced=$(cksum < "$HF/model.safetensors")
"$GPT2GEN" export --checkpoint "$CK" --to "$HF" --force > /dev/null 2>&1
if [ $rc -eq 0 ] && [ "$forced" != "$before" ] && [ "$(cksum < "$HF/model.safetensors")" = "$before" ]; then ok export_force_replaces
else fail export_force_replaces "rc=$rc, or model.safetensors not replaced"; fi
cp "$CK" "$WORK/keep.bin"
"$GPT2GEN" import "$HF" -o "$WORK/keep.bin" > /dev/null 2> "$WORK/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "keep.bin exists: give --force" "$WORK/err" && cmp -s "$CK" "$WORK/keep.bin"; then ok import_keeps_existing
else fail import_keeps_existing "rc=$rc $(cat "$WORK/err")"; fi

# ---- no tokenizer: the model and config are still written ----
mkdir -p "$WORK/elsewhere" && cp "$CK" "$WORK/elsewhere/m.bin"
(cd "$WORK/elsewhere" && "$GPT2GEN" export --checkpoint m.bin --to out) > "$WORK/out" 2> "$WORK/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "wrote no tokenizer files: no tokenizer at data/fortunes/tokenizer.bin" "$WORK/err" \
    && [ -s "$WORK/elsewhere/out/model.safetensors" ] && [ -s "$WORK/elsewhere/out/config.json" ] && [ ! -e "$WORK/elsewhere/out/vocab.json" ]
then ok export_without_tokenizer; else fail export_without_tokenizer "rc=$rc $(cat "$WORK/out" "$WORK/err")"; fi
finish
