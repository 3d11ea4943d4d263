# Which formula ATen's bf16 softmax backward computes (issue 20, rounding sites): torch's dx
# compared bit for bit with float64 emulations of candidate operation orders, rounded as a kernel
# would. Run on a GPU machine: python3 tools/probes/aten_softmax_bwd.py
import torch
torch.manual_seed(1)
def bf(t): return t.to(torch.bfloat16).to(torch.float64)
def f32(t): return t.to(torch.float32).to(torch.float64)
for n in (512, 2048, 8192):
    x = torch.randn(64, n, device="cuda")
    y = torch.softmax(x, -1).to(torch.bfloat16)
    dy = torch.randn(64, n, device="cuda").to(torch.bfloat16)
    dx = torch._softmax_backward_data(dy, y, -1, torch.bfloat16).to(torch.float64)
    Y, D = y.double(), dy.double()
    prod32 = f32(D * Y)                       # fp32 product (exact for bf16 x bf16)
    t_fp = f32(prod32.sum(-1, keepdim=True))  # sum order ignored: fp64 sum rounded to fp32
    t_bf = f32(bf(D * Y).sum(-1, keepdim=True))
    cands = {
        "y*(dy-t), fp32 products": bf(f32(Y * f32(D - t_fp))),
        "y*(dy-t), bf16 products in t": bf(f32(Y * f32(D - t_bf))),
        "dy*y - y*t (fp32)": bf(f32(prod32 - f32(Y * t_fp))),
        "bf16(dy*y) - y*t": bf(f32(bf(D * Y) - f32(Y * t_bf))),
        "bf16(dy*y) - bf16(y*t)": bf(bf(D * Y) - bf(Y * t_bf)),
        "fma(-y, t, dy*y)": bf(f32(prod32 - Y * t_fp)),
        "fma(-y, t, bf16(dy*y)), t of bf16": bf(f32(bf(D * Y) - Y * t_bf)),
        "fma(-y,t,dy*y), t of bf16": bf(f32(prod32 - Y * t_bf)),
    }
    for k, v in cands.items():
        print(n, f"{k:40s} mismatches {(v != dx).sum().item():7d} of {dx.numel()}")
