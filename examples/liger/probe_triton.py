"""What Triton does with bf16/fp16 arithmetic, measured on the GPU (the contracts in this folder
rest on it): whether tl.sum of bf16 adds in bf16, whether a bf16 product or difference is
rounded to bf16 before the next operation, and whether x - tl.max(x) is (tl.max widening to fp32).
tl.exp rejects bf16 at compile time ("Expected dtype ['fp32', 'fp64']").
Prints one JSON object. Usage: probe_triton.py"""

import json

import torch
import triton
import triton.language as tl


@triton.jit
def _sum(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.sum(x, axis=0).to(tl.float32))


@triton.jit
def _prod_then_f32(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a, b = tl.load(a_ptr + i), tl.load(b_ptr + i)
    p = a * b
    tl.store(out_ptr + i, p.to(tl.float32) + 0.0)


@triton.jit
def _max_minus(x_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    d = x - tl.max(x, axis=0)  # fp32 if tl.max widens: x - m is then exact here
    tl.store(out_ptr + i, d.to(tl.float32))


def main():
    r = {}
    for dt in (torch.bfloat16, torch.float16):
        n, step = 64, 2.0 ** -9 if dt == torch.bfloat16 else 2.0 ** -12
        x = torch.full((n,), step, dtype=dt, device="cuda")
        x[0] = 1.0  # 1 + 63 steps, exact in fp32; a step is a quarter of ulp(1) of the dtype, lost in it
        out = torch.zeros(1, device="cuda")
        _sum[(1,)](x, out, N=n)
        a = torch.tensor([1 + 2 ** -7] * 16, dtype=dt, device="cuda")  # (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14
        p = torch.zeros(16, device="cuda")
        _prod_then_f32[(1,)](a, a, p, N=16)
        xm = torch.tensor([2.0 ** -7 + 2.0 ** -14] * 15 + [4.0], dtype=torch.float32).to(dt).to("cuda")
        d = torch.zeros(16, device="cuda")
        _max_minus[(1,)](xm, d, N=16)
        exact_d = xm[0].double().item() - 4.0
        name = str(dt).split(".")[-1]
        r[name] = {"tl.sum of 1 + 63 steps": out.item(), "exact": 1 + 63 * step,
                   "sum adds in the input dtype": out.item() != 1 + 63 * step,
                   "a*a with a = 1 + 2^-7": p[0].item(), "exact product": (1 + 2 ** -7) ** 2,
                   "product rounded to the input dtype": p[0].item() != (1 + 2 ** -7) ** 2,
                   "x - tl.max(x)": d[0].item(), "exact difference": exact_d,
                   "x - max rounded to the input dtype": d[0].item() != exact_d}
    r["triton"] = triton.__version__
    print(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
