#!/usr/bin/env python3
"""The reference for GPT-2's relatives: a numpy (float64) model written from the papers and transformers' documented
behaviour, independent of gpt2gen's C code, checked against what our CPU backend wrote (tests/test_arch_reference.c).

    python3 tests/reference/arch_reference.py DUMP.bin

What it holds the CPU backend to, each to 1e-5 relative (fp32 against fp64):
  - the parameter layout: which tensors exist and their sizes, from the architecture alone;
  - the logits and the mean loss of a forward;
  - the gradients: float64 central differences of this model's loss at sampled elements of every tensor (the
    largest gradient of each among them);
  - one AdamW step (decoupled weight decay on the 2-D weights only; padded vocabulary rows unchanged);
  - decode steps against the key/value cache: row 0's logits position by position.

The architectures (docs/model.md, "Architectures"):
  LayerNorm (x - mean) / sqrt(var + eps) * w + b; RMSNorm x / sqrt(mean(x^2) + eps) * w (Llama, Zhang & Sennrich 2019);
  RoPE as Llama in transformers: rotate_half, inv_freq = theta^(-2i/HS), q' = q cos + rotate_half(q) sin;
  grouped-query attention (Ainslie et al. 2023): kv head j serves query heads j*G .. j*G+G-1, G = n_head / n_kv_head
  (transformers' repeat_kv); QK-norm as Qwen3: RMSNorm over each head's q and k with weights (HS), before RoPE;
  MLPs: GELU (tanh approximation), ReLU^2 relu(x)^2 (Primer, So et al. 2021), SwiGLU down(silu(gate(x)) * up(x))
  (Shazeer 2020); logit soft-cap cap * tanh(logits / cap) (Gemma 2); untied head: its own (V, C) weight.
"""
import sys
import numpy as np

NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb",
         "fcprojw", "fcprojb", "lnfw", "lnfb", "qnormw", "knormw", "fcgw", "fcgb", "lmhead"]
TOL = 1e-5


def read(path):
    b = open(path, "rb").read()
    h = np.frombuffer(b, np.int32, 20, 0)
    assert h[0] == 0x41524348 and h[1] == 1, "not an arch dump"
    a = dict(zip(["maxT", "V", "Vp", "L", "NH", "C", "NKV", "F", "norm", "position", "mlp", "qk_norm", "no_bias",
                  "untied", "B", "T", "ntensors"], [int(x) for x in h[2:19]]))
    d = np.frombuffer(b, np.float64, 8, 80)
    a.update(eps=d[0], theta=d[1], cap=d[2], lr=d[3], b1=d[4], b2=d[5], adam_eps=d[6], wd=d[7])
    off = 80 + 64
    N = a["B"] * a["T"]

    def take(dtype, n):
        nonlocal off
        x = np.frombuffer(b, dtype, n, off)
        off += x.nbytes
        return x
    a["inp"] = take(np.int32, N).reshape(a["B"], a["T"])
    a["tgt"] = take(np.int32, N).reshape(a["B"], a["T"])
    a["sizes"] = [int(x) for x in take(np.int64, a["ntensors"])]
    n = sum(a["sizes"])
    a["params"] = take(np.float32, n).astype(np.float64)
    a["logits"] = take(np.float32, N * a["Vp"]).reshape(a["B"], a["T"], a["Vp"]).astype(np.float64)
    a["loss"] = float(take(np.float32, 1)[0])
    a["grads"] = take(np.float32, n).astype(np.float64)
    a["after"] = take(np.float32, n).astype(np.float64)
    a["decode"] = take(np.float32, a["T"] * a["Vp"]).reshape(a["T"], a["Vp"]).astype(np.float64)
    assert off == len(b), "trailing bytes"
    return a


def expected_shapes(a):
    """Each tensor's shape from the architecture (None: the model has no such tensor); checkpoint order."""
    C, L, F, V, Vp, HS = a["C"], a["L"], a["F"], a["V"], a["Vp"], a["C"] // a["NH"]
    QKV = (a["NH"] + 2 * a["NKV"]) * HS
    ln, bias, swiglu = a["norm"] == 0, not a["no_bias"], a["mlp"] == 2
    return {"wte": (Vp, C), "wpe": (a["maxT"], C) if a["position"] == 0 else None,
            "ln1w": (L, C), "ln1b": (L, C) if ln else None, "qkvw": (L, QKV, C), "qkvb": (L, QKV) if bias else None,
            "attprojw": (L, C, C), "attprojb": (L, C) if bias else None,
            "ln2w": (L, C), "ln2b": (L, C) if ln else None, "fcw": (L, F, C), "fcb": (L, F) if bias else None,
            "fcprojw": (L, C, F), "fcprojb": (L, C) if bias else None, "lnfw": (C,), "lnfb": (C,) if ln else None,
            "qnormw": (L, HS) if a["qk_norm"] else None, "knormw": (L, HS) if a["qk_norm"] else None,
            "fcgw": (L, F, C) if swiglu else None, "fcgb": (L, F) if swiglu and bias else None,
            "lmhead": (Vp, C) if a["untied"] else None}


def unpack(a, flat):
    t, o = {}, 0
    for name, shape in expected_shapes(a).items():
        if shape is None:
            continue
        k = int(np.prod(shape))
        t[name] = flat[o:o + k].reshape(shape)
        o += k
    return t


def layernorm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)


def rope(x, pos, theta):
    """x (B, T, H, HS) at positions pos (T): Llama's apply_rotary_pos_emb"""
    HS = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, HS, 2) / HS)
    freqs = np.outer(pos, inv_freq)
    emb = np.concatenate([freqs, freqs], -1)
    cos, sin = np.cos(emb)[None, :, None, :], np.sin(emb)[None, :, None, :]
    return x * cos + rotate_half(x) * sin


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + np.exp(-x))


def forward(a, p, inp):
    """logits (B, T, V) of tokens inp (B, T)"""
    B, T = inp.shape
    NH, NKV, C, V = a["NH"], a["NKV"], a["C"], a["V"]
    HS = C // NH
    eps = a["eps"]
    norm = (lambda x, w, b: rmsnorm(x, w, eps)) if a["norm"] == 1 else (lambda x, w, b: layernorm(x, w, b, eps))
    lin = lambda x, w, b: x @ w.T + (b if b is not None else 0)
    g = lambda name, l: p[name][l] if name in p else None
    x = p["wte"][inp]
    if a["position"] == 0:
        x = x + p["wpe"][:T]
    mask = np.tril(np.ones((T, T), bool))
    for l in range(a["L"]):
        h = norm(x, p["ln1w"][l], g("ln1b", l))
        qkv = lin(h, p["qkvw"][l], g("qkvb", l))
        q = qkv[..., :NH * HS].reshape(B, T, NH, HS)
        k = qkv[..., NH * HS:(NH + NKV) * HS].reshape(B, T, NKV, HS)
        v = qkv[..., (NH + NKV) * HS:].reshape(B, T, NKV, HS)
        if a["qk_norm"]:
            q, k = rmsnorm(q, p["qnormw"][l], eps), rmsnorm(k, p["knormw"][l], eps)
        if a["position"] == 1:
            q, k = rope(q, np.arange(T), a["theta"]), rope(k, np.arange(T), a["theta"])
        k, v = np.repeat(k, NH // NKV, axis=2), np.repeat(v, NH // NKV, axis=2)   # repeat_kv
        s = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(HS)
        s = np.where(mask, s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        y = np.einsum("bhts,bshd->bthd", s, v).reshape(B, T, C)
        x = x + lin(y, p["attprojw"][l], g("attprojb", l))
        h = norm(x, p["ln2w"][l], g("ln2b", l))
        if a["mlp"] == 0:
            m = gelu(lin(h, p["fcw"][l], g("fcb", l)))
        elif a["mlp"] == 1:
            m = np.maximum(lin(h, p["fcw"][l], g("fcb", l)), 0) ** 2
        else:
            m = silu(lin(h, p["fcgw"][l], g("fcgb", l))) * lin(h, p["fcw"][l], g("fcb", l))
        x = x + lin(m, p["fcprojw"][l], g("fcprojb", l))
    x = norm(x, p["lnfw"], p.get("lnfb"))
    logits = x @ p["lmhead" if a["untied"] else "wte"][:V].T
    if a["cap"] > 0:
        logits = a["cap"] * np.tanh(logits / a["cap"])
    return logits


def loss_of(a, flat):
    lg = forward(a, unpack(a, flat), a["inp"])
    lg = lg - lg.max(-1, keepdims=True)
    logp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, a["tgt"][..., None].astype(np.int64), -1).mean()


def rel(ours, ref):
    return float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30))


def main():
    a = read(sys.argv[1])
    bad = []

    def report(what, err, tol=TOL):
        print("    %-34s rel err %.2e%s" % (what, err, "" if err <= tol else "  > %.0e" % tol))
        if not err <= tol:
            bad.append(what)

    shapes = expected_shapes(a)
    want = [int(np.prod(s)) if s is not None else 0 for s in shapes.values()]
    if want != a["sizes"]:
        print("    layout: ours %s, expected %s" % (a["sizes"], want))
        sys.exit(1)
    print("    layout: %d tensors, %d parameters" % (sum(1 for s in want if s), sum(want)))
    V = a["V"]
    ref_logits = forward(a, unpack(a, a["params"]), a["inp"])
    report("logits", rel(a["logits"][..., :V], ref_logits))
    report("loss", abs(a["loss"] - loss_of(a, a["params"])) / loss_of(a, a["params"]))
    report("decode logits (row 0, the cache)", rel(a["decode"][:, :V], ref_logits[0]))
    # gradients: central differences in float64 at sampled elements of each tensor, and its largest gradient
    rng = np.random.default_rng(0)
    o = 0
    for name, size in zip(NAMES, a["sizes"]):
        if size:
            g = a["grads"][o:o + size]
            if name in ("wte", "lmhead"):   # the real rows only: padding rows have no gradient
                g = g[:V * a["C"]]
            idx = np.unique(np.concatenate([rng.integers(0, len(g), 6), [int(np.argmax(np.abs(g)))]]))
            fd = []
            for i in idx:
                h = 1e-5 * max(1.0, abs(a["params"][o + i]))
                xp, xm = a["params"].copy(), a["params"].copy()
                xp[o + i] += h
                xm[o + i] -= h
                fd.append((loss_of(a, xp) - loss_of(a, xm)) / (2 * h))
            scale = max(np.max(np.abs(g)), 1e-30)
            report("grad %s" % name, float(np.max(np.abs(g[idx] - np.array(fd))) / scale))
        o += size
    # AdamW's first step: m = (1-b1) g, v = (1-b2) g^2, bias-corrected: p -= lr (g / (|g| + eps) + wd p) on the 2-D
    # weights (wte, wpe, qkvw, attprojw, fcw, fcprojw, fcgw, lmhead), without weight decay on the rest
    decays = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw", "fcgw", "lmhead"}
    g, p0, o = a["grads"].astype(np.float32).astype(np.float64), a["params"], 0
    m, v = (1 - a["b1"]) * g, (1 - a["b2"]) * g * g
    upd = (m / (1 - a["b1"])) / (np.sqrt(v / (1 - a["b2"])) + a["adam_eps"])
    want_after = p0.copy()
    for name, size in zip(NAMES, a["sizes"]):
        sl = slice(o, o + (V * a["C"] if name in ("wte", "lmhead") else size))
        want_after[sl] = p0[sl] - a["lr"] * (upd[sl] + (a["wd"] * p0[sl] if name in decays else 0))
        o += size
    report("AdamW step (params after)", rel(a["after"], want_after))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
