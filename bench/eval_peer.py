"""The peer of bench/eval.sh: multiple-choice evaluation (HellaSwag style, llm.c's file format) of an llm.c fp32
checkpoint in PyTorch, written here on the GPT-2 blocks of bench/sample_peers.py. Every completion is a row (context
then completion, from position 0), rows run --rows at a time padded to one length (the longest row rounded up to a
power of two, as gpt2gen eval does), and a row's score is the mean cross-entropy over its completion's tokens; the
lowest score is the example's choice (docs/model.md, "Evaluation"). Speed and agreement only.

  write-set --examples N --out PATH [--seed S]   an evaluation set of N examples of 4 completions, HellaSwag-shaped
                                                  (contexts of 20..80 tokens, completions of 5..30), random ids
  run --checkpoint CK --data SET [--dtype bf16|fp32] [--compile] [--rows R]
        eval-peer {"examples", "correct", "accuracy", "seconds", "examples_per_s", "choices", ...} on one line
"""
import argparse
import json
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sample_peers as sp  # noqa: E402  (the checkpoint reader and the GPT-2 blocks)


def write_set(path, n, seed):
    r = random.Random(seed)
    stream, longest = [], 0
    for i in range(n):
        ex = [65535, 0, i, r.randrange(4), 4]
        ctx = [r.randrange(sp.V) for _ in range(r.randint(20, 80))]
        ex += [len(ctx)] + ctx
        for _ in range(4):
            c = [r.randrange(sp.V) for _ in range(r.randint(5, 30))]
            ex += [len(c)] + c
        ex[1] = 2 * len(ex)
        longest = max(longest, ex[1])
        stream += ex
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<256i", 20240522, 1, n, longest, *([0] * 252)))
        f.write(struct.pack("<%dH" % len(stream), *stream))
    os.replace(tmp, path)


def read_set(path):
    data = open(path, "rb").read()
    h = struct.unpack_from("<4i", data, 0)
    assert h[0] == 20240522 and h[1] == 1, f"{path}: not an evaluation set"
    at, examples = 1024, []
    for _ in range(h[2]):
        w = struct.unpack_from("<%dH" % (struct.unpack_from("<H", data, at + 2)[0] // 2), data, at)
        label, k, n = w[3], w[4], w[5]
        ctx, o, comps = list(w[6:6 + n]), 6 + n, []
        for _ in range(k):
            m = w[o]
            comps.append(list(w[o + 1:o + 1 + m]))
            o += 1 + m
        examples.append((label, ctx, comps))
        at += w[1]
    return examples


def forward_logits(p, idx, L, NH):
    """GPT-2's logits of idx (B, T), from sample_peers' stacked parameters."""
    torch, F = sp.torch, sp.F
    B, T = idx.shape
    x = p["wte"][idx] + p["wpe"][:T]
    for l in range(L):
        q, k, v = sp.attn_in(x, p["ln1w"][l], p["ln1b"][l], p["qkvw"][l], p["qkvb"][l], NH)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = sp.attn_out_mlp(x, y, p["attprojw"][l], p["attprojb"][l], p["ln2w"][l], p["ln2b"][l], p["fcw"][l],
                            p["fcb"][l], p["fcprojw"][l], p["fcprojb"][l])
    h = F.layer_norm(x, (x.shape[-1],), p["lnfw"], p["lnfb"], 1e-5)
    return F.linear(h, p["wte"])[:, :, :sp.V]


def cmd_run(a):
    sp.load_torch()
    torch, F = sp.torch, sp.F
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda")
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    h = sp.read_header(a.checkpoint)
    model = next(m for m, s in sp.SIZES.items() if s == (h["L"], h["NH"], h["C"]))
    L, NH, _ = sp.SIZES[model]
    p = sp.load_params(a.checkpoint, model, device, dtype)
    examples = read_set(a.data)
    rows = [(e, j, ctx + comp, len(ctx), len(comp)) for e, (_, ctx, comps) in enumerate(examples)
            for j, comp in enumerate(comps)]
    T = 64
    while T < max(len(r[2]) for r in rows):
        T *= 2
    fwd = torch.compile(forward_logits) if a.compile else forward_logits

    def scores_of(batch):
        idx = torch.zeros(a.rows, T, dtype=torch.long)
        for b, r in enumerate(batch):
            idx[b, :len(r[2])] = torch.tensor(r[2])
        idx = idx.to(device)
        logits = fwd(p, idx, L, NH).float()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, sp.V), idx[:, 1:].reshape(-1), reduction="none")
        loss = loss.view(a.rows, T - 1).cpu()
        return [float(loss[b, r[3] - 1:r[3] - 1 + r[4]].mean()) for b, r in enumerate(batch)]

    scores_of(rows[:a.rows])   # warm-up (and torch.compile)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    scores = []
    for i in range(0, len(rows), a.rows):
        scores += scores_of(rows[i:i + a.rows])
    torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    choices, at = [], 0
    for label, _, comps in examples:
        s = scores[at:at + len(comps)]
        choices.append(min(range(len(s)), key=lambda j: (s[j], j)))
        at += len(comps)
    correct = sum(c == e[0] for c, e in zip(choices, examples))
    print("eval-peer " + json.dumps({"examples": len(examples), "correct": correct, "accuracy": correct / len(examples),
                                     "seconds": sec, "examples_per_s": len(examples) / sec, "rows": a.rows, "T": T,
                                     "dtype": a.dtype, "compile": a.compile, "torch": torch.__version__,
                                     "choices": choices}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write-set")
    w.add_argument("--examples", type=int, default=2000)
    w.add_argument("--out", required=True)
    w.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("run")
    r.add_argument("--checkpoint", required=True)
    r.add_argument("--data", required=True)
    r.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    r.add_argument("--compile", action="store_true")
    r.add_argument("--rows", type=int, default=32)
    a = ap.parse_args()
    if a.cmd == "write-set":
        write_set(a.out, a.examples, a.seed)
    else:
        cmd_run(a)


if __name__ == "__main__":
    main()
