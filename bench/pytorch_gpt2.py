"""The PyTorch side of bench/bench.sh: a nanoGPT-style GPT-2 trained on random tokens with torch.compile,
bf16 autocast, F.scaled_dot_product_attention (flash) and fused AdamW; or, for --model llama-124M or nanochat-d12,
a model of that config's architecture (configs/<model>.lua: RMSNorm, RoPE, SwiGLU or ReLU^2, grouped-query
attention through SDPA's enable_gqa, QK-norm, no biases, an untied head, a logit soft-cap). Prints one line:
    pytorch <model> B=<B> T=<T>: <ms> ms/step, <tok/s> tok/s, peak <GiB> GiB
Under torchrun (WORLD_SIZE > 1) it trains with DistributedDataParallel, B rows per GPU, and rank 0 prints the
global tok/s ("pytorch-ddp<N> ..."). Written for this project (same recipe as the llm.c / nanoGPT reference trainers)."""
import argparse, math, os, time
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SIZES = {"124M": (12, 12, 768), "350M": (24, 16, 1024), "774M": (36, 20, 1280), "1558M": (48, 25, 1600)}
# GPT-2's relatives, as configs/llama-124M.lua and configs/nanochat-d12.lua describe them
ARCHS = {
    "llama-124M": dict(L=12, NH=12, C=768, nkv=4, ffn=2048, rms=True, rope=True, mlp="swiglu", qk_norm=False,
                       bias=False, tied=False, softcap=0.0),
    "nanochat-d12": dict(L=12, NH=6, C=768, nkv=6, ffn=3072, rms=True, rope=True, mlp="relu2", qk_norm=True,
                         bias=False, tied=False, softcap=15.0),
}


def gpt2_arch(L, NH, C):
    return dict(L=L, NH=NH, C=C, nkv=NH, ffn=4 * C, rms=False, rope=False, mlp="gelu", qk_norm=False, bias=True,
                tied=True, softcap=0.0)


def norm(a, n):
    return nn.RMSNorm(n, eps=1e-5) if a["rms"] else nn.LayerNorm(n, eps=1e-5, bias=a["bias"])


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.NH, self.nkv, self.HS = a["NH"], a["nkv"], a["C"] // a["NH"]
        self.qkv = nn.Linear(a["C"], (self.NH + 2 * self.nkv) * self.HS, bias=a["bias"])
        self.proj = nn.Linear(a["C"], a["C"], bias=a["bias"])
        self.qn = nn.RMSNorm(self.HS, eps=1e-5) if a["qk_norm"] else None
        self.kn = nn.RMSNorm(self.HS, eps=1e-5) if a["qk_norm"] else None

    def forward(self, x, rope):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split([self.NH * self.HS, self.nkv * self.HS, self.nkv * self.HS], dim=2)
        q = q.view(B, T, self.NH, self.HS).transpose(1, 2)
        k = k.view(B, T, self.nkv, self.HS).transpose(1, 2)
        v = v.view(B, T, self.nkv, self.HS).transpose(1, 2)
        if self.qn is not None:
            q, k = self.qn(q), self.kn(k)
        if rope is not None:
            cos, sin = rope
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.nkv != self.NH)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        C, ffn = a["C"], a["ffn"]
        self.ln1, self.ln2 = norm(a, C), norm(a, C)
        self.attn = Attention(a)
        self.mlp = a["mlp"]
        self.fc, self.fcproj = nn.Linear(C, ffn, bias=a["bias"]), nn.Linear(ffn, C, bias=a["bias"])
        self.gate = nn.Linear(C, ffn, bias=a["bias"]) if self.mlp == "swiglu" else None

    def forward(self, x, rope):
        x = x + self.attn(self.ln1(x), rope)
        h = self.ln2(x)
        if self.mlp == "swiglu":
            h = F.silu(self.gate(h)) * self.fc(h)
        elif self.mlp == "relu2":
            h = F.relu(self.fc(h)).square()
        else:
            h = F.gelu(self.fc(h), approximate="tanh")
        return x + self.fcproj(h)


class GPT(nn.Module):
    def __init__(self, a, Vp=50304, maxT=1024):
        super().__init__()
        L, C = a["L"], a["C"]
        self.a = a
        self.wte = nn.Embedding(Vp, C)
        self.wpe = None if a["rope"] else nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(a) for _ in range(L))
        self.lnf = norm(a, C)
        self.head = nn.Linear(C, Vp, bias=False)
        if a["tied"]:
            self.head.weight = self.wte.weight
        HS = C // a["NH"]
        inv = 1.0 / (10000.0 ** (torch.arange(0, HS, 2, dtype=torch.float32) / HS))
        f = torch.outer(torch.arange(maxT, dtype=torch.float32), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if n.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx)
        rope = None
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(T, device=idx.device))
        else:
            rope = (self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype))
        for b in self.blocks:
            x = b(x, rope)
        logits = self.head(self.lnf(x))
        if self.a["softcap"] > 0:
            cap = self.a["softcap"]
            logits = cap * torch.tanh(logits / cap)
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="124M", choices=list(SIZES) + list(ARCHS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = GPT(ARCHS[a.model] if a.model in ARCHS else gpt2_arch(*SIZES[a.model])).cuda()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()]) if world > 1 else model
    step_model = ddp if a.no_compile else torch.compile(ddp)
    V = 50257
    times = []
    for s in range(a.steps):
        x = torch.randint(0, V, (a.batch, a.seq), device="cuda")
        y = torch.randint(0, V, (a.batch, a.seq), device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    timed = times[3:] if len(times) > 6 else times[1:]
    ms = 1e3 * sum(timed) / len(timed)
    tok = world * a.batch * a.seq / (ms / 1e3)
    peak = torch.cuda.max_memory_reserved() / 2**30
    name = f"pytorch-ddp{world}" if world > 1 else "pytorch"
    if rank == 0:
        print(f"{name} {a.model} B={a.batch} T={a.seq}: {ms:.1f} ms/step, {tok:.0f} tok/s, peak {peak:.1f} GiB, "
              f"final loss {loss.item():.4f}", flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
