"""The peers of bench/sample.sh: text generation (greedy, with a key/value cache) of a randomly initialized GPT-2, or
of a Llama-shaped model (--model llama-124M: configs/llama-124M.lua's shape), in bf16 by Hugging Face transformers
and by a PyTorch decode loop written here, plus the files our side needs.
Written for this project; speed only (random weights, random prompt ids from a fixed seed).

Subcommands (each has --help):
  write-checkpoint --model M --out PATH   an llm.c fp32 model checkpoint of a fresh GPT-2 (docs/model.md, "Init":
                                          N(0, 0.02) weights, attprojw/fcprojw N(0, 0.02/sqrt(2L)), zero biases,
                                          LayerNorm 1/0, wte rows V..Vp-1 zero); numpy if there is one, else the
                                          standard library alone (its weights then repeat a pool of 65536 normals).
                                          For a llama-* model, PATH is a folder that transformers' save_pretrained
                                          of a LlamaForCausalLM could have written (config.json, model.safetensors
                                          in fp32; the same init: o_proj/down_proj N(0, 0.02/sqrt(2L)), the
                                          RMSNorms 1, the rest N(0, 0.02)); `gpt2gen import PATH -o FILE` makes
                                          our checkpoint of it, and the peers' --checkpoint is the folder
  write-prompt --words N --out PATH       text of N common words, each one GPT-2 token ("The cat sat ..."), no newline
  hf --model M --batch B... --prompt-tokens n --tokens N
        GPT2LMHeadModel.generate (LlamaForCausalLM's for llama-*; bf16, use_cache=True, greedy, exactly N new
        tokens), batch B of one prompt:
        hf-generate {"rows":B, ..., "tok_per_s":B*N/decode, "decode_ms_how":...}, one line per batch
  torch-loop --model M --batch B... --prompt-tokens n --tokens N [--mode MODES]
        a plain GPT-2 with static K/V caches (L tensors of (B, NH, maxT, HS) each for K and V): prefill n-1 prompt
        tokens in one forward, then N decode steps (the first consumes the last prompt token), greedy argmax on
        the GPU: torch-loop {"rows":B, "prefill_ms", "decode_ms", "tok_per_s", "mode", "modes", ...}.
        A llama-* model: the same loop over transformers' Llama block (RMSNorm in fp32, RoPE of rotate_half, a
        SwiGLU MLP, no biases, an untied head), q, k, v in one matmul and gate and up in one; the caches hold
        the NKV key/value heads, (B, NKV, maxT, HS), and a decode step attends with the NH/NKV query heads of
        each key/value head as the rows of one SDPA call (no copy of the cache); the prefill repeats k and v
        over the groups (repeat_interleave, as transformers' repeat_kv)
  prefill --model M --tokens T
        the prefill forward of T tokens (batch 1): hf-prefill {json} (model(ids, use_cache=True)) and
        torch-prefill {json} (the loop's prefill), each with tok_per_s = T / time
--checkpoint PATH makes hf, torch-loop and prefill use that checkpoint's weights (the one gpt2gen samples from; for
llama-*, the folder that gpt2gen imported); without it they start from the same kind of random init.
llama-tiny (L=2, NH=4, NKV=2, C=64) is for checking the Llama paths on a CPU (--device cpu --dtype fp32).

torch-loop modes (--mode, a comma list, or "best" = graph,compile+graph; the fastest that works is reported):
  eager            the decode step as plain PyTorch ops (the only mode on the CPU)
  graph            the eager decode step captured in a torch.cuda.CUDAGraph and replayed, one graph per
                   128-position bucket of the cache length (attention reads the cache up to the bucket's end,
                   masked past the current position), so each step attends over at most 127 unused slots
  compile+graph    the same, with each block's two halves (LN1 + QKV; attention projection + residual + LN2 + MLP
                   + residual) and the head (LN + logits + argmax) compiled by torch.compile (inductor, static
                   shapes); attention (SDPA) and the cache writes stay eager, all captured in the CUDA graph
  reduce-overhead  the whole decode step under torch.compile(mode="reduce-overhead", fullgraph=True)
                   (inductor's CUDA graph trees; weights and caches marked static; attention over all maxT slots)
Every timing is torch.cuda.synchronize()d around; one warm-up run (which compiles and captures) comes first,
then --runs timed runs, and the median is reported.
"""
import argparse
import gc
import json
import math
import os
import random
import statistics
import struct
import sys
import time
import traceback

SIZES = {"124M": (12, 12, 768), "350M": (24, 16, 1024), "774M": (36, 20, 1280), "1558M": (48, 25, 1600),
         "tiny": (2, 2, 64),    # tiny: for checking this script on a CPU
         "llama-124M": (12, 12, 768), "llama-tiny": (2, 4, 64)}
# the Llama-shaped models (configs/llama-124M.lua; llama-tiny for the CPU): key/value heads, the SwiGLU's hidden size,
# RoPE's theta; every one has norm_eps LLAMA_EPS (configs/defaults.lua's 1e-5), no biases, an untied head, maxT MAXT
LLAMA = {"llama-124M": {"NKV": 4, "F": 2048, "theta": 10000.0}, "llama-tiny": {"NKV": 2, "F": 160, "theta": 10000.0}}
LLAMA_EPS = 1e-5
V, VP, MAXT = 50257, 50304, 1024
EOT = 50256
CHECKPOINT_MAGIC, CHECKPOINT_FP32, HEADER_INTS = 20240326, 3, 256
LAYER = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb"]
PROMPT_SEED = 1234
BUCKET = 128
# common English words that are one GPT-2 token each, with the leading space and without it ("The" starts the text)
WORDS = ("the cat sat on a mat and the dog ran to the park with his friend when it was time for them to go home "
         "but she said that we should stay here all day because there is more food in this old house than you can "
         "eat so they made some tea for us after which our small group of people walked back into town").split()

torch = F = None       # imported by load_torch(): --help and write-checkpoint work without PyTorch


def load_torch():
    global torch, F
    import torch as _torch
    import torch.nn.functional as _F
    torch, F = _torch, _F
    return torch


def param_shapes(L, C, maxT):
    return [("wte", (VP, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, 3 * C, C)),
            ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
            ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
            ("lnfw", (C,)), ("lnfb", (C,))]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def init_std(name, L):
    """docs/model.md, "Init": the std of a weight's normal init; None: LayerNorm weight (1); 0: bias (0)."""
    if name in ("ln1w", "ln2w", "lnfw"):
        return None
    if name in ("attprojw", "fcprojw"):
        return 0.02 / math.sqrt(2 * L)
    if name in ("wte", "wpe", "qkvw", "fcw"):
        return 0.02
    return 0.0


def median(xs):
    return statistics.median(xs)


def emit(tag, obj):
    print(tag + " " + json.dumps(obj, separators=(",", ":")), flush=True)


# ---------------------------------------------------------------- write-checkpoint, write-prompt

class TensorWriter:
    """Writes random fp32 tensors one after another, from one stream seeded once: numpy's generator if there is
    numpy, else the standard library's, whose tensors are made of rotations of a pool of 65536 normals, one random
    rotation per 65536 values (normal values, not independent ones: enough for a speed benchmark)."""

    def __init__(self, seed):
        try:
            import numpy as np
        except ImportError:
            np = None
        self.np = np
        if np is not None:
            self.rng = np.random.default_rng(seed)
        else:
            self.rnd = random.Random(seed)
            self.pool_n = 1 << 16
            self.base = [self.rnd.gauss(0.0, 1.0) for _ in range(self.pool_n)]
            self.pools = {}

    def write(self, f, n, real, std):
        """n values into f: the first real of them N(0, std) (std None: ones; 0.0: zeros), the rest zeros"""
        if self.np is not None:
            np = self.np
            chunk = 1 << 24
            for i in range(0, real, chunk):
                k = min(chunk, real - i)
                if std is None:
                    a = np.ones(k, dtype="<f4")
                elif std == 0.0:
                    a = np.zeros(k, dtype="<f4")
                else:
                    a = self.rng.standard_normal(k, dtype=np.float32)
                    a *= np.float32(std)
                f.write(a.astype("<f4", copy=False).tobytes())
        else:
            from array import array
            pool_n = self.pool_n
            if std is None or std == 0.0:
                one = array("f", [1.0 if std is None else 0.0]) * pool_n
                if sys.byteorder == "big":
                    one.byteswap()
                blob = one.tobytes()
                for i in range(0, real, pool_n):
                    f.write(blob[:4 * min(pool_n, real - i)])
            else:
                if std not in self.pools:
                    p = array("f", [v * std for v in self.base])
                    if sys.byteorder == "big":
                        p.byteswap()
                    self.pools[std] = p.tobytes()
                blob = self.pools[std]
                for i in range(0, real, pool_n):
                    o = 4 * self.rnd.randrange(pool_n)
                    f.write((blob[o:] + blob[:o])[:4 * min(pool_n, real - i)])
        if real < n:
            f.write(bytes(4 * (n - real)))


def write_checkpoint(path, L, NH, C, maxT, seed):
    header = [0] * HEADER_INTS
    header[:8] = [CHECKPOINT_MAGIC, CHECKPOINT_FP32, maxT, V, L, NH, C, VP]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    total = 0
    with open(tmp, "wb") as f:
        f.write(struct.pack(f"<{HEADER_INTS}i", *header))
        w = TensorWriter(seed)
        for name, shape in param_shapes(L, C, maxT):
            n = numel(shape)
            w.write(f, n, V * C if name == "wte" else n, init_std(name, L))    # wte's padding rows are zero
            total += n
    if os.path.getsize(tmp) != 4 * (HEADER_INTS + total):
        os.remove(tmp)
        sys.exit(f"sample_peers: {path}: wrote the wrong size")
    os.replace(tmp, path)
    return total


def llama_tensors(model):
    """A Llama-shaped model's tensors as transformers' LlamaForCausalLM names them (nn.Linear's (out, in)), with
    their shapes and init std (None: ones), layer by layer."""
    L, NH, C = SIZES[model]
    s = LLAMA[model]
    HS, NKV, Fh = C // NH, s["NKV"], s["F"]
    proj = 0.02 / math.sqrt(2 * L)
    out = [("model.embed_tokens.weight", (V, C), 0.02)]
    for l in range(L):
        q = f"model.layers.{l}."
        out += [(q + "input_layernorm.weight", (C,), None),
                (q + "self_attn.q_proj.weight", (NH * HS, C), 0.02),
                (q + "self_attn.k_proj.weight", (NKV * HS, C), 0.02),
                (q + "self_attn.v_proj.weight", (NKV * HS, C), 0.02),
                (q + "self_attn.o_proj.weight", (C, NH * HS), proj),
                (q + "post_attention_layernorm.weight", (C,), None),
                (q + "mlp.gate_proj.weight", (Fh, C), 0.02),
                (q + "mlp.up_proj.weight", (Fh, C), 0.02),
                (q + "mlp.down_proj.weight", (C, Fh), proj)]
    return out + [("model.norm.weight", (C,), None), ("lm_head.weight", (V, C), 0.02)]


def llama_config(model, maxT):
    """config.json of the folder: the keys gpt2gen export writes for a LlamaForCausalLM (runtime/hf/hf_llama.c)"""
    L, NH, C = SIZES[model]
    s = LLAMA[model]
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": C,
            "intermediate_size": s["F"], "num_hidden_layers": L, "num_attention_heads": NH,
            "num_key_value_heads": s["NKV"], "head_dim": C // NH, "max_position_embeddings": maxT,
            "hidden_act": "silu", "rms_norm_eps": LLAMA_EPS, "rope_theta": s["theta"],
            "rope_parameters": {"rope_theta": s["theta"], "rope_type": "default"}, "attention_bias": False,
            "attention_dropout": 0.0, "mlp_bias": False, "pretraining_tp": 1, "initializer_range": 0.02,
            "use_cache": True, "tie_word_embeddings": False, "bos_token_id": EOT, "eos_token_id": EOT,
            "torch_dtype": "float32"}


def write_atomic(path, write):
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            write(f)
    except BaseException:
        os.remove(tmp)
        raise
    os.replace(tmp, path)


def write_llama_folder(out, model, maxT, seed):
    """config.json and model.safetensors (fp32, safetensors' layout: an 8-byte little-endian header length, the
    JSON header padded with spaces to a multiple of 8, the tensors at their data_offsets), each written atomically,
    the safetensors file last; returns the parameter count"""
    tensors = llama_tensors(model)
    meta, o = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in tensors:
        meta[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [o, o + 4 * numel(shape)]}
        o += 4 * numel(shape)
    head = json.dumps(meta, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    os.makedirs(out, exist_ok=True)
    write_atomic(os.path.join(out, "config.json"),
                 lambda f: f.write(json.dumps(llama_config(model, maxT), indent=2).encode() + b"\n"))

    def body(f):
        f.write(struct.pack("<Q", len(head)) + head)
        w = TensorWriter(seed)
        for name, shape, std in tensors:
            w.write(f, numel(shape), numel(shape), std)
        if f.tell() != 8 + len(head) + o:
            sys.exit(f"sample_peers: {out}/model.safetensors: wrote the wrong size")
    write_atomic(os.path.join(out, "model.safetensors"), body)
    return o // 4


def cmd_write_checkpoint(a):
    L, NH, C = SIZES[a.model]
    t0 = time.perf_counter()
    if a.model in LLAMA:
        n = write_llama_folder(a.out, a.model, a.max_seq, a.seed)
        print(f"wrote {a.out}/: config.json, model.safetensors: {a.model} L={L} NH={NH} NKV={LLAMA[a.model]['NKV']} "
              f"C={C} F={LLAMA[a.model]['F']} maxT={a.max_seq} V={V}, {n} fp32 parameters, "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        return
    n = write_checkpoint(a.out, L, NH, C, a.max_seq, a.seed)
    print(f"wrote {a.out}: gpt2-{a.model} L={L} NH={NH} C={C} maxT={a.max_seq} V={V} Vp={VP}, {n} fp32 parameters, "
          f"{time.perf_counter() - t0:.1f} s", flush=True)


def prompt_text(words):
    out = []
    for i in range(words):
        w = WORDS[i % len(WORDS)]
        out.append("The" if i == 0 else " " + w)
    return "".join(out)


def cmd_write_prompt(a):
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = f"{a.out}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(prompt_text(a.words))
    os.replace(tmp, a.out)
    print(f"wrote {a.out}: {a.words} words", flush=True)


# ---------------------------------------------------------------- weights for the peers

def read_header(path):
    with open(path, "rb") as f:
        h = struct.unpack(f"<{HEADER_INTS}i", f.read(4 * HEADER_INTS))
    if h[0] != CHECKPOINT_MAGIC or h[1] != CHECKPOINT_FP32:
        sys.exit(f"sample_peers: {path}: not an llm.c fp32 checkpoint (magic {h[0]}, version {h[1]})")
    return {"maxT": h[2], "V": h[3], "L": h[4], "NH": h[5], "C": h[6], "Vp": h[7]}


def load_params(path, model, device, dtype, seed=1337):
    """The parameters, stacked over layers in checkpoint order, as dtype on device: from an llm.c fp32 checkpoint
    (which must be of this model), or a fresh init. A llama-* model: load_llama_params."""
    if model in LLAMA:
        return load_llama_params(path, model, device, dtype, seed)
    L, NH, C = SIZES[model]
    shapes = param_shapes(L, C, MAXT)
    total = sum(numel(s) for _, s in shapes)
    if path:
        h = read_header(path)
        want = {"maxT": MAXT, "V": V, "L": L, "NH": NH, "C": C, "Vp": VP}
        if h != want:
            sys.exit(f"sample_peers: {path}: shape {h}, expected gpt2-{model}'s {want}")
        if os.path.getsize(path) != 4 * (HEADER_INTS + total):
            sys.exit(f"sample_peers: {path}: size {os.path.getsize(path)}, expected {4 * (HEADER_INTS + total)}")
        flat = torch.from_file(path, shared=False, size=HEADER_INTS + total, dtype=torch.float32)[HEADER_INTS:]
        p, o = {}, 0
        for name, shape in shapes:
            p[name] = flat[o:o + numel(shape)].view(shape).to(device=device, dtype=dtype)
            o += numel(shape)
        del flat
        return p
    g = torch.Generator().manual_seed(seed)
    p = {}
    for name, shape in shapes:
        std = init_std(name, L)
        if std is None:
            t = torch.ones(shape)
        elif std == 0.0:
            t = torch.zeros(shape)
        else:
            t = torch.randn(shape, generator=g) * std
        if name == "wte":
            t[V:] = 0
        p[name] = t.to(device=device, dtype=dtype)
    return p


def load_llama_params(path, model, device, dtype, seed):
    """A Llama-shaped model's tensors under transformers' names (llama_tensors), as dtype on device: from the
    model.safetensors of the folder write-checkpoint wrote (F32, every tensor with its shape), or a fresh init"""
    want = {name: (shape, std) for name, shape, std in llama_tensors(model)}
    if not path:
        g = torch.Generator().manual_seed(seed)
        return {name: (torch.ones(shape) if std is None else torch.randn(shape, generator=g) * std).to(device=device, dtype=dtype)
                for name, (shape, std) in want.items()}
    f = os.path.join(path, "model.safetensors")
    if not os.path.isfile(f):
        sys.exit(f"sample_peers: {f}: no such file (--checkpoint of {model}: the folder write-checkpoint wrote)")
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        meta = json.loads(fh.read(n))
    meta.pop("__metadata__", None)
    if set(meta) != set(want):
        sys.exit(f"sample_peers: {f}: tensors {sorted(set(meta) ^ set(want))[:4]} are missing or unexpected for {model}")
    size = os.path.getsize(f)
    raw = torch.from_file(f, shared=False, size=size, dtype=torch.uint8)
    p = {}
    for name, (shape, _) in want.items():
        m = meta[name]
        b, e = m["data_offsets"]
        if m["dtype"] != "F32" or tuple(m["shape"]) != shape or e - b != 4 * numel(shape) or 8 + n + e > size:
            sys.exit(f"sample_peers: {f}: {name} is {m['dtype']} {m['shape']} at {b}..{e}, expected F32 {list(shape)}")
        p[name] = raw[8 + n + b:8 + n + e].view(torch.float32).view(shape).to(device=device, dtype=dtype)
    del raw
    return p


def prompt_ids(n):
    g = torch.Generator().manual_seed(PROMPT_SEED)
    return torch.randint(0, V, (n,), generator=g)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def setup_torch(a):
    load_torch()
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("sample_peers: no CUDA device (use --device cpu --dtype fp32 to check the script on the CPU)")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return device, dtype


def env_info(device):
    info = {"torch": torch.__version__}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


# ---------------------------------------------------------------- the PyTorch decode loop

def attn_in(x, lnw, lnb, qkvw, qkvb, NH: int):
    """LN1 + QKV of x (B, T, C): q, k, v as (B, NH, T, HS) views."""
    B, T, C = x.shape
    h = F.layer_norm(x, (C,), lnw, lnb, 1e-5)
    qkv = F.linear(h, qkvw, qkvb).view(B, T, 3, NH, C // NH)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v


def attn_out_mlp(x, y, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb):
    """x + proj(y), then + MLP(LN2(.)): y (B, NH, T, HS) the attention output."""
    B, T, C = x.shape
    x = x + F.linear(y.transpose(1, 2).reshape(B, T, C), projw, projb)
    h = F.layer_norm(x, (C,), ln2w, ln2b, 1e-5)
    h = F.gelu(F.linear(h, fcw, fcb), approximate="tanh")
    return x + F.linear(h, fcprojw, fcprojb)


def head_argmax(x, lnfw, lnfb, wte, nvocab: int):
    """LN_f + tied logits + greedy argmax over the nvocab real ids, of x (B, C)."""
    h = F.layer_norm(x, (x.shape[-1],), lnfw, lnfb, 1e-5)
    return F.linear(h, wte)[:, :nvocab].argmax(-1)


class TorchLoop:
    """GPT-2 greedy decoding with static K/V caches: kc[l], vc[l] of (B, NH, maxT, HS). All state lives in
    preallocated tensors (tok (B,), pos (1,), idx (B, T) of the prefill, out (B, maxT)), so each step has fixed
    shapes and can be captured in a CUDA graph."""

    EAGER = (attn_in, attn_out_mlp, head_argmax)     # the block's two halves and the head, as plain PyTorch ops

    def __init__(self, p, model, B, mode, prefill_mode, device, dtype):
        L, NH, C = SIZES[model]
        self.L, self.NH, self.C, self.HS, self.B = L, NH, C, C // NH, B
        self.mode, self.prefill_mode, self.device = mode, prefill_mode, device
        self.p = p
        self.layers = [tuple(p[n][l] for n in LAYER) for l in range(L)]
        self.init_state(NH, dtype)
        self.init_modes(list(p.values()) + [w for ws in self.layers for w in ws])

    def init_state(self, NKV, dtype):
        """the caches (NKV key/value heads) and the step's buffers"""
        B, device, z = self.B, self.device, dict(device=self.device, dtype=dtype)
        self.kc = [torch.zeros(B, NKV, MAXT, self.HS, **z) for _ in range(self.L)]
        self.vc = [torch.zeros(B, NKV, MAXT, self.HS, **z) for _ in range(self.L)]
        self.tok = torch.zeros(B, dtype=torch.long, device=device)
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self.out = torch.zeros(B, MAXT, dtype=torch.long, device=device)
        self.ar = torch.arange(MAXT, device=device)
        self.ninf = torch.full((MAXT,), float("-inf"), **z)
        self.idx = None
        self.graphs, self.prefill_graph, self.pool = {}, None, None

    def init_modes(self, weights):
        """the functions of the decode step and of the prefill; reduce-overhead's compiled step, with weights and
        the other tensors it reads marked static"""
        self.dec_fns = self.compiled() if self.mode == "compile+graph" else self.EAGER
        self.pre_fns = self.compiled() if self.prefill_mode == "compile+graph" else self.EAGER
        self.ro_step = None
        if self.mode == "reduce-overhead":
            for t in weights + self.kc + self.vc + [self.ar, self.ninf]:
                torch._dynamo.mark_static_address(t)
            self.ro_step = torch.compile(self.step_full, mode="reduce-overhead", fullgraph=True, dynamic=False)

    @classmethod
    def compiled(cls):
        if cls.__dict__.get("_compiled") is None:      # each class its own (a subclass has other functions)
            c = lambda f: torch.compile(f, dynamic=False, fullgraph=True)
            cls._compiled = tuple(c(f) for f in cls.EAGER)
        return cls._compiled

    # one decode step at self.pos, attending over cache slots [0, Lb): writes out[:, pos], tok, pos += 1
    def step(self, Lb):
        fin, fout, fhead = self.dec_fns
        p, pos = self.p, self.pos
        x = (F.embedding(self.tok, p["wte"]) + F.embedding(pos, p["wpe"])).unsqueeze(1)     # (B, 1, C)
        bias = self.ninf[:Lb].masked_fill(self.ar[:Lb] <= pos, 0.0).view(1, 1, 1, Lb)   # 0 up to pos, -inf past it
        for l, w in enumerate(self.layers):
            q, k, v = fin(x, w[0], w[1], w[2], w[3], self.NH)
            self.kc[l].index_copy_(2, pos, k)
            self.vc[l].index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, self.kc[l][:, :, :Lb], self.vc[l][:, :, :Lb], attn_mask=bias)
            x = fout(x, y, *w[4:])
        nxt = fhead(x[:, 0], p["lnfw"], p["lnfb"], p["wte"], V)
        self.out.index_copy_(1, pos, nxt.unsqueeze(1))
        self.tok.copy_(nxt)
        pos.add_(1)

    # the reduce-overhead step: tok (B,), pos (1,) in, the next tokens out; attention over all maxT slots
    def step_full(self, tok, pos):
        p = self.p
        x = (F.embedding(tok, p["wte"]) + F.embedding(pos, p["wpe"])).unsqueeze(1)
        bias = self.ninf.masked_fill(self.ar <= pos, 0.0).view(1, 1, 1, MAXT)
        for l, w in enumerate(self.layers):
            q, k, v = attn_in(x, w[0], w[1], w[2], w[3], self.NH)
            self.kc[l].index_copy_(2, pos, k)
            self.vc[l].index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, self.kc[l], self.vc[l], attn_mask=bias)
            x = attn_out_mlp(x, y, *w[4:])
        return head_argmax(x[:, 0], p["lnfw"], p["lnfb"], p["wte"], V)

    # the prefill: self.idx (B, T) at positions 0..T-1 into the caches; returns the argmax after the last one
    def prefill(self):
        fin, fout, fhead = self.pre_fns
        p, T = self.p, self.idx.shape[1]
        x = F.embedding(self.idx, p["wte"]) + p["wpe"][:T]
        for l, w in enumerate(self.layers):
            q, k, v = fin(x, w[0], w[1], w[2], w[3], self.NH)
            self.kc[l][:, :, :T].copy_(k)
            self.vc[l][:, :, :T].copy_(v)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = fout(x, y, *w[4:])
        return fhead(x[:, -1], p["lnfw"], p["lnfb"], p["wte"], V)

    def capture(self, fn, before=None):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):          # compiles (compile+graph), cuBLAS handles and heuristics
                if before:
                    before()
                fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            fn()
        torch.cuda.synchronize()
        return g

    @staticmethod
    def bucket(pos):
        return min(MAXT, (pos // BUCKET + 1) * BUCKET)

    def setup(self, prompt, first_pos, steps):
        """Static buffers (and, in the graph modes, the CUDA graphs) for a prefill of prompt (T,) and decode steps at
        positions first_pos .. first_pos+steps-1."""
        T = prompt.numel()
        self.idx = prompt.to(self.device).view(1, T).expand(self.B, T).contiguous()
        if self.device.type == "cuda" and self.prefill_mode != "eager" and T > 0:
            self.prefill_graph = self.capture(self.prefill)
        if self.mode in ("graph", "compile+graph"):
            for Lb in sorted({self.bucket(q) for q in range(first_pos, first_pos + steps)}):
                if Lb not in self.graphs:
                    self.graphs[Lb] = self.capture(lambda Lb=Lb: self.step(Lb),
                                                   before=lambda Lb=Lb: self.pos.fill_(Lb - BUCKET))

    def run_prefill(self):
        if self.idx.shape[1] == 0:
            return None
        if self.prefill_graph is not None:
            self.prefill_graph.replay()
            return None
        return self.prefill()

    def run_decode(self, first_pos, steps):
        if self.mode == "reduce-overhead":
            tok, pos = self.tok.clone(), self.pos.clone()
            for i in range(steps):
                torch.compiler.cudagraph_mark_step_begin()
                nxt = self.ro_step(tok, pos)
                self.out[:, first_pos + i] = nxt
                tok = nxt.clone()
                pos = pos + 1
            return
        for q in range(first_pos, first_pos + steps):
            Lb = self.bucket(q)
            if Lb in self.graphs:
                self.graphs[Lb].replay()
            else:
                self.step(Lb)

    def reset(self, last_token, first_pos):
        self.tok.fill_(last_token)
        self.pos.fill_(first_pos)

    def full_argmax(self, seq):
        """No cache, eager: the greedy next token after seq (1-D), for checking the cached path."""
        p = self.p
        T = seq.numel()
        x = F.embedding(seq.to(self.device).view(1, T), p["wte"]) + p["wpe"][:T]
        for w in self.layers:
            q, k, v = attn_in(x, w[0], w[1], w[2], w[3], self.NH)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = attn_out_mlp(x, y, *w[4:])
        return int(head_argmax(x[:, -1], p["lnfw"], p["lnfb"], p["wte"], V)[0])

    def release(self):
        self.graphs.clear()
        self.prefill_graph = None
        self.pool = None


# ---------------------------------------------------------------- the loop for a Llama-shaped model

def rms_norm(x, w):
    """transformers' LlamaRMSNorm: in fp32, cast back to x's type before the weight"""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + LLAMA_EPS)
    return w * h.to(x.dtype)


def rope(x, cos, sin):
    """transformers' apply_rotary_pos_emb on x (..., T, HS): the halves of each head paired (rotate_half)"""
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin


def llama_in(x, cos, sin, lnw, qkvw, NH: int, NKV: int):
    """RMSNorm + q, k, v of x (B, T, C) with RoPE at the positions of cos, sin (T, HS): q (B, NH, T, HS), k and v
    (B, NKV, T, HS)"""
    B, T, C = x.shape
    HS = C // NH
    q, k, v = F.linear(rms_norm(x, lnw), qkvw).split([NH * HS, NKV * HS, NKV * HS], -1)
    q = rope(q.view(B, T, NH, HS).transpose(1, 2), cos, sin)
    k = rope(k.view(B, T, NKV, HS).transpose(1, 2), cos, sin)
    return q, k, v.view(B, T, NKV, HS).transpose(1, 2)


def llama_out(x, y, projw, ln2w, guw, downw):
    """x + o_proj(y), then + down(silu(gate) * up) of its RMSNorm: y (B, T, C) the attention output, guw gate_proj's
    rows then up_proj's"""
    x = x + F.linear(y, projw)
    g, u = F.linear(rms_norm(x, ln2w), guw).chunk(2, -1)
    return x + F.linear(F.silu(g) * u, downw)


def llama_head(x, lnfw, lmw):
    """the final RMSNorm + the untied head (V rows) + greedy argmax, of x (B, C)"""
    return F.linear(rms_norm(x, lnfw), lmw).argmax(-1)


class LlamaLoop(TorchLoop):
    """TorchLoop for a Llama-shaped model (LLAMA): p holds transformers' names (llama_tensors). The caches hold the
    NKV key/value heads: kc[l], vc[l] of (B, NKV, maxT, HS)."""

    EAGER = (llama_in, llama_out, llama_head)

    def __init__(self, p, model, B, mode, prefill_mode, device, dtype):
        L, NH, C = SIZES[model]
        s = LLAMA[model]
        self.L, self.NH, self.NKV, self.C, self.HS, self.B = L, NH, s["NKV"], C, C // NH, B
        self.G = NH // self.NKV
        self.mode, self.prefill_mode, self.device = mode, prefill_mode, device
        self.wte, self.lnfw, self.lmw = p["model.embed_tokens.weight"], p["model.norm.weight"], p["lm_head.weight"]
        self.layers = []
        for l in range(L):
            w = lambda n: p[f"model.layers.{l}.{n}.weight"]
            self.layers.append((w("input_layernorm"),
                                torch.cat([w("self_attn.q_proj"), w("self_attn.k_proj"), w("self_attn.v_proj")]),
                                w("self_attn.o_proj"), w("post_attention_layernorm"),
                                torch.cat([w("mlp.gate_proj"), w("mlp.up_proj")]), w("mlp.down_proj")))
        # RoPE's cos and sin of every position, as transformers makes them (fp32, then the model's type)
        inv = 1.0 / (s["theta"] ** (torch.arange(0, self.HS, 2, dtype=torch.int64).float() / self.HS))
        ang = torch.outer(torch.arange(MAXT, dtype=torch.int64).float(), inv)
        ang = torch.cat((ang, ang), -1)
        self.cos = ang.cos().to(device=device, dtype=dtype)
        self.sin = ang.sin().to(device=device, dtype=dtype)
        self.init_state(self.NKV, dtype)
        self.init_modes([self.wte, self.lnfw, self.lmw, self.cos, self.sin] + [w for ws in self.layers for w in ws])

    def decode_layers(self, fin, fout, x, pos, Lb, bias):
        """x (B, 1, C) at position pos through every layer, attending over cache slots [0, Lb) with bias; the query
        heads of one key/value head are the rows of its SDPA (q as (B, NKV, G, HS)), which reads the cache once"""
        B, cos, sin = self.B, self.cos.index_select(0, pos), self.sin.index_select(0, pos)
        for l, w in enumerate(self.layers):
            q, k, v = fin(x, cos, sin, w[0], w[1], self.NH, self.NKV)
            self.kc[l].index_copy_(2, pos, k)
            self.vc[l].index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q.reshape(B, self.NKV, self.G, self.HS), self.kc[l][:, :, :Lb],
                                               self.vc[l][:, :, :Lb], attn_mask=bias)
            x = fout(x, y.reshape(B, 1, self.C), *w[2:])
        return x

    def step(self, Lb):
        fin, fout, fhead = self.dec_fns
        pos = self.pos
        x = F.embedding(self.tok, self.wte).unsqueeze(1)
        bias = self.ninf[:Lb].masked_fill(self.ar[:Lb] <= pos, 0.0).view(1, 1, 1, Lb)
        x = self.decode_layers(fin, fout, x, pos, Lb, bias)
        nxt = fhead(x[:, 0], self.lnfw, self.lmw)
        self.out.index_copy_(1, pos, nxt.unsqueeze(1))
        self.tok.copy_(nxt)
        pos.add_(1)

    def step_full(self, tok, pos):
        x = F.embedding(tok, self.wte).unsqueeze(1)
        bias = self.ninf.masked_fill(self.ar <= pos, 0.0).view(1, 1, 1, MAXT)
        x = self.decode_layers(llama_in, llama_out, x, pos, MAXT, bias)
        return llama_head(x[:, 0], self.lnfw, self.lmw)

    def forward_seq(self, fns, ids, caches):
        """ids (B, T) at positions 0..T-1, causal, k and v repeated over the groups as transformers' repeat_kv (and
        written into the caches when caches); the argmax after the last position"""
        fin, fout, fhead = fns
        B, T = ids.shape
        x = F.embedding(ids, self.wte)
        for l, w in enumerate(self.layers):
            q, k, v = fin(x, self.cos[:T], self.sin[:T], w[0], w[1], self.NH, self.NKV)
            if caches:
                self.kc[l][:, :, :T].copy_(k)
                self.vc[l][:, :, :T].copy_(v)
            y = F.scaled_dot_product_attention(q, k.repeat_interleave(self.G, 1), v.repeat_interleave(self.G, 1),
                                               is_causal=True)
            x = fout(x, y.transpose(1, 2).reshape(B, T, self.C), *w[2:])
        return fhead(x[:, -1], self.lnfw, self.lmw)

    def prefill(self):
        return self.forward_seq(self.pre_fns, self.idx, True)

    def full_argmax(self, seq):
        T = seq.numel()
        return int(self.forward_seq(self.EAGER, seq.to(self.device).view(1, T), False)[0])


def make_loop(p, model, B, mode, prefill_mode, device, dtype):
    return (LlamaLoop if model in LLAMA else TorchLoop)(p, model, B, mode, prefill_mode, device, dtype)


def torch_generate(loop, prompt, N, runs, warmup_tokens, check):
    """Times prefill (n-1 tokens) and N decode steps; returns the result dict (and the tokens of row 0)."""
    n = prompt.numel()
    first = n - 1
    if first + N > MAXT:
        raise ValueError(f"prompt {n} + {N} new tokens do not fit maxT {MAXT}")
    loop.setup(prompt[:first], first, N)
    dev = loop.device

    def one(steps):
        loop.reset(int(prompt[-1]), first)
        sync(dev)
        t0 = time.perf_counter()
        loop.run_prefill()
        sync(dev)
        t1 = time.perf_counter()
        loop.run_decode(first, steps)
        sync(dev)
        t2 = time.perf_counter()
        return 1e3 * (t1 - t0), 1e3 * (t2 - t1)

    t0 = time.perf_counter()
    one(min(N, warmup_tokens))
    warm_s = time.perf_counter() - t0
    times = [one(N) for _ in range(runs)]
    pre = median([t[0] for t in times])
    dec = median([t[1] for t in times])
    gen = loop.out[:, first:first + N].cpu()
    r = {"prefill_tokens": first, "prefill_ms": round(pre, 3), "decode_ms": round(dec, 3),
         "tok_per_s": round(loop.B * N / (dec / 1e3), 1), "ms_per_step": round(dec / N, 4),
         "decode_ms_runs": [round(t[1], 3) for t in times], "setup_and_warmup_s": round(warm_s, 2),
         "rows_agree": bool((gen == gen[0:1]).all())}
    if check > 0:
        seq = prompt.clone()
        ok = 0
        for i in range(min(check, N)):
            ok += int(loop.full_argmax(seq) == int(gen[0, i]))
            seq = torch.cat([seq, gen[0, i:i + 1]])
        r["check"] = f"{ok}/{min(check, N)} of the first tokens equal to a no-cache eager forward's argmax"
    return r, gen[0, :16].tolist()


def parse_modes(s, device):
    if device.type != "cuda":
        return ["eager"]
    modes = ["graph", "compile+graph"] if s == "best" else [m.strip() for m in s.split(",") if m.strip()]
    for m in modes:
        if m not in ("eager", "graph", "compile+graph", "reduce-overhead"):
            sys.exit(f"sample_peers: unknown mode {m!r} (eager, graph, compile+graph, reduce-overhead, best)")
    return modes


def free_cuda():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def cmd_torch_loop(a):
    device, dtype = setup_torch(a)
    p = load_params(a.checkpoint, a.model, device, dtype)
    prompt = prompt_ids(a.prompt_tokens)
    modes = parse_modes(a.mode, device)
    prefill_mode = "graph" if device.type == "cuda" else "eager"
    failed = False
    for B in a.batch:
        res, first_tokens = {}, {}
        for mode in modes:
            def gen(loop):
                return torch_generate(loop, prompt, a.tokens, a.runs, a.warmup_tokens, a.check)
            res[mode], first_tokens[mode] = with_loop(lambda: make_loop(p, a.model, B, mode, prefill_mode, device, dtype),
                                                      gen, (None, None))
            print(f"# torch-loop {a.model} B={B} mode {mode}: {json.dumps(res[mode])}", file=sys.stderr, flush=True)
        out = {"model": a.model, "rows": B, "prompt_tokens": a.prompt_tokens, "tokens": a.tokens,
               "dtype": a.dtype, "runs": a.runs}
        best = take_best(out, res, modes, device, "torch-loop")
        if best:
            good = [m for m in modes if "tok_per_s" in res[m]]
            out["prefill_mode"] = prefill_mode
            out["first_tokens"] = first_tokens[best]
            out["modes_agree"] = all(first_tokens[m] == first_tokens[best] for m in good)
        failed |= best is None
        emit("torch-loop", out)
    return 1 if failed else 0


# ---------------------------------------------------------------- Hugging Face

def hf_llama_model(a, device, dtype):
    """LlamaForCausalLM of the model's shape (LLAMA), with the weights of --checkpoint (the folder) when given"""
    from transformers import LlamaConfig, LlamaForCausalLM
    import transformers
    L, NH, C = SIZES[a.model]
    s = LLAMA[a.model]
    kw = dict(vocab_size=V, hidden_size=C, intermediate_size=s["F"], num_hidden_layers=L, num_attention_heads=NH,
              num_key_value_heads=s["NKV"], head_dim=C // NH, max_position_embeddings=MAXT, hidden_act="silu",
              rms_norm_eps=LLAMA_EPS, rope_theta=s["theta"], attention_bias=False, mlp_bias=False,
              attention_dropout=0.0, tie_word_embeddings=False, bos_token_id=EOT, eos_token_id=EOT, pad_token_id=EOT)
    try:
        cfg = LlamaConfig(attn_implementation=a.hf_attn, **kw)
    except TypeError:
        cfg = LlamaConfig(**kw)
    theta = getattr(cfg, "rope_theta", None) or (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta")
    if theta != s["theta"]:       # transformers 4 keeps rope_theta, 5 rope_parameters
        sys.exit(f"sample_peers: LlamaConfig took RoPE theta {theta}, not {s['theta']} (transformers "
                 f"{transformers.__version__})")
    with torch.device(device):
        model = LlamaForCausalLM(cfg)
    model = model.to(dtype).eval()
    if model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr():
        sys.exit("sample_peers: LlamaForCausalLM tied lm_head to embed_tokens; the model's head is untied")
    if a.checkpoint:
        p = load_params(a.checkpoint, a.model, device, dtype)
        with torch.no_grad():
            r = model.load_state_dict(p, strict=False)
        missing = [k for k in r.missing_keys if "rotary_emb" not in k]     # older transformers' inv_freq buffers
        if missing or r.unexpected_keys:
            sys.exit(f"sample_peers: {a.checkpoint}: LlamaForCausalLM lacks {r.unexpected_keys[:4]} and has no "
                     f"weights for {missing[:4]}")
        del p
        free_cuda()
    info = {"transformers": transformers.__version__,
            "attn_implementation": getattr(model.config, "_attn_implementation", None)}
    return model, info


def hf_model(a, device, dtype):
    if a.model in LLAMA:
        return hf_llama_model(a, device, dtype)
    from transformers import GPT2Config, GPT2LMHeadModel
    import transformers
    L, NH, C = SIZES[a.model]
    kw = dict(vocab_size=V, n_positions=MAXT, n_embd=C, n_layer=L, n_head=NH, activation_function="gelu_new",
              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=EOT, eos_token_id=EOT,
              pad_token_id=EOT)
    try:
        cfg = GPT2Config(attn_implementation=a.hf_attn, **kw)
    except TypeError:
        cfg = GPT2Config(**kw)
    with torch.device(device):
        model = GPT2LMHeadModel(cfg)
    model = model.to(dtype).eval()
    if a.checkpoint:
        p = load_params(a.checkpoint, a.model, device, dtype)

        def put(dst, src):
            if dst.shape != src.shape:
                src = src.t()          # HF's Conv1D keeps (in, out); ours is (out, in)
            assert dst.shape == src.shape, (dst.shape, src.shape)
            dst.copy_(src)

        t = model.transformer
        with torch.no_grad():
            put(t.wte.weight, p["wte"][:V])
            put(t.wpe.weight, p["wpe"])
            for l, blk in enumerate(t.h):
                put(blk.ln_1.weight, p["ln1w"][l]); put(blk.ln_1.bias, p["ln1b"][l])
                put(blk.attn.c_attn.weight, p["qkvw"][l]); put(blk.attn.c_attn.bias, p["qkvb"][l])
                put(blk.attn.c_proj.weight, p["attprojw"][l]); put(blk.attn.c_proj.bias, p["attprojb"][l])
                put(blk.ln_2.weight, p["ln2w"][l]); put(blk.ln_2.bias, p["ln2b"][l])
                put(blk.mlp.c_fc.weight, p["fcw"][l]); put(blk.mlp.c_fc.bias, p["fcb"][l])
                put(blk.mlp.c_proj.weight, p["fcprojw"][l]); put(blk.mlp.c_proj.bias, p["fcprojb"][l])
            put(t.ln_f.weight, p["lnfw"]); put(t.ln_f.bias, p["lnfb"])
            if model.lm_head.weight.data_ptr() != t.wte.weight.data_ptr():
                put(model.lm_head.weight, p["wte"][:V])
        del p
        free_cuda()
    info = {"transformers": transformers.__version__,
            "attn_implementation": getattr(model.config, "_attn_implementation", None)}
    return model, info


def hf_keep_last(model):
    """The forward's argument that generate() passes in its prefill to compute only the last row's logits."""
    import inspect
    try:
        return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    except (TypeError, ValueError):
        return {}


def take_best(out, res, modes, device, what):
    """the fastest mode's numbers into out, with every mode's speed (or error) and the machine; the mode, or None"""
    good = [m for m in modes if "tok_per_s" in res[m]]
    best = max(good, key=lambda m: res[m]["tok_per_s"]) if good else None
    if best:
        out.update(res[best])
        out["mode"] = best
    else:
        out["error"] = f"{what}: every mode failed"
    out["modes"] = {m: (res[m]["tok_per_s"] if "tok_per_s" in res[m] else res[m]["error"]) for m in modes}
    out.update(env_info(device))
    return best


def with_loop(make, measure, on_error_rest):
    """measure(make()) with the loop released and the GPU's memory freed after it; an error becomes {"error": ...}
    (with on_error_rest after it in a tuple, for a measure that returns a tuple)"""
    loop = None
    try:
        loop = make()
        return measure(loop)
    except Exception as e:
        traceback.print_exc()
        err = {"error": f"{type(e).__name__}: {e}"[:400]}
        return err if on_error_rest is None else (err, *on_error_rest[1:])
    finally:
        if loop is not None:
            loop.release()
        del loop
        free_cuda()


def time_runs(fn, runs, warmups, device):
    for _ in range(warmups):
        fn()
    ts = []
    for _ in range(runs):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        ts.append(1e3 * (time.perf_counter() - t0))
    return ts


def cmd_hf(a):
    device, dtype = setup_torch(a)
    model, info = hf_model(a, device, dtype)
    n, N = a.prompt_tokens, a.tokens
    if n + N > MAXT:
        sys.exit(f"sample_peers: prompt {n} + {N} new tokens do not fit n_positions {MAXT}")
    prompt = prompt_ids(n)
    keep = hf_keep_last(model)
    failed = False
    for B in a.batch:
        out = {"model": a.model, "rows": B, "prompt_tokens": n, "tokens": N, "dtype": a.dtype, "runs": a.runs}
        try:
            ids = prompt.view(1, n).expand(B, n).contiguous().to(device)
            mask = torch.ones_like(ids)
            gen_kw = dict(attention_mask=mask, do_sample=False, use_cache=True, pad_token_id=EOT)
            result = {}

            def generate(k):
                result["ids"] = model.generate(ids, max_new_tokens=k, min_new_tokens=k, **gen_kw)

            def prefill():
                model(input_ids=ids, attention_mask=mask, use_cache=True, **keep)

            with torch.inference_mode():
                pre = time_runs(prefill, a.runs, 2, device)
                # the warm-up generation: of all N tokens by default. After one of 16, the first timed run still
                # grew the cache past what the warm-up had reached, and took 4.5x the others (350M, batch 1: 5.9 s
                # against 1.3 s on an H100), which a median of 2 runs carries into the result
                w = N if a.warmup_tokens < 0 else min(N, a.warmup_tokens)
                if w > 0:
                    generate(w)
                tot = time_runs(lambda: generate(N), a.runs, 0, device)
            got = result["ids"].shape[1] - n
            if got != N:
                raise RuntimeError(f"generate() made {got} new tokens, not {N}")
            total_ms, prefill_ms = median(tot), median(pre)
            decode_ms = total_ms - prefill_ms
            out.update({"generate_ms": round(total_ms, 3), "prefill_ms": round(prefill_ms, 3),
                        "decode_ms": round(decode_ms, 3), "tok_per_s": round(B * N / (decode_ms / 1e3), 1),
                        "tok_per_s_with_prefill": round(B * N / (total_ms / 1e3), 1),
                        "decode_ms_how": "median generate() time minus the median time of a separate prefill "
                                         f"forward model(prompt of {n}, use_cache=True{', logits_to_keep=1' if keep else ''}) "
                                         f"(which gives the first of the {N} tokens), {a.runs} runs each",
                        "generate_ms_runs": [round(t, 3) for t in tot],
                        "first_tokens": result["ids"][0, n:n + 16].tolist(),
                        "rows_agree": bool((result["ids"] == result["ids"][0:1]).all())})
        except Exception as e:
            traceback.print_exc()
            out["error"] = f"{type(e).__name__}: {e}"[:400]
            failed = True
        out.update(info)
        out.update(env_info(device))
        emit("hf-generate", out)
        free_cuda()
    return 1 if failed else 0


# ---------------------------------------------------------------- prefill

def cmd_prefill(a):
    device, dtype = setup_torch(a)
    T = a.tokens
    if T > MAXT:
        sys.exit(f"sample_peers: --tokens {T} is more than maxT {MAXT}")
    prompt = prompt_ids(T)
    failed = False
    if not a.no_hf:
        out = {"model": a.model, "rows": 1, "tokens": T, "dtype": a.dtype, "runs": a.runs}
        try:
            model, info = hf_model(a, device, dtype)
            ids = prompt.view(1, T).to(device)
            with torch.inference_mode():
                ts = time_runs(lambda: model(input_ids=ids, use_cache=True), a.runs, 2, device)
            ms = median(ts)
            out.update({"prefill_ms": round(ms, 3), "tok_per_s": round(T / (ms / 1e3), 1),
                        "how": "model(input_ids, use_cache=True): logits of every position",
                        "ms_runs": [round(t, 3) for t in ts]})
            out.update(info)
            del model
        except Exception as e:
            traceback.print_exc()
            out["error"] = f"{type(e).__name__}: {e}"[:400]
            failed = True
        free_cuda()
        out.update(env_info(device))
        emit("hf-prefill", out)
    if not a.no_torch:
        p = load_params(a.checkpoint, a.model, device, dtype)
        modes = [m for m in parse_modes(a.mode, device) if m != "reduce-overhead"] or ["graph"]
        res = {}
        for mode in modes:
            def prefill(loop):
                loop.setup(prompt, 0, 0)
                ts = time_runs(loop.run_prefill, a.runs, 2, device)
                ms = median(ts)
                return {"prefill_ms": round(ms, 3), "tok_per_s": round(T / (ms / 1e3), 1),
                        "ms_runs": [round(t, 3) for t in ts]}
            res[mode] = with_loop(lambda: make_loop(p, a.model, 1, "eager", mode, device, dtype), prefill, None)
        out = {"model": a.model, "rows": 1, "tokens": T, "dtype": a.dtype, "runs": a.runs,
               "how": "the loop's prefill: K/V of every position into the caches, logits of the last one"}
        failed |= take_best(out, res, modes, device, "torch-prefill") is None
        emit("torch-prefill", out)
    return 1 if failed else 0


# ---------------------------------------------------------------- bandwidth

def cmd_bandwidth(a):
    """The GPU's measured copy bandwidth, the denominator of the decode table's MBU: a device-to-device copy of
    --mib MiB (read once, written once), the median of --runs after a warm-up."""
    import torch
    n = a.mib << 20
    src = torch.empty(n, dtype=torch.uint8, device=a.device)
    dst = torch.empty_like(src)
    src.fill_(1)
    ts = []
    for i in range(a.runs + 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize()
        if i >= 2:
            ts.append(time.perf_counter() - t0)
    s = statistics.median(ts)
    emit("copy-bandwidth", {"mib": a.mib, "gb_per_s": round(2 * n / s / 1e9, 1), "device": torch.cuda.get_device_name()})
    return 0


# ---------------------------------------------------------------- command line

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    w = sub.add_parser("write-checkpoint", help="write an llm.c fp32 checkpoint of a randomly initialized GPT-2 (for "
                                                "llama-*: a LlamaForCausalLM folder)")
    w.add_argument("--model", default="124M", choices=SIZES)
    w.add_argument("--out", required=True, help="the checkpoint file (written atomically; for llama-*, a folder)")
    w.add_argument("--max-seq", type=int, default=MAXT, help="maxT (default %(default)s)")
    w.add_argument("--seed", type=int, default=1337)
    w.set_defaults(fn=cmd_write_checkpoint)

    wp = sub.add_parser("write-prompt", help="write a prompt text of N one-token words")
    wp.add_argument("--words", type=int, required=True)
    wp.add_argument("--out", required=True)
    wp.set_defaults(fn=cmd_write_prompt)

    def common(s, batch=True):
        s.add_argument("--model", default="124M", choices=SIZES)
        s.add_argument("--checkpoint", help="load these weights (an llm.c fp32 checkpoint of --model; for llama-*, "
                                            "the folder write-checkpoint wrote)")
        if batch:
            s.add_argument("--batch", type=int, nargs="+", default=[1], help="rows; several give a line each")
            s.add_argument("--prompt-tokens", type=int, default=128, help="prompt length in tokens (random ids)")
        s.add_argument("--tokens", type=int, default=256 if batch else 1024,
                       help="new tokens" if batch else "prefill tokens (batch 1)")
        s.add_argument("--runs", type=int, default=3, help="timed runs (median reported)")
        s.add_argument("--device", default="cuda", help="cuda (default), or cpu to check the script")
        s.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
        s.add_argument("--hf-attn", default="sdpa", help="transformers' attn_implementation (default sdpa)")

    h = sub.add_parser("hf", help="time GPT2LMHeadModel.generate")
    common(h)
    h.add_argument("--warmup-tokens", type=int, default=-1,
                   help="new tokens of the warm-up generation (default -1: all of --tokens; 0: none)")
    h.set_defaults(fn=cmd_hf)

    t = sub.add_parser("torch-loop", help="time the PyTorch static-cache decode loop")
    common(t)
    t.add_argument("--mode", default="best", help="eager, graph, compile+graph, reduce-overhead, a comma list, "
                                                  "or best (= graph,compile+graph); the fastest is reported")
    t.add_argument("--warmup-tokens", type=int, default=16, help="decode steps of the warm-up run")
    t.add_argument("--check", type=int, default=8, help="check this many first tokens against a no-cache forward")
    t.set_defaults(fn=cmd_torch_loop)

    pf = sub.add_parser("prefill", help="time the prefill forward of HF and of the PyTorch loop")
    common(pf, batch=False)
    pf.add_argument("--mode", default="best", help="the loop's prefill: eager, graph, compile+graph, a comma list, "
                                                   "or best (= graph,compile+graph)")
    pf.add_argument("--no-hf", action="store_true")
    pf.add_argument("--no-torch", action="store_true")
    pf.set_defaults(fn=cmd_prefill)

    bw = sub.add_parser("bandwidth", help="the GPU's device-to-device copy bandwidth (read + written bytes / s)")
    bw.add_argument("--mib", type=int, default=2048)
    bw.add_argument("--runs", type=int, default=5)
    bw.add_argument("--device", default="cuda")
    bw.set_defaults(fn=cmd_bandwidth)

    a = ap.parse_args()
    if getattr(a, "batch", None) and any(b < 1 for b in a.batch):
        ap.error("--batch must be at least 1")
    if a.cmd in ("hf", "torch-loop") and a.prompt_tokens < 2:
        ap.error("--prompt-tokens must be at least 2")
    sys.exit(a.fn(a) or 0)


if __name__ == "__main__":
    main()
