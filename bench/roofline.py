#!/usr/bin/env python3
"""bench/roofline.py: a roofline table of the training step. Every op of a `gpt2gen train` profile
(GPT2GEN_PROFILE=1) against its own floor: the least time its FLOPs take at the GPU's bf16 matmul ceiling, or
the bytes it must move take at the GPU's memory bandwidth, whichever is longer.

    python3 bench/roofline.py [--model 124M | --layers L --heads NH --channels C --batch B ...]
                              [--ceilings TFLOPS,TBPS | --ceilings FILE.json] [--ceilings-json FILE.json]
                              [--json ROWS.json] [--compare BEFORE_LOG] LOG

Without --ceilings it measures the ceilings first, in the same call, with PyTorch (the only import beyond the
standard library, and only there): the bf16 matmul rate of torch.matmul at 8192x8192x8192 (and, for reference, at
one GPT-2 shape, m=65536 rows k=768 n=3072), and the memory bandwidth of a device-to-device copy of a 2 GiB tensor
(bytes read + bytes written over the time), each the median of 10 runs after a warm-up, timed with CUDA events.
--ceilings-json writes them; --ceilings passes them in (numbers, or a file written by --ceilings-json), so the
parsing and the table run without a GPU.

The profile's "step" is a micro-step: one forward and backward of B rows of T tokens. Its ops are synchronized
one by one, so its total is above a real step's time; the floors below are for a micro-step too (grad norm and
AdamW run once per optimizer step: per micro-step they count 1/--grad-accum of that).

The formulas of each op's work are in one table, work_table() below. --compare BEFORE_LOG adds a table of the
same ops before (BEFORE_LOG) and after (LOG). bench/roofline.sh runs gpt2gen and this script on the GPU machine.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

# Model shapes by name: layers, heads, channels, and the batch bench/bench.sh runs them at (T = 1024).
MODELS = {
    "124M": dict(layers=12, heads=12, channels=768, batch=64),
    "350M": dict(layers=24, heads=16, channels=1024, batch=32),
    "774M": dict(layers=36, heads=20, channels=1280, batch=16),
    "1558M": dict(layers=48, heads=25, channels=1600, batch=8),
}

FA3_TFLOPS = 350.0   # an FA3-class attention rate on an H100/H200, for the attention's second floor
ADAMW_LAUNCHES = 16  # one launch per parameter tensor (common/gpt2.h: wte, wpe, 12 per-layer kinds, lnf w and b)
LN_BWD_BLOCKS = 512  # layernorm_backward's blocks: min(ceil(B*T / 8), 512), each writes 2*C fp32 partials


# ---------------------------------------------------------------------------------------------------------------
# Ceilings (PyTorch, imported here only)
# ---------------------------------------------------------------------------------------------------------------

def measure_ceilings(runs=10, warmup=3):
    """The bf16 matmul ceiling (TFLOP/s) at 8192^3 (also sustained for seconds) and at m=65536 k=768 n=3072, and the
    copy bandwidth (TB/s)."""
    try:
        import torch
    except ImportError:
        sys.exit("roofline.py: PyTorch is not importable here, so the ceilings cannot be measured: "
                 "pass --ceilings TFLOPS,TBPS (or a file from --ceilings-json)")
    if not torch.cuda.is_available():
        sys.exit("roofline.py: no CUDA device for PyTorch: pass --ceilings TFLOPS,TBPS instead")
    dev = torch.device("cuda")

    def median_ms(fn):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)

    def matmul_tflops(m, k, n):
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        out = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        ms = median_ms(lambda: torch.matmul(a, b, out=out))
        del a, b, out
        return 2.0 * m * n * k / (ms * 1e-3) / 1e12

    def sustained_tflops(n=8192, warm_s=2.0, timed_s=2.0):
        """The 8192^3 matmul back to back for warm_s seconds (long enough for the GPU to reach its power cap and lower
        its clock, as a training step's does), then timed for timed_s: the ceiling a whole step can hold."""
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
        t0 = time.time()
        while time.time() - t0 < warm_s:
            for _ in range(10):
                torch.matmul(a, b, out=out)
            torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        count, t0 = 0, time.time()
        start.record()
        while time.time() - t0 < timed_s:
            for _ in range(10):
                torch.matmul(a, b, out=out)
            count += 10
            torch.cuda.synchronize()
        stop.record()
        stop.synchronize()
        del a, b, out
        return 2.0 * n * n * n * count / (start.elapsed_time(stop) * 1e-3) / 1e12

    tflops = matmul_tflops(8192, 8192, 8192)
    sustained = sustained_tflops()
    tflops_gpt2 = matmul_tflops(65536, 768, 3072)
    nbytes = 2 << 30   # 2 GiB
    src = torch.ones(nbytes, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    tbps = 2.0 * nbytes / (ms * 1e-3) / 1e12   # read once, written once
    del src, dst
    return dict(matmul_tflops=tflops, matmul_tflops_gpt2_shape=tflops_gpt2, bandwidth_tbps=tbps,
                matmul_tflops_sustained=sustained,
                source="measured: torch %s on %s (median of %d after %d warm-up)"
                       % (torch.__version__, torch.cuda.get_device_name(0), runs, warmup))


def ceilings_from_arg(arg):
    """--ceilings "TFLOPS,TBPS", or the path of a file written by --ceilings-json."""
    if os.path.isfile(arg):
        with open(arg) as f:
            c = json.load(f)
        c["source"] = "from %s (%s)" % (arg, c.get("source", "?"))
        return c
    try:
        tf, tb = (float(v) for v in arg.split(","))
    except ValueError:
        sys.exit("roofline.py: --ceilings wants TFLOPS,TBPS (e.g. 790,4.3) or a file from --ceilings-json: %r" % arg)
    return dict(matmul_tflops=tf, matmul_tflops_gpt2_shape=None, bandwidth_tbps=tb, source="given (--ceilings)")


# ---------------------------------------------------------------------------------------------------------------
# The profile
# ---------------------------------------------------------------------------------------------------------------

PROFILE_HEAD = re.compile(r"GPT2GEN_PROFILE: mean per training step over (\d+) steps")
PROFILE_ENTRY = re.compile(r"^\s+(\S.*?)\s+(-?[0-9]+(?:\.[0-9]+)?) ms\s+(-?[0-9]+(?:\.[0-9]+)?)%\s*$")
PROFILE_TOTAL = re.compile(r"^\s+total\s+([0-9]+(?:\.[0-9]+)?) ms\s*$")


def parse_profile(text, where="log"):
    """The last GPT2GEN_PROFILE section of a log: {"steps": n, "ops": [(name, ms), ...], "total": ms}."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if PROFILE_HEAD.search(line)]
    if not heads:
        sys.exit("roofline.py: %s has no GPT2GEN_PROFILE section (run gpt2gen train with GPT2GEN_PROFILE=1)" % where)
    i = heads[-1]
    prof = dict(steps=int(PROFILE_HEAD.search(lines[i]).group(1)), ops=[], total=None)
    for line in lines[i + 1:]:
        t = PROFILE_TOTAL.match(line)
        if t:
            prof["total"] = float(t.group(1))
            break
        e = PROFILE_ENTRY.match(line)
        if e:
            prof["ops"].append((e.group(1), float(e.group(2))))
        elif len(prof["ops"]) > 64:   # PROFILE_MAX is 32: no total line came
            break
        # anything else (a stdout line interleaved with stderr's) is skipped
    if prof["total"] is None:
        prof["total"] = sum(ms for _, ms in prof["ops"])
        print("roofline.py: warning: %s: the profile has no total line; using the sum of its ops" % where,
              file=sys.stderr)
    return prof


# ---------------------------------------------------------------------------------------------------------------
# The work of each op per micro-step: THE TABLE
# ---------------------------------------------------------------------------------------------------------------

def work_table(s):
    """For each op name of the profile: calls per micro-step, FLOPs and bytes per micro-step (over all its calls),
    and how they were counted. s: the shape (see shape_from_args). Conventions:
      - a GEMM of an (m x k) input and a (k x n) weight: 2*m*n*k FLOPs; its bytes: the operands read once and the
        output written once (x bytes an element), the least any kernel moves;
      - causal attention forward: 4*B*NH*T*T*HS / 2 FLOPs (QK^T and PV, half the scores); backward: 2.5x the
        forward (5 products against 2, as FlashAttention counts it);
      - elementwise and reduction ops: FLOPs not counted (0), only the bytes they must read and write;
      - weight gradients accumulate (read and written), as the step adds them up over micro-steps."""
    B, T, C, L, NH, Vp, V, x = s["B"], s["T"], s["C"], s["L"], s["NH"], s["Vp"], s["V"], s["x"]
    BT, HS = B * T, C // NH
    P = s["params"]
    accum = s["accum"]
    f32 = 4

    def gemm_fwd(m, k, n, bias=True, aux=False):
        """out = inp @ W^T (+ bias): reads inp (m,k), W (n,k), bias (n); writes out (m,n), and the
        pre-activation (m,n) again when aux (the GELU epilogue keeps it for the backward)."""
        flops = 2 * m * n * k
        nbytes = x * (m * k + n * k + (n if bias else 0) + m * n * (2 if aux else 1))
        return flops, nbytes

    def gemm_bwd(m, k, n, pre=False):
        """The forward's (m,k)x(k,n) backward, two GEMMs (its bias gradient is "bias backward"):
             dinp = dout @ W:   reads dout (m,n), W (n,k), writes dinp (m,k); with pre, also reads the
                                pre-activation (m,k) for the DGELU epilogue;
             dW  += dout^T inp: reads dout (m,n), inp (m,k), reads and writes dW (n,k)."""
        flops = 2 * (2 * m * n * k)
        nbytes = x * (m * n + n * k + m * k + (m * k if pre else 0))   # dinp
        nbytes += x * (m * n + m * k + 2 * n * k)                       # dW
        return flops, nbytes

    def bias_bwd(m, n):
        """dbias += the column sums of dout (m,n): reads dout, fp32 partials (ROW_SPLITS=64 rows of n, written and
        read), dbias read and written."""
        return x * m * n + 2 * 64 * n * f32 + 2 * x * n

    def times(calls, fb):
        return calls * fb[0], calls * fb[1]

    attn_fwd_flops = 4 * B * NH * T * T * HS // 2
    lnfwd_plain = x * (BT * C + BT * C) + 2 * f32 * BT + 2 * x * C          # read x; write out; mean, rstd; w, b
    lnfwd_fused = x * (2 * BT * C + 2 * BT * C) + 2 * f32 * BT + 2 * x * C  # read both inputs; write sum and out
    ln_plain_calls = 1                                                      # layer 0's ln1
    ln_fused_calls = 2 * L                                                  # residual add + LN, twice a layer
    fc_bias_in_gelu = s["fc_bias_in_gelu"]
    master = s["master"]

    rows = {}

    def op(name, calls, flops, nbytes, how):
        rows[name] = dict(calls=calls, flops=flops, bytes=nbytes, how=how)

    #  name                          calls      FLOPs, bytes (all calls of a micro-step)           how
    op("encoder forward", 1, 0,
       4 * BT + x * BT * C + x * T * C + x * BT * C,
       "read tokens (int32), a wte row per token, wpe (T,C); write (B,T,C)")
    op("layernorm forward", ln_plain_calls + ln_fused_calls, 0,
       ln_plain_calls * lnfwd_plain + ln_fused_calls * lnfwd_fused,
       "plain (1): read x, write out, mean, rstd; fused residual (2L): read 2 inputs, write sum and out")
    op("matmul qkv", L, *times(L, gemm_fwd(BT, C, 3 * C)),
       "GEMM m=BT k=C n=3C + bias")
    op("attention forward", L, L * attn_fwd_flops,
       L * (x * (3 * BT * C + BT * C) + f32 * B * NH * T),
       "causal 4*B*NH*T*T*HS/2; read qkv, write out and the log-sum-exp (fp32)")
    op("matmul attproj", L, *times(L, gemm_fwd(BT, C, C)),
       "GEMM m=BT k=C n=C + bias")
    op("matmul fc+gelu", L, *times(L, gemm_fwd(BT, C, 4 * C, aux=True)),
       "GEMM m=BT k=C n=4C + bias, GELU epilogue writing the activation and the pre-activation")
    op("matmul fc", L, *times(L, gemm_fwd(BT, C, 4 * C)),
       "GEMM m=BT k=C n=4C + bias (writes the pre-activation only)")
    op("gelu forward", L, 0, L * x * (2 * BT * 4 * C),
       "read the pre-activation (BT,4C), write the activation (BT,4C)")
    op("matmul fcproj", L, *times(L, gemm_fwd(BT, 4 * C, C)),
       "GEMM m=BT k=4C n=C + bias")
    # the classifier over K chunks of BT/K rows (--classifier-chunks; 1: all rows at once): K calls of each entry;
    # wte is read by each chunk's GEMMs and dwte read and written by each chunk's dW GEMM, so those K times
    K = s["chunks"]
    mc = BT // K
    op("matmul classifier", K, *times(K, gemm_fwd(mc, C, Vp, bias=False)),
       "GEMM m=BT k=C n=Vp, no bias (per chunk: m=BT/K); writes the logits (BT,Vp)")
    op("classifier (loss+dlogits)", K, 0, x * 2 * BT * Vp + 2 * 4 * BT,
       "read the logits (BT,Vp), write dlogits in place; targets, losses")
    op("matmul bwd classifier", K, *times(K, gemm_bwd(mc, C, Vp)),
       "dinp + dW GEMMs of m=BT k=C n=Vp, no bias (per chunk: m=BT/K)")
    ln_remade = 2 * L if s["recompute"] >= 2 else 0                         # recompute=2: the output made again
    op("layernorm backward", 2 * L + 1, 0,
       (2 * L + 1) * (x * (BT * C + BT * C + 2 * BT * C) + 2 * f32 * BT
                      + 2 * LN_BWD_BLOCKS * 2 * C * f32 + 2 * 2 * x * C) + ln_remade * x * BT * C,
       "read dout, x, mean, rstd; dx added into the residual gradient (read+write); fp32 partials of dw, db "
       "(%d blocks x 2C, written and read); dw, db; at recompute=2 the 2L of the layers also write the "
       "LayerNorm's output again" % LN_BWD_BLOCKS)
    op("gelu recompute", L if s["recompute"] >= 1 else 0, 0,
       (L if s["recompute"] >= 1 else 0) * x * (2 * BT * 4 * C),
       "read the pre-activation (BT,4C), write the activation (BT,4C)")
    op("gelu backward", L, 0,
       L * (x * (3 * BT * 4 * C) + (2 * 64 * 4 * C * f32 + 2 * x * 4 * C if fc_bias_in_gelu else 0)),
       "dfch *= GELU'(fch) in place: read dfch and fch, write dfch%s"
       % (" (+ the fc bias gradient: partials and dbias)" if fc_bias_in_gelu else ""))
    op("matmul bwd fcproj+dgelu", L, *times(L, gemm_bwd(BT, 4 * C, C, pre=True)),
       "dinp (DGELU epilogue: reads the pre-activation) + dW GEMMs of m=BT k=4C n=C")
    op("matmul bwd fcproj", L, *times(L, gemm_bwd(BT, 4 * C, C)),
       "dinp + dW GEMMs of m=BT k=4C n=C (no DGELU)")
    op("matmul bwd fc", L, *times(L, gemm_bwd(BT, C, 4 * C)), "dinp + dW GEMMs of m=BT k=C n=4C")
    bias_widths = [C, 3 * C, C] + ([] if fc_bias_in_gelu else [4 * C])   # fcproj, qkv, attproj (, fc)
    op("bias backward", len(bias_widths) * L, 0, L * sum(bias_bwd(BT, n) for n in bias_widths),
       "each layer's bias gradients: fcproj, attproj (C), qkv (3C)%s, a pass over each dout (BT,n)"
       % ("; the fc bias's is in gelu backward" if fc_bias_in_gelu else ", fc (4C)"))
    op("matmul bwd attproj", L, *times(L, gemm_bwd(BT, C, C)), "dinp + dW GEMMs of m=BT k=C n=C")
    op("attention backward", L, L * attn_fwd_flops * 5 // 2,
       L * (x * (3 * BT * C + BT * C + BT * C + 3 * BT * C) + f32 * B * NH * T * 3),
       "2.5x the forward's FLOPs; read qkv, out, dout, log-sum-exp, write dqkv; the rows' dot (fp32, written and read)")
    op("matmul bwd qkv", L, *times(L, gemm_bwd(BT, C, 3 * C)), "dinp + dW GEMMs of m=BT k=C n=3C")
    op("encoder backward", 1, 0,
       x * BT * C + 2 * x * T * C + 2 * x * min(BT, V) * C + 3 * 4 * BT,
       "read dout (B,T,C); dwpe (T,C) and the touched dwte rows (at most min(BT,V)) read and written; buckets")
    op("grad norm", 1.0 / accum, 0, x * P / accum,
       "read the gradients (P params) once an optimizer step")
    adamw_per_param = (x + x + 6 * f32) if master else (2 * x + x + 4 * f32)
    op("adamw", ADAMW_LAUNCHES / accum, 0, adamw_per_param * P / accum,
       ("write params (x), read grads (x), read+write master, m, v (fp32): %d bytes a param" if master else
        "read+write params, read grads, read+write m, v (fp32): %d bytes a param") % adamw_per_param)
    return rows


def shape_from_args(a, log_text=""):
    """The model shape of the options (--model's, with any of --layers ... overriding it)."""
    m = dict(MODELS[a.model]) if a.model else {}
    for k in ("layers", "heads", "channels", "batch"):
        if getattr(a, k) is not None:
            m[k] = getattr(a, k)
    missing = [k for k in ("layers", "heads", "channels", "batch") if k not in m]
    if missing:
        sys.exit("roofline.py: the model shape needs --model or --%s" % " --".join(missing))
    L, NH, C = m["layers"], m["heads"], m["channels"]
    Vp, S = a.vocab_padded, a.max_seq
    # parameters: wte (Vp,C), wpe (max_seq,C); per layer ln1 2C, qkv 3C*C+3C, attproj C*C+C, ln2 2C, fc 4C*C+4C,
    # fcproj 4C*C+C: 12*C*C+13*C; the final LayerNorm 2C. 124M: 124475904.
    params = Vp * C + S * C + L * (12 * C * C + 13 * C) + 2 * C
    if a.fc_bias_in_gelu == "auto":
        fc_bias_in_gelu = bool(re.search(r"^\s+gelu backward\s", log_text, re.M))
    else:
        fc_bias_in_gelu = a.fc_bias_in_gelu == "1"
    return dict(L=L, NH=NH, C=C, B=m["batch"], T=a.seq, Vp=Vp, V=a.vocab, x=a.bytes_per_elem, recompute=a.recompute,
                accum=a.grad_accum, chunks=a.classifier_chunks, params=params, master=a.bytes_per_elem < 4, fc_bias_in_gelu=fc_bias_in_gelu,
                max_seq=S)


# ---------------------------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------------------------

def roofline_rows(prof, work, ceil):
    """One row per op of the profile: its time and share, work, achieved rate, floor and time above it."""
    flops_s = ceil["matmul_tflops"] * 1e12
    bytes_s = ceil["bandwidth_tbps"] * 1e12
    rows = []
    for name, ms in prof["ops"]:
        r = dict(op=name, ms=ms, share=ms / prof["total"] if prof["total"] else 0.0)
        w = work.get(name)
        if w is None:
            r.update(calls=None, flops=None, bytes=None, bound=None, floor_ms=None, above_ms=None, how="unknown op")
        else:
            t_flops, t_bytes = w["flops"] / flops_s * 1e3, w["bytes"] / bytes_s * 1e3
            compute = t_flops >= t_bytes
            r.update(calls=w["calls"], flops=w["flops"], bytes=w["bytes"], how=w["how"],
                     bound="compute" if compute else "memory", floor_ms=max(t_flops, t_bytes))
            r["above_ms"] = ms - r["floor_ms"]
            if ms > 0:
                r["achieved"] = (w["flops"] if compute else w["bytes"]) / (ms * 1e-3) / 1e12
            if name.startswith("attention"):   # the second floor: an FA3-class kernel's rate
                r["floor_fa3_ms"] = max(w["flops"] / (FA3_TFLOPS * 1e12) * 1e3, t_bytes)
        rows.append(r)
    known = sorted((r for r in rows if r["floor_ms"] is not None), key=lambda r: -r["above_ms"])
    return known + [r for r in rows if r["floor_ms"] is None]


def fmt_calls(c):
    return "-" if c is None else ("%d" % c if abs(c - round(c)) < 1e-9 else "%.3g" % c)


def markdown(prof, rows, work_of, ceil, s, log_name):
    """The table of rows; work_of: the work table they came from (work_table(s)), for the floors at the sustained
    ceiling."""
    out = []
    tok = s["B"] * s["T"]
    g = ceil.get("matmul_tflops_gpt2_shape")
    out.append("Roofline of %s: L=%d NH=%d C=%d B=%d T=%d Vp=%d, %d bytes an element, recompute=%d, %s parameters; "
               "profile mean over %d micro-steps (ops synchronized one by one)."
               % (log_name, s["L"], s["NH"], s["C"], s["B"], s["T"], s["Vp"], s["x"], s["recompute"],
                  format(s["params"], ","), prof["steps"]))
    out.append("")
    out.append("Ceilings (%s): bf16 matmul %.0f TFLOP/s at 8192^3%s; memory %.2f TB/s (device-to-device copy of "
               "2 GiB, read + written)."
               % (ceil.get("source", "?"), ceil["matmul_tflops"],
                  "" if g is None else ", %.0f TFLOP/s at m=65536 k=768 n=3072" % g, ceil["bandwidth_tbps"]))
    out.append("Floor = max(FLOPs / matmul ceiling, bytes / bandwidth). FLOPs: 2mnk a GEMM; causal attention forward "
               "4*B*NH*T*T*HS/2, backward 2.5x the forward (FlashAttention's convention). Bytes: the least each op "
               "must read and write (formulas: work_table() in bench/roofline.py). Work and achieved rate are "
               "in FLOPs where the floor is compute-bound, in bytes where it is memory-bound.")
    out.append("")
    out.append("| op | calls | ms | share | work (GFLOP or GB) | achieved (TFLOP/s or TB/s) | floor ms | ms above floor |")
    out.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["floor_ms"] is None:
            out.append("| %s | - | %.2f | %.1f%% | - | - | - | - |" % (r["op"], r["ms"], 100 * r["share"]))
            continue
        if r["bound"] == "compute":
            work, rate = "%.0f GFLOP" % (r["flops"] / 1e9), "%.0f TFLOP/s" % r.get("achieved", 0)
        else:
            work, rate = "%.2f GB" % (r["bytes"] / 1e9), "%.2f TB/s" % r.get("achieved", 0)
        out.append("| %s | %s | %.2f | %.1f%% | %s | %s | %.2f | %.2f |"
                   % (r["op"], fmt_calls(r["calls"]), r["ms"], 100 * r["share"], work, rate, r["floor_ms"],
                      r["above_ms"]))
    known = [r for r in rows if r["floor_ms"] is not None]
    floor_sum = sum(r["floor_ms"] for r in known)
    unknown_ms = sum(r["ms"] for r in rows if r["floor_ms"] is None)
    out.append("")
    out.append("Sum of floors %.2f ms%s; profile total %.2f ms (%.0f tok/s); at the floors a micro-step of "
               "B*T = %d tokens would take %.2f ms: %.0f tok/s (%.2fx the profile's rate)."
               % (floor_sum, "" if not unknown_ms else " (unknown ops' %.2f ms left out)" % unknown_ms,
                  prof["total"], tok / (prof["total"] * 1e-3), tok, floor_sum, tok / (floor_sum * 1e-3),
                  prof["total"] / floor_sum))
    sus = ceil.get("matmul_tflops_sustained")
    if sus:   # the step runs at the GPU's power cap, where the matmul ceiling is lower than in a short run
        sus_rows = [r for r in roofline_rows(prof, work_of, dict(ceil, matmul_tflops=sus)) if r["floor_ms"] is not None]
        sus_sum = sum(r["floor_ms"] for r in sus_rows)
        out.append("At the sustained matmul ceiling (%.0f TFLOP/s: the 8192^3 matmul after 2 s back to back, where the "
                   "GPU holds its power cap by lowering its clock, as it does in a training step) the sum of floors "
                   "is %.2f ms: %.0f tok/s (%.2fx the profile's rate)."
                   % (sus, sus_sum, tok / (sus_sum * 1e-3), prof["total"] / sus_sum))
    att = [r for r in known if "floor_fa3_ms" in r]
    if att:
        fa3_sum = floor_sum + sum(r["floor_fa3_ms"] - r["floor_ms"] for r in att)
        out.append("Attention at an FA3-class %.0f TFLOP/s: %s; sum of floors with these %.2f ms: %.0f tok/s."
                   % (FA3_TFLOPS, "; ".join("%s floor %.2f ms (%.2f ms above)" % (r["op"], r["floor_fa3_ms"],
                                                                               r["ms"] - r["floor_fa3_ms"])
                                            for r in att), fa3_sum, tok / (fa3_sum * 1e-3)))
    return "\n".join(out)


def compare_markdown(before, after, rows, before_rows, before_name, after_name):
    """Before/after of the same ops: rows (the after table's order), then the ops only the before log has.
    before_rows: the before log's rows (roofline_rows), for the floors of its own ops."""
    b = dict(before["ops"])
    a = dict(after["ops"])
    floors = {r["op"]: r["floor_ms"] for r in before_rows}
    floors.update({r["op"]: r["floor_ms"] for r in rows})
    after_floor_sum = sum(r["floor_ms"] for r in rows if r["floor_ms"] is not None)
    names = [r["op"] for r in rows] + [n for n, _ in before["ops"] if n not in a]
    out = ["Before (%s) and after (%s), ms per micro-step:" % (before_name, after_name), "",
           "| op | floor ms | ms before | ms after | change ms | change |", "|---|---|---|---|---|---|"]

    def line(name, fl, x, y):
        d = "-" if x is None or y is None else "%+.2f" % (y - x)
        p = "-" if x is None or y is None or x == 0 else "%+.1f%%" % (100 * (y - x) / x)
        out.append("| %s | %s | %s | %s | %s | %s |" % (name, "-" if fl is None else "%.2f" % fl,
                                                         "-" if x is None else "%.2f" % x,
                                                         "-" if y is None else "%.2f" % y, d, p))
    for n in names:
        line(n, floors.get(n), b.get(n), a.get(n))
    line("total", after_floor_sum, before["total"], after["total"])
    out.append("")
    out.append("(floor of total: the sum of the after log's floors.)")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the output of gpt2gen train run with GPT2GEN_PROFILE=1")
    ap.add_argument("--model", choices=sorted(MODELS), help="124M: L12 NH12 C768 B64; 350M: L24 NH16 C1024 B32; ...")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--channels", type=int)
    ap.add_argument("--batch", type=int, help="B, rows of a micro-step")
    ap.add_argument("--seq", type=int, default=1024, help="T (default 1024)")
    ap.add_argument("--max-seq", type=int, default=1024, help="rows of wpe (default 1024)")
    ap.add_argument("--vocab-padded", type=int, default=50304)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--bytes-per-elem", type=int, default=2, help="2 for bf16/fp16 (default), 4 for fp32")
    ap.add_argument("--recompute", type=int, default=1, help="train.recompute (default 1)")
    ap.add_argument("--grad-accum", type=int, default=1,
                    help="micro-steps per optimizer step (default 1): grad norm and AdamW count 1/N of theirs")
    ap.add_argument("--classifier-chunks", type=int, default=1,
                    help="K: the classifier's entries run K times, on BT/K rows each (default 1)")
    ap.add_argument("--fc-bias-in-gelu", choices=("auto", "0", "1"), default="auto",
                    help="the fc bias gradient is folded into 'gelu backward' (auto: when the log has that op)")
    ap.add_argument("--ceilings", help="TFLOPS,TBPS (e.g. 790,4.3), or a file from --ceilings-json; "
                                       "without it they are measured with PyTorch")
    ap.add_argument("--ceilings-json", help="write the ceilings to this file")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--compare", metavar="BEFORE_LOG", help="another profile log: a before (it) / after (LOG) table")
    a = ap.parse_args()

    with open(a.log, errors="replace") as f:
        text = f.read()
    prof = parse_profile(text, a.log)   # before measuring: a log without a profile fails fast
    before = None
    if a.compare:
        with open(a.compare, errors="replace") as f:
            before = parse_profile(f.read(), a.compare)
    s = shape_from_args(a, text)
    ceil = ceilings_from_arg(a.ceilings) if a.ceilings else measure_ceilings()
    if a.ceilings_json and not a.ceilings:   # measured here (given ones are not written back)
        with open(a.ceilings_json, "w") as f:
            json.dump(ceil, f, indent=1)
            f.write("\n")
    work = work_table(s)
    rows = roofline_rows(prof, work, ceil)
    print(markdown(prof, rows, work, ceil, s, os.path.basename(a.log)))
    if before is not None:
        print()
        print(compare_markdown(before, prof, rows, roofline_rows(before, work, ceil), os.path.basename(a.compare),
                               os.path.basename(a.log)))
    if a.json:
        known = [r for r in rows if r["floor_ms"] is not None]
        floor_sum = sum(r["floor_ms"] for r in known)
        with open(a.json, "w") as f:
            json.dump(dict(log=a.log, shape=s, ceilings=ceil, steps=prof["steps"], total_ms=prof["total"],
                           floor_sum_ms=floor_sum,
                           tok_per_s_at_floor=s["B"] * s["T"] / (floor_sum * 1e-3) if floor_sum else None,
                           rows=rows), f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
