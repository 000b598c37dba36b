"""cuBLAS's f16 4096^3 matmul (PyTorch), timed with CUDA events, for the
wgmma prototype's comparison in the same run."""
import sys
import torch
n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
a = torch.randint(-2, 3, (n, n), device="cuda").half()
b = torch.randint(-2, 3, (n, n), device="cuda").half()
for _ in range(3):
    torch.matmul(a, b)
torch.cuda.synchronize()
for r in range(3):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        torch.matmul(a, b)
    e.record()
    torch.cuda.synchronize()
    ms = s.elapsed_time(e) / 20
    print(f"cuBLAS f16 {n}^3 round {r}: {ms:.4f} ms  {2 * n**3 / ms * 1e-9:.0f} TFLOP/s")
