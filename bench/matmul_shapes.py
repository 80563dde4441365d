"""bench/matmul_shapes.py: what cuBLAS (through PyTorch, bf16) reaches at the training step's matmul shapes, and what
the GELU epilogue costs there: the ceiling an own GEMM with the GELU fused must beat (docs/kernels-and-tuning.md).
Run on the GPU machine: python3 bench/matmul_shapes.py [--model 124M|350M] [--batch B]. Times are CUDA events over
50 runs after 10 warm-up runs; TFLOP/s count 2*m*n*k."""
import argparse
import torch
import torch.nn.functional as F


def timed(fn, reps=50):
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="124M", choices=["124M", "350M"])
    ap.add_argument("--batch", type=int, default=0)
    a = ap.parse_args()
    C = 768 if a.model == "124M" else 1024
    B = a.batch or (64 if a.model == "124M" else 32)
    M = B * 1024
    dev, dt = "cuda", torch.bfloat16
    torch.manual_seed(0)
    x = torch.randn(M, C, device=dev, dtype=dt)
    h = torch.randn(M, 4 * C, device=dev, dtype=dt)
    w_fc = torch.randn(4 * C, C, device=dev, dtype=dt) * 0.02
    b_fc = torch.zeros(4 * C, device=dev, dtype=dt)
    w_qkv = torch.randn(3 * C, C, device=dev, dtype=dt) * 0.02
    w_proj = torch.randn(C, 4 * C, device=dev, dtype=dt) * 0.02
    dy = torch.randn(M, C, device=dev, dtype=dt)
    rows = [
        ("fc: x @ W^T + b (m=B*T, n=4C, k=C)", lambda: F.linear(x, w_fc, b_fc), M, 4 * C, C),
        ("fc + GELU epilogue (cuBLASLt, addmm_activation)", lambda: torch._addmm_activation(b_fc, x, w_fc.t(), use_gelu=True), M, 4 * C, C),
        ("fc, then GELU as a separate kernel", lambda: F.gelu(F.linear(x, w_fc, b_fc), approximate="tanh"), M, 4 * C, C),
        ("qkv: x @ W^T (n=3C, k=C)", lambda: F.linear(x, w_qkv), M, 3 * C, C),
        ("fcproj: h @ W^T (n=C, k=4C)", lambda: F.linear(h, w_proj), M, C, 4 * C),
        ("fcproj dinp: dy @ W (n=4C, k=C, B N-major)", lambda: dy @ w_proj, M, 4 * C, C),
        ("fcproj dW: dy^T @ h (m=C, n=4C, k=B*T)", lambda: dy.t() @ h, C, 4 * C, M),
    ]
    print(f"gpt2-{a.model} shapes, B*T = {M}, C = {C}, bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for name, fn, m, n, k in rows:
        ms = timed(fn)
        print(f"{name:55s} {ms:7.3f} ms  {2 * m * n * k / ms / 1e9:6.0f} TFLOP/s")


if __name__ == "__main__":
    main()
