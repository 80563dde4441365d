#!/bin/sh
# The README's quick start from the Hugging Face Hub, on the CPU backend and without a download: a folder laid out as
# the Hub's openai-community/gpt2 is (config.json with its dropout and summary keys; model.safetensors with names
# without "transformer.", the attn.bias mask buffers and no lm_head), written with the safetensors package for a
# small random GPT-2 of the micro config's shape, is imported (`gpt2gen import`), and
#   - the checkpoint holds the folder's tensors exactly (the Conv1D weights transposed, the vocabulary padded with
#     zero rows to a multiple of 128);
#   - `gpt2gen sample` from it, greedy, prints the tokens a float64 numpy forward of the folder's tensors picks;
#   - a text of one's own goes through `gpt2gen prepare`, and `gpt2gen train` from the checkpoint
#     (checkpoint.init) starts from the imported weights: its step-0 validation loss is the numpy forward's loss on
#     the same validation rows; it then trains (the validation loss falls, the model changes) and samples.
# Needs numpy and safetensors (tools/install_deps.sh installs them): in CI ($CI set) their absence fails the test,
# elsewhere it skips.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
if ! python3 -c "import numpy, safetensors" 2>/dev/null; then
    if [ -n "$CI" ]; then fail python_safetensors "python3 cannot import numpy and safetensors (tools/install_deps.sh installs them)"
    else skip python_safetensors "python3 cannot import numpy and safetensors (pip install numpy safetensors)"; fi
    finish
fi
TOK=data/fortunes/tokenizer.bin

cat > "$WORK/ref.py" <<'PY'
"""The reference side: the Hub-layout folder written with safetensors, read back, and a float64 GPT-2 forward."""
import json, os, struct, sys
import numpy as np

L, NH, C, MAXT, V = 2, 2, 64, 32, 50257   # tests/configs/micro.lua's shape


def cmd_folder(out):
    """A random GPT-2 saved the way the Hub's gpt2 is: no "transformer." prefix, attn.bias buffers, no lm_head."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(20241204)
    n = lambda *s, std=0.1: (rng.standard_normal(s) * std).astype(np.float32)
    t = {"wte.weight": n(V, C), "wpe.weight": n(MAXT, C, std=0.01),
         "ln_f.weight": 1 + n(C, std=0.1), "ln_f.bias": n(C, std=0.05)}
    for i in range(L):
        h = f"h.{i}."
        t[h + "ln_1.weight"], t[h + "ln_1.bias"] = 1 + n(C, std=0.1), n(C, std=0.05)
        t[h + "attn.c_attn.weight"], t[h + "attn.c_attn.bias"] = n(C, 3 * C), n(3 * C, std=0.01)
        t[h + "attn.c_proj.weight"], t[h + "attn.c_proj.bias"] = n(C, C), n(C, std=0.01)
        t[h + "ln_2.weight"], t[h + "ln_2.bias"] = 1 + n(C, std=0.1), n(C, std=0.05)
        t[h + "mlp.c_fc.weight"], t[h + "mlp.c_fc.bias"] = n(C, 4 * C), n(4 * C, std=0.01)
        t[h + "mlp.c_proj.weight"], t[h + "mlp.c_proj.bias"] = n(4 * C, C), n(C, std=0.01)
        t[h + "attn.bias"] = np.tril(np.ones((1, 1, MAXT, MAXT), dtype=np.float32))
    os.makedirs(out, exist_ok=True)
    save_file(t, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
           "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
           "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": MAXT, "n_embd": C, "n_head": NH,
           "n_layer": L, "n_positions": MAXT, "resid_pdrop": 0.1, "summary_activation": None,
           "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
           "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
           "vocab_size": V}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)


def load(folder):
    from safetensors.numpy import load_file
    return {k: v.astype(np.float64) for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}


def cmd_same(ck, folder):
    """The checkpoint (fp32, llm.c's order and layouts) holds exactly the folder's tensors."""
    from safetensors.numpy import load_file
    t = load_file(os.path.join(folder, "model.safetensors"))
    raw = np.fromfile(ck, dtype=np.uint8)
    h = raw[:1024].view(np.int32)
    Vp = (V + 127) // 128 * 128
    assert list(h[:8]) == [20240326, 3, MAXT, V, L, NH, C, Vp], f"header {list(h[:8])}"
    p = raw[1024:].view(np.float32)
    stack = lambda name, tr=False: np.stack([t[f"h.{i}.{name}"].T if tr else t[f"h.{i}.{name}"] for i in range(L)])
    wte = np.zeros((Vp, C), np.float32); wte[:V] = t["wte.weight"]
    want = [wte, t["wpe.weight"], stack("ln_1.weight"), stack("ln_1.bias"), stack("attn.c_attn.weight", True),
            stack("attn.c_attn.bias"), stack("attn.c_proj.weight", True), stack("attn.c_proj.bias"),
            stack("ln_2.weight"), stack("ln_2.bias"), stack("mlp.c_fc.weight", True), stack("mlp.c_fc.bias"),
            stack("mlp.c_proj.weight", True), stack("mlp.c_proj.bias"), t["ln_f.weight"], t["ln_f.bias"]]
    flat = np.concatenate([w.ravel() for w in want])
    assert flat.size == p.size, f"{p.size} parameters in the checkpoint, {flat.size} in the folder"
    bad = np.flatnonzero(flat != p)
    assert bad.size == 0, f"{bad.size} parameters differ, the first at {bad[0]}"
    print(f"{p.size} parameters equal")


def ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b


def logits(t, ids):
    T, hs = len(ids), C // NH
    x = t["wte.weight"][ids] + t["wpe.weight"][:T]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(L):
        g = lambda k: t[f"h.{i}.{k}"]
        qkv = ln(x, g("ln_1.weight"), g("ln_1.bias")) @ g("attn.c_attn.weight") + g("attn.c_attn.bias")
        q, k, v = (qkv[:, j * C:(j + 1) * C].reshape(T, NH, hs).transpose(1, 0, 2) for j in range(3))
        a = q @ k.transpose(0, 2, 1) / np.sqrt(hs) + mask
        a = np.exp(a - a.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
        x = x + (a @ v).transpose(1, 0, 2).reshape(T, C) @ g("attn.c_proj.weight") + g("attn.c_proj.bias")
        u = ln(x, g("ln_2.weight"), g("ln_2.bias")) @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias")
        u = 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))
        x = x + u @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias")
    return ln(x, t["ln_f.weight"], t["ln_f.bias"]) @ t["wte.weight"].T


def token_bytes(path):
    raw = open(path, "rb").read()
    h = struct.unpack("<256i", raw[:1024])
    out, off = [], 1024
    for _ in range(h[2]):
        n = raw[off]; out.append(raw[off + 1:off + 1 + n]); off += 1 + n
    return out


def printable(b):
    return "".join(chr(c) for c in b if 32 <= c < 127 or c == 10)


def cmd_greedy(folder, tok, n, printed):
    """gpt2gen sample's greedy text from end-of-text is the numpy forward's argmax, token by token (its printable
    ASCII: gpt2gen prints invalid UTF-8 and control bytes as U+FFFD)."""
    t, ids, gaps = load(folder), [50256], []
    for _ in range(int(n)):
        lg = logits(t, ids)[-1]
        top2 = np.sort(lg)[-2:]
        gaps.append(top2[1] - top2[0])
        nxt = int(np.argmax(lg))
        if nxt == 50256: break
        ids.append(nxt)
    want = printable(b"".join(token_bytes(tok)[i] for i in ids[1:]))
    got = printable(open(printed, "rb").read())
    assert len(want) >= 4, f"the reference text has only {len(want)} printable characters: {want!r}"
    assert min(gaps) > 1e-4, f"a near-tie of {min(gaps):.2g} between the two best logits: the test needs another seed"
    assert got.rstrip("\n") == want.rstrip("\n"), f"printed {got!r}, the reference's greedy text {want!r} (ids {ids[1:]})"
    print(f"{len(ids) - 1} tokens as the reference picks them: {want!r}")


def cmd_val_loss(folder, shard, B, T):
    """The mean loss over the first validation batch: B rows of T+1 tokens, row j from token j*T."""
    B, T = int(B), int(T)
    raw = open(shard, "rb").read()
    h = struct.unpack("<256i", raw[:1024])
    toks = np.frombuffer(raw[1024:], dtype=np.uint16)[:h[2]].astype(np.int64)
    assert toks.size >= B * T + 1, f"{toks.size} validation tokens, a batch needs {B * T + 1}"
    t, losses = load(folder), []
    for j in range(B):
        row = toks[j * T:j * T + T + 1]
        lg = logits(t, row[:-1])
        lg = lg - lg.max(-1, keepdims=True)
        lp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        losses.extend(-lp[np.arange(T), row[1:]])
    print(f"{np.mean(losses):.6f}")


def cmd_text(out):
    """A text of one's own: paragraphs separated by blank lines."""
    words = ("the river runs past the old mill and the miller counts the sacks of grain while the wheel turns "
             "slowly in the cold water of the morning").split()
    rng = np.random.default_rng(7)
    with open(out, "w") as f:
        for _ in range(400):
            f.write(" ".join(rng.choice(words, size=12)).capitalize() + ".\n\n")


if __name__ == "__main__":
    try:
        globals()["cmd_" + sys.argv[1]](*sys.argv[2:])
    except AssertionError as e:
        print(f"FAILED: {e}")
        sys.exit(1)
PY
py() { python3 "$WORK/ref.py" "$@"; }
HF=$WORK/gpt2-hf
CK=$WORK/gpt2.bin

# --- the Hub's folder, imported --------------------------------------------------------------------------------
py folder "$HF" > "$WORK/folder.log" 2>&1 || { fail write_folder "$(tail -3 "$WORK/folder.log")"; finish; }
out=$("$GPT2GEN" import "$HF" -o "$CK" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -s "$CK" ]; then ok import_hub_layout; else fail import_hub_layout "rc=$rc: $out"; finish; fi
if r=$(py same "$CK" "$HF" 2>&1); then ok imported_weights_exact "$r"; else fail imported_weights_exact "$r"; fi

# --- sampled from ---------------------------------------------------------------------------------------------
timeout 120 "$GPT2GEN" sample --checkpoint "$CK" --backend cpu --temperature 0 --tokens 12 --tokenizer "$TOK" \
    > "$WORK/sample.out" 2> "$WORK/sample.err"; rc=$?
if [ $rc -eq 0 ] && r=$(py greedy "$HF" "$TOK" 12 "$WORK/sample.out" 2>&1); then ok sample_greedy_is_reference "$r"
else fail sample_greedy_is_reference "rc=$rc: ${r:-} $(tail -3 "$WORK/sample.err")"; fi

# --- fine-tuned on a text of one's own --------------------------------------------------------------------------
py text "$WORK/my_text.txt"
out=$("$GPT2GEN" prepare "$WORK/my_text.txt" -o "$WORK/mine" --val-fraction 0.2 --threads 1 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -f "$WORK/mine/val_000000.bin" ] && [ -f "$WORK/mine/train_000000.bin" ]; then ok prepare_own_text
else fail prepare_own_text "rc=$rc: $out"; finish; fi
timeout 300 "$GPT2GEN" train $M --backend cpu --set checkpoint.init="$CK" --set checkpoint.dir="$WORK/ft" \
    --set "data.train=$WORK/mine/train_*.bin" --set "data.val=$WORK/mine/val_*.bin" \
    --set data.tokenizer="$WORK/mine/tokenizer.bin" --set train.steps=6 --set train.warmup=0 --set train.lr=1e-3 \
    --set eval.val_every=3 --set eval.val_batches=1 > "$WORK/train.log" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -qF "loaded weights from $CK" "$WORK/train.log" && [ -f "$WORK/ft/model_00000006.bin" ]; then
    ok finetune_from_import
else fail finetune_from_import "rc=$rc: $(tail -5 "$WORK/train.log")"; finish; fi
val() { sed -n "s/^step *$1 | val loss \([0-9.]*\)$/\1/p" "$WORK/train.log"; }
v0=$(val 0); v6=$(val 6)
ref=$(py val_loss "$HF" "$WORK/mine/val_000000.bin" 4 32 2>&1)
if [ -n "$v0" ] && awk -v a="$v0" -v b="$ref" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 2e-4) }'; then
    ok finetune_starts_from_import "step 0 val loss $v0, the reference's $ref"
else fail finetune_starts_from_import "step 0 val loss '$v0', the imported model's loss on those rows: $ref"; fi
if [ -n "$v6" ] && awk -v a="$v6" -v b="$v0" 'BEGIN { exit !(a < b - 0.1) }' && ! cmp -s "$CK" "$WORK/ft/model_00000006.bin"; then
    ok finetune_learns "val loss $v0 -> $v6"
else fail finetune_learns "val loss '$v0' -> '$v6'"; fi
out=$(timeout 120 "$GPT2GEN" sample --checkpoint "$WORK/ft/model_00000006.bin" --backend cpu --prompt "The river" \
    --tokens 8 2>&1 >/dev/null); rc=$?
if [ $rc -eq 0 ]; then ok sample_finetuned; else fail sample_finetuned "rc=$rc: $out"; fi
finish
