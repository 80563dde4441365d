"""The PyTorch side of bench/bench.sh: a nanoGPT-style GPT-2 trained on random tokens with torch.compile,
bf16 autocast, F.scaled_dot_product_attention (flash) and fused AdamW. Prints one line:
    pytorch <model> B=<B> T=<T>: <ms> ms/step, <tok/s> tok/s, peak <GiB> GiB
Under torchrun (WORLD_SIZE > 1) it trains with DistributedDataParallel, B rows per GPU, and rank 0 prints the
global tok/s ("pytorch-ddp<N> ..."). Written for this project (same recipe as the llm.c / nanoGPT reference trainers)."""
import argparse, math, os, time
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SIZES = {"124M": (12, 12, 768), "350M": (24, 16, 1024), "774M": (36, 20, 1280), "1558M": (48, 25, 1600)}


class Attention(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = Attention(C, NH)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, NH, C, Vp=50304, maxT=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        self.head = nn.Linear(C, Vp, bias=False)
        self.head.weight = self.wte.weight          # tied
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if n.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="124M", choices=SIZES)
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
    L, NH, C = SIZES[a.model]
    model = GPT(L, NH, C).cuda()
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
