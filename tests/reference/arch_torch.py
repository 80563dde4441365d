#!/usr/bin/env python3
"""arch_torch: PyTorch golden files for GPT-2's relatives, which build/tests/test_arch_golden holds the CPU backend to.

Usage: python3 tests/reference/arch_torch.py OUTDIR        (then commit OUTDIR/arch_*.bin into tests/reference/)

Needs PyTorch and numpy only (no transformers): plain torch in float64 on the CPU, so the numbers are exact to far
below the test's 1e-5 and the same on any machine. The model is written out here from the papers and transformers'
documented behaviour (docs/model.md, "Architectures"), not from gpt2gen's code:
  - RMSNorm x / sqrt(mean(x^2) + eps) * w (Zhang and Sennrich 2019; transformers' LlamaRMSNorm); LayerNorm with bias;
  - RoPE as transformers' Llama: inv_freq_i = theta^(-2i/HS), cos and sin of p * inv_freq repeated for both halves,
    x cos + rotate_half(x) sin with rotate_half(x) = (-x[HS/2:], x[:HS/2]);
  - grouped-query attention (Ainslie et al. 2023): qkv holds NH query heads, then NKV key heads, then NKV value
    heads; key/value head j serves query heads j*G .. j*G+G-1 (transformers' repeat_kv), scores scaled by 1/sqrt(HS);
  - QK-norm as Qwen3: RMSNorm with weights (HS) over each head's q and k, before RoPE;
  - MLPs: ReLU^2 relu(x)^2 (Primer, So et al. 2021); SwiGLU down(silu(gate(x)) * up(x)) (Shazeer 2020; fcgw is the
    gate, fcw the up projection);
  - logit soft-cap cap * tanh(logits / cap) (Gemma 2); an untied head lmhead (Vp, C) beside wte;
  - AdamW (torch.optim.AdamW, decoupled weight decay on the 2-D weights: wte, wpe, qkvw, attprojw, fcw, fcprojw,
    fcgw, lmhead; none on norms and biases).
The parameters are stacked over layers in our checkpoint order (docs/model.md, "Parameter tensors"), so each .grad
is laid out as the C side reads it.

The cases (CASES below), tiny so each file stays near 100-350 KB: V=64 (Vp=128), maxT=16, L=2, NH=4, C=32 (HS=8),
n_ffn=64, batch B=2, T=8.
  llama     RMSNorm, RoPE (theta 500), SwiGLU, GQA 4:2, no biases, untied, norm_eps 1e-6
  nanochat  RMSNorm, RoPE, ReLU^2, QK-norm, no biases, untied, logit soft-cap 3
  mixed     LayerNorm, RoPE, SwiGLU, MQA 4:1, QK-norm, biases, tied, soft-cap 5 (the bias paths of the new ops)
Init: torch.Generator(seed) per case: GPT-2's init (weights N(0, 0.02), the residual projections N(0, 0.02/sqrt(2L)),
biases 0, norm weights 1), then every real entry moved by N(0, 0.1) so that norm weights, biases and every
nonlinearity matter; the padding rows V..Vp-1 of wte and lmhead zero. Tokens: numpy RandomState(seed + 1).
Steps: zero the gradients, forward (record the loss), backward, AdamW step (lr 1e-2, betas 0.9, 0.95, weight decay
0.1, eps 1e-3), three times, then a last forward. No clipping. Adam's eps is 1e-3, not training's 1e-8, so that the
test measures the backend and not fp32's rounding: the update g / (|g| + eps) changes by up to 1/eps times a change
of g, and an fp32 gradient is off by up to ~1e-7 of its tensor's largest; with eps 1e-8 (or even 1e-5) the elements
of small gradients would move by up to ~lr (1e-4 of the weights) differently in an fp32 backend and this fp64 one,
while with 1e-3 the difference stays below 1e-6 of the weights. The formula is the same at any eps.

arch_<case>.bin, little-endian:
  header, 64 int32:
    [0] 0x41524743 ("CGRA": magic)  [1] 1 (version)
    [2] maxT  [3] V  [4] Vp  [5] L  [6] NH  [7] C  [8] NKV  [9] n_ffn
    [10] norm (0 LayerNorm, 1 RMSNorm)  [11] position (0 learned, 1 RoPE)  [12] mlp (0 GELU, 1 ReLU^2, 2 SwiGLU)
    [13] qk_norm  [14] bias  [15] tied  [16] B  [17] T  [18] steps (3)  [19] num_params  [20] tensors (21)
    [21] seed; the rest 0
  then 8 float64: norm_eps, rope_theta, logit_softcap, lr, beta1, beta2, adam_eps, weight_decay
  body, in this order:
    sizes        int64 [tensors]          each tensor's element count, checkpoint order (0: the model has none)
    inputs       int32 [B*T]
    targets      int32 [B*T]
    params       fp32  [num_params]       the initial weights, checkpoint order (padding rows zero)
    logits       fp32  [B*T, V]           at the initial weights, the V real columns
    loss         fp32  [1]                mean cross-entropy over B*T at the initial weights
    grads        fp32  [num_params]       d loss / d params at the initial weights
    losses       fp32  [steps]            the loss before each AdamW step (losses[0] == loss)
    final_loss   fp32  [1]                the loss after the last step
    final        fp32  [num_params]       the weights after the last step
The file is exactly that long; the C reader refuses anything else.
"""
import math
import os
import sys

import numpy as np

MAGIC, VERSION = 0x41524743, 1
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb",
         "fcprojw", "fcprojb", "lnfw", "lnfb", "qnormw", "knormw", "fcgw", "fcgb", "lmhead"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw", "fcgw", "lmhead"}
NORM_WEIGHTS = {"ln1w", "ln2w", "lnfw", "qnormw", "knormw"}
RESIDUAL_PROJECTIONS = {"attprojw", "fcprojw"}
BASE = dict(maxT=16, V=64, Vp=128, L=2, NH=4, C=32, F=64, B=2, T=8)
STEPS, LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY = 3, 1e-2, 0.9, 0.95, 1e-3, 0.1
CASES = {   # norm 0/1, position 0/1, mlp 0 GELU / 1 ReLU^2 / 2 SwiGLU
    "llama": dict(BASE, seed=101, NKV=2, norm=1, position=1, mlp=2, qk_norm=0, bias=0, tied=0, eps=1e-6, theta=500.0, cap=0.0),
    "nanochat": dict(BASE, seed=202, NKV=4, norm=1, position=1, mlp=1, qk_norm=1, bias=0, tied=0, eps=1e-5, theta=10000.0,
                     cap=3.0),
    "mixed": dict(BASE, seed=303, NKV=1, norm=0, position=1, mlp=2, qk_norm=1, bias=1, tied=1, eps=1e-5, theta=10000.0,
                  cap=5.0),
}


def shapes(a):
    """Each tensor's shape in checkpoint order, None where the architecture has none (common/gpt2.c's rule)."""
    C, L, F, HS = a["C"], a["L"], a["F"], a["C"] // a["NH"]
    QKV = (a["NH"] + 2 * a["NKV"]) * HS
    ln, b, swiglu = a["norm"] == 0, a["bias"] == 1, a["mlp"] == 2
    return {"wte": (a["Vp"], C), "wpe": (a["maxT"], C) if a["position"] == 0 else None,
            "ln1w": (L, C), "ln1b": (L, C) if ln else None, "qkvw": (L, QKV, C), "qkvb": (L, QKV) if b else None,
            "attprojw": (L, C, C), "attprojb": (L, C) if b else None, "ln2w": (L, C), "ln2b": (L, C) if ln else None,
            "fcw": (L, F, C), "fcb": (L, F) if b else None, "fcprojw": (L, C, F), "fcprojb": (L, C) if b else None,
            "lnfw": (C,), "lnfb": (C,) if ln else None,
            "qnormw": (L, HS) if a["qk_norm"] else None, "knormw": (L, HS) if a["qk_norm"] else None,
            "fcgw": (L, F, C) if swiglu else None, "fcgb": (L, F) if swiglu and b else None,
            "lmhead": None if a["tied"] else (a["Vp"], C)}


def write_golden(path, a, inputs, targets, params, logits, loss, grads, losses, final_loss, final):
    """The file of the format above; arrays are numpy, params, grads and final flat in checkpoint order."""
    sh = shapes(a)
    sizes = np.array([int(np.prod(sh[n])) if sh[n] else 0 for n in NAMES], dtype="<i8")
    n = int(sizes.sum())
    assert params.size == n and grads.size == n and final.size == n, "flat arrays of the wrong size"
    header = np.zeros(64, dtype="<i4")
    header[:22] = [MAGIC, VERSION, a["maxT"], a["V"], a["Vp"], a["L"], a["NH"], a["C"], a["NKV"], a["F"], a["norm"],
                   a["position"], a["mlp"], a["qk_norm"], a["bias"], a["tied"], a["B"], a["T"], STEPS, n, len(NAMES),
                   a["seed"]]
    hparams = np.array([a["eps"], a["theta"], a["cap"], LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY], dtype="<f8")
    f4 = lambda x: np.asarray(x, dtype="<f4").ravel()
    parts = [header, hparams, sizes, np.asarray(inputs, "<i4").ravel(), np.asarray(targets, "<i4").ravel(), f4(params),
             f4(logits), f4([loss]), f4(grads), f4(losses), f4([final_loss]), f4(final)]
    with open(path, "wb") as fh:
        for p in parts:
            fh.write(p.tobytes())


def make_batch(a):
    rng = np.random.RandomState(a["seed"] + 1)
    shape = (a["B"], a["T"])
    return rng.randint(0, a["V"], size=shape).astype(np.int32), rng.randint(0, a["V"], size=shape).astype(np.int32)


# ---------- the model (torch from here on) ----------

def init_params(torch, a):
    gen = torch.Generator().manual_seed(a["seed"])
    p = {}
    for name, shape in shapes(a).items():
        if shape is None:
            continue
        if name in NORM_WEIGHTS:
            t = torch.ones(shape)
        elif name in DECAYED:
            std = 0.02 / math.sqrt(2 * a["L"]) if name in RESIDUAL_PROJECTIONS else 0.02
            t = torch.randn(shape, generator=gen) * std
        else:
            t = torch.zeros(shape)
        t = (t + 0.1 * torch.randn(shape, generator=gen)).float().double()   # the fp32 values the file holds
        if name in ("wte", "lmhead"):
            t[a["V"]:] = 0.0   # padding rows: zero, and they stay zero
        p[name] = t.clone().requires_grad_(True)
    return p


def rmsnorm(torch, x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def norm(torch, a, x, w, b):
    if a["norm"] == 1:
        return rmsnorm(torch, x, w, a["eps"])
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=a["eps"])


def rope(torch, x, theta):
    """x (B, H, T, HS): transformers' apply_rotary_pos_emb at positions 0..T-1"""
    T, HS = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], -1)
    half = HS // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * emb.cos() + rotated * emb.sin()


def linear(x, w, b):
    y = x @ w.t()
    return y if b is None else y + b


def attention(torch, a, p, l, h):
    Bn, T, C = h.shape
    NH, NKV = a["NH"], a["NKV"]
    HS = C // NH
    qkv = linear(h, p["qkvw"][l], p["qkvb"][l] if "qkvb" in p else None)
    q = qkv[..., :NH * HS].reshape(Bn, T, NH, HS).transpose(1, 2)
    k = qkv[..., NH * HS:(NH + NKV) * HS].reshape(Bn, T, NKV, HS).transpose(1, 2)
    v = qkv[..., (NH + NKV) * HS:].reshape(Bn, T, NKV, HS).transpose(1, 2)
    if a["qk_norm"]:
        q, k = rmsnorm(torch, q, p["qnormw"][l], a["eps"]), rmsnorm(torch, k, p["knormw"][l], a["eps"])
    if a["position"] == 1:
        q, k = rope(torch, q, a["theta"]), rope(torch, k, a["theta"])
    k = k.repeat_interleave(NH // NKV, dim=1)   # repeat_kv
    v = v.repeat_interleave(NH // NKV, dim=1)
    s = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    s = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
    y = (s @ v).transpose(1, 2).reshape(Bn, T, C)
    return linear(y, p["attprojw"][l], p["attprojb"][l] if "attprojb" in p else None)


def mlp(torch, a, p, l, h):
    b = lambda n: p[n][l] if n in p else None
    up = linear(h, p["fcw"][l], b("fcb"))
    if a["mlp"] == 0:
        m = torch.nn.functional.gelu(up, approximate="tanh")
    elif a["mlp"] == 1:
        m = torch.relu(up) ** 2
    else:
        gate = linear(h, p["fcgw"][l], b("fcgb"))
        m = torch.nn.functional.silu(gate) * up
    return linear(m, p["fcprojw"][l], b("fcprojb"))


def forward(torch, a, p, idx):
    """logits (B, T, V): the real columns"""
    x = p["wte"][idx]
    if a["position"] == 0:
        x = x + p["wpe"][:idx.shape[1]]
    ln = lambda n, l: p[n][l] if n in p else None
    for l in range(a["L"]):
        x = x + attention(torch, a, p, l, norm(torch, a, x, p["ln1w"][l], ln("ln1b", l)))
        x = x + mlp(torch, a, p, l, norm(torch, a, x, p["ln2w"][l], ln("ln2b", l)))
    x = norm(torch, a, x, p["lnfw"], p.get("lnfb"))
    logits = x @ p["wte" if a["tied"] else "lmhead"][:a["V"]].t()
    if a["cap"] > 0:
        logits = a["cap"] * torch.tanh(logits / a["cap"])
    return logits


def flat(p, a, which="data"):
    out = []
    for name, shape in shapes(a).items():
        if shape is not None:
            t = p[name] if which == "data" else p[name].grad
            out.append(t.detach().numpy().ravel())
    return np.concatenate(out)


def run_case(torch, name, a, outdir):
    inputs, targets = make_batch(a)
    idx, tgt = torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))
    p = init_params(torch, a)
    params0 = flat(p, a)
    loss_of = lambda: torch.nn.functional.cross_entropy(forward(torch, a, p, idx).reshape(-1, a["V"]), tgt.reshape(-1))
    names = [n for n, s in shapes(a).items() if s is not None]
    groups = [{"params": [p[n] for n in names if n in DECAYED], "weight_decay": WEIGHT_DECAY},
              {"params": [p[n] for n in names if n not in DECAYED], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(BETA1, BETA2), eps=ADAM_EPS, foreach=False)
    logits0 = forward(torch, a, p, idx).detach().numpy()
    losses, grads0 = [], None
    for s in range(STEPS):
        opt.zero_grad(set_to_none=False)
        loss = loss_of()
        losses.append(loss.item())
        loss.backward()
        if s == 0:
            grads0 = flat(p, a, "grad")
        opt.step()
    with torch.no_grad():
        final_loss = loss_of().item()
    final = flat(p, a)
    for n in ("wte", "lmhead"):
        if n in p:
            assert float(p[n][a["V"]:].abs().max()) == 0.0, f"{name}: {n}'s padding rows moved"
    path = os.path.join(outdir, f"arch_{name}.bin")
    write_golden(path, a, inputs, targets, params0, logits0.reshape(-1, a["V"]), losses[0], grads0, losses, final_loss,
                 final)
    print(f"wrote {path} ({os.path.getsize(path)} bytes): losses {' '.join('%.6f' % x for x in losses)}, "
          f"after {final_loss:.6f}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tests/reference/arch_torch.py OUTDIR")
    import torch
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(True)
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, a in CASES.items():
        run_case(torch, name, a, sys.argv[1])
    print(f"torch {torch.__version__}, float64 on the CPU")


if __name__ == "__main__":
    main()
