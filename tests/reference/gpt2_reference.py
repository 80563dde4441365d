#!/usr/bin/env python3
"""gpt2_reference: the PyTorch golden file that the C reference backend is tested against.

Usage: python3 tests/reference/gpt2_reference.py --out tests/reference [--device cpu|cuda]

Needs only PyTorch and numpy. It builds a tiny GPT-2 exactly as docs/model.md, "The model", says (pre-LayerNorm, tanh
GELU, tied wte, causal attention, fp32), written out by hand below with the parameters stacked over layers
in checkpoint order, so each .grad is already laid out as the checkpoint lays it out. It writes:

  tiny_init.bin    the initial weights, an llm.c fp32 model checkpoint (docs/model.md, "Model checkpoint")
  golden_tiny.bin  inputs, targets, logits, loss, every gradient, and 10 AdamW steps (format below)

Device: the default is the CPU, in fp32: no TF32, no reduced-precision reductions, so the numbers are
plain fp32 and the closest to what the C reference computes, and the same on any machine. --device cuda
works too (TF32 disabled), for a quick look; the committed files come from the CPU.

Model: V=1000 (Vp=1024), maxT=64, L=2, NH=4, C=64; batch B=4, T=32. Init per docs/model.md, "Init", with
torch.Generator seed 1337 (weights N(0, 0.02), attprojw and fcprojw N(0, 0.02/sqrt(2L)), biases 0,
LayerNorm weights 1, wte rows V..Vp-1 zero). Inputs and targets: ids in [0, V) from numpy seed 1337+1.

Steps: 10 AdamW steps on the same batch (beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1 on wte, wpe,
qkvw, attprojw, fcw, fcprojw only), the learning rate per step from LRS below (a warmup to 1e-3), the
gradients clipped to a global L2 norm of 1.0 (scaled by clip/norm when norm > clip). Each step: zero the
gradients, forward, record the loss, backward, record the global norm, clip, AdamW step.

golden_tiny.bin, little-endian:
  header, 256 int32:
    [0] 20261130 (magic)   [1] 1 (version)
    [2] maxT  [3] V  [4] L  [5] NH  [6] C  [7] Vp     (the same slots as a model checkpoint)
    [8] B  [9] T  [10] steps (10)  [11] logits_B (batch rows whose logits are stored)
    [12] num_params  [13] seed  [14] 1 if computed on CUDA, 0 on the CPU; the rest 0
  body, in this order:
    inputs       int32 [B*T]
    targets      int32 [B*T]
    logits       fp32  [logits_B, T, V]   rows b < logits_B only, the V real columns only
    loss         fp32  [1]                mean cross-entropy over B*T at the initial weights
    grads        fp32  [num_params]       d loss / d params at the initial weights, checkpoint order
    losses       fp32  [steps]            loss before each AdamW step (losses[0] == loss)
    lrs          fp32  [steps]            learning rate of each step
    grad_norms   fp32  [steps]            global L2 norm of the gradients before clipping
    hparams      fp32  [8]                beta1, beta2, eps, weight_decay, grad_clip, 0, 0, 0
    final_norms  fp32  [16]               L2 norm of each parameter tensor after the last step; for qkvb,
                                          of its q and v parts only (see final_norm)
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

GOLDEN_MAGIC, GOLDEN_VERSION = 20261130, 1
CHECKPOINT_MAGIC, CHECKPOINT_FP32 = 20240326, 3

V, VP, MAXT, L, NH, C = 1000, 1024, 64, 2, 4, 64
B, T = 4, 32
SEED = 1337
STEPS = 10
LOGITS_B = 2                      # logits of two batch rows: keeps the file under 1 MB
LRS = [1e-3 * min(1.0, (s + 1) / 4) for s in range(STEPS)]
BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP = 0.9, 0.95, 1e-8, 0.1, 1.0

# Parameter tensors in checkpoint order (docs/model.md, "Parameter tensors"), layers stacked inside each.
PARAMS = [
    ("wte", (VP, C)), ("wpe", (MAXT, C)),
    ("ln1w", (L, C)), ("ln1b", (L, C)),
    ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)),
    ("attprojw", (L, C, C)), ("attprojb", (L, C)),
    ("ln2w", (L, C)), ("ln2b", (L, C)),
    ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
    ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
    ("lnfw", (C,)), ("lnfb", (C,)),
]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}   # the 2-D weights
LN_WEIGHTS = {"ln1w", "ln2w", "lnfw"}
RESIDUAL_PROJECTIONS = {"attprojw", "fcprojw"}


def init_params():
    """Fresh init per docs/model.md, "Init", on the CPU, fp32, seeded."""
    gen = torch.Generator().manual_seed(SEED)
    params = {}
    for name, shape in PARAMS:
        if name in LN_WEIGHTS:
            t = torch.ones(shape, dtype=torch.float32)
        elif name in DECAYED:
            std = 0.02 / math.sqrt(2 * L) if name in RESIDUAL_PROJECTIONS else 0.02
            t = torch.randn(shape, generator=gen, dtype=torch.float32) * std
        else:
            t = torch.zeros(shape, dtype=torch.float32)
        params[name] = t
    params["wte"][V:] = 0.0           # padding rows: zero, and they stay zero
    return params


def forward(p, idx):
    """logits (B, T, Vp) of the tiny GPT-2; p maps names to stacked parameter tensors."""
    bsz, tlen = idx.shape
    hs = C // NH
    x = p["wte"][idx] + p["wpe"][:tlen]
    causal = torch.ones(tlen, tlen, dtype=torch.bool, device=idx.device).tril()
    for l in range(L):
        a = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        qkv = a @ p["qkvw"][l].t() + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(bsz, tlen, NH, hs).transpose(1, 2)          # (B, NH, T, HS)
        k = k.view(bsz, tlen, NH, hs).transpose(1, 2)
        v = v.view(bsz, tlen, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~causal, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(bsz, tlen, C)
        x = x + y @ p["attprojw"][l].t() + p["attprojb"][l]
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        h = F.gelu(h @ p["fcw"][l].t() + p["fcb"][l], approximate="tanh")
        x = x + h @ p["fcprojw"][l].t() + p["fcprojb"][l]
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    return x @ p["wte"].t()                                    # tied embedding


def mean_loss(logits, targets):
    """Mean cross-entropy over B*T; only the first V of the Vp columns are real."""
    return F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))


def leaves(params, device):
    return {name: params[name].clone().to(device).requires_grad_(True) for name, _ in PARAMS}


def flat(tensors):
    return np.concatenate([tensors[name].detach().cpu().numpy().astype("<f4").ravel() for name, _ in PARAMS])


def write_checkpoint(path, params):
    header = np.zeros(256, dtype="<i4")
    header[:8] = [CHECKPOINT_MAGIC, CHECKPOINT_FP32, MAXT, V, L, NH, C, VP]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(flat(params).tobytes())


def make_batch():
    rng = np.random.RandomState(SEED + 1)
    inputs = rng.randint(0, V, size=(B, T)).astype(np.int32)
    targets = rng.randint(0, V, size=(B, T)).astype(np.int32)
    return inputs, targets


def global_norm(p):
    return math.sqrt(sum(float((p[name].grad.double() ** 2).sum()) for name, _ in PARAMS))


def train_steps(params, idx, tgt, device):
    """STEPS AdamW steps on one batch; returns the losses, the gradient norms and the final weights."""
    p = leaves(params, device)
    groups = [
        {"params": [p[n] for n, _ in PARAMS if n in DECAYED], "weight_decay": WEIGHT_DECAY},
        {"params": [p[n] for n, _ in PARAMS if n not in DECAYED], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=LRS[0], betas=(BETA1, BETA2), eps=EPS, foreach=False)
    losses, norms = [], []
    for s in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = float(np.float32(LRS[s]))       # exactly the fp32 value the file records
        opt.zero_grad(set_to_none=False)
        loss = mean_loss(forward(p, idx), tgt)
        losses.append(loss.item())
        loss.backward()
        norm = global_norm(p)
        norms.append(norm)
        if norm > GRAD_CLIP:
            with torch.no_grad():
                for name, _ in PARAMS:
                    p[name].grad.mul_(GRAD_CLIP / norm)
        opt.step()
    return losses, norms, p


def final_norm(name, t):
    """L2 norm of a parameter tensor. The k part of qkvb is left out: adding a constant to every score of a
    softmax row changes nothing, so its gradient is zero up to rounding noise, which Adam turns into +-lr
    steps of arbitrary sign; it cannot change any output, and its values are not comparable."""
    t = t.detach().double()
    if name == "qkvb":
        t = torch.cat([t[:, :C], t[:, 2 * C:]], dim=1)
    return math.sqrt(float((t ** 2).sum()))


def write_golden(path, inputs, targets, logits, loss, grads, losses, norms, final, on_cuda):
    num_params = sum(int(np.prod(shape)) for _, shape in PARAMS)
    header = np.zeros(256, dtype="<i4")
    header[:15] = [GOLDEN_MAGIC, GOLDEN_VERSION, MAXT, V, L, NH, C, VP, B, T, STEPS, LOGITS_B, num_params,
                   SEED, 1 if on_cuda else 0]
    final_norms = [final_norm(name, final[name]) for name, _ in PARAMS]
    hparams = [BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP, 0.0, 0.0, 0.0]
    assert grads.size == num_params
    parts = [
        header,
        inputs.astype("<i4").ravel(),
        targets.astype("<i4").ravel(),
        np.asarray(logits, dtype="<f4").ravel(),
        np.asarray([loss], dtype="<f4"),
        grads.astype("<f4"),
        np.asarray(losses, dtype="<f4"),
        np.asarray(LRS, dtype="<f4"),
        np.asarray(norms, dtype="<f4"),
        np.asarray(hparams, dtype="<f4"),
        np.asarray(final_norms, dtype="<f4"),
    ]
    with open(path, "wb") as f:
        for a in parts:
            f.write(a.tobytes())


def disable_tf32():
    """Plain fp32 matmuls on the GPU. Newer PyTorch has fp32_precision and refuses a mix of the old and new
    switches, so the new one is tried first and the old ones only where it does not exist."""
    try:
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    except (AttributeError, RuntimeError):
        torch.backends.cuda.matmul.allow_tf32 = False
    try:
        torch.backends.cudnn.conv.fp32_precision = "ieee"
    except (AttributeError, RuntimeError):
        torch.backends.cudnn.allow_tf32 = False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="output folder")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cpu (default, plain fp32) or cuda")
    args = ap.parse_args()
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("gpt2_reference: --device cuda, but PyTorch sees no GPU")
        disable_tf32()
    device = torch.device(args.device)
    os.makedirs(args.out, exist_ok=True)

    params = init_params()
    init_path = os.path.join(args.out, "tiny_init.bin")
    write_checkpoint(init_path, params)

    inputs, targets = make_batch()
    idx = torch.from_numpy(inputs.astype(np.int64)).to(device)
    tgt = torch.from_numpy(targets.astype(np.int64)).to(device)

    p = leaves(params, device)
    logits = forward(p, idx)
    loss = mean_loss(logits, tgt)
    loss.backward()
    grads = np.concatenate([p[name].grad.detach().cpu().numpy().astype("<f4").ravel() for name, _ in PARAMS])
    logits_kept = logits[:LOGITS_B, :, :V].detach().cpu().numpy()

    losses, norms, final = train_steps(params, idx, tgt, device)
    assert abs(losses[0] - loss.item()) < 1e-6, "the first step's loss differs from the forward's"
    assert float(final["wte"][V:].abs().max()) == 0.0, "padded wte rows moved"

    golden_path = os.path.join(args.out, "golden_tiny.bin")
    write_golden(golden_path, inputs, targets, logits_kept, loss.item(), grads, losses, norms, final,
                 args.device == "cuda")
    print(f"wrote {init_path} ({os.path.getsize(init_path)} bytes) and {golden_path} "
          f"({os.path.getsize(golden_path)} bytes) on {args.device}, torch {torch.__version__}")
    print("loss %.6f, losses %s" % (loss.item(), " ".join("%.5f" % x for x in losses)))
    print("grad norms %s" % " ".join("%.5f" % x for x in norms))


if __name__ == "__main__":
    main()
