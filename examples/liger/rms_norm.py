"""Liger-Kernel's RMSNorm forward (src/liger_kernel/ops/rms_norm.py, rms_norm_forward) as a
kverify impl on the GPU: torch tensors in, Liger's Triton kernel, y and rstd out.

Its contract, read off the kernel: x (llama) or x and w (gemma) cast to fp32, the row's sum of
squares by tl.sum (its order is Triton's: declared as the worst case, one serial run over the
row), mean by fp32 '/' (div.full.f32, 2 ulp), rsqrt from libdevice (2 ulp), FMA contraction
allowed and subnormals possibly flushed (Triton's defaults); llama: (x * rstd) rounded to x's
dtype, then times (offset + w) in fp32, one rounding to y's dtype; gemma: one final rounding.
Mode none (arithmetic in x's dtype) is not declared here. Rows longer than 65536 are declined:
Liger's calculate_settings raises for them (the kernel keeps a row in one block)."""

from liger_kernel.ops.rms_norm import rms_norm_forward

import kverify

FLOATS = ["fp32", "bf16", "fp16"]
# x, w and y of one dtype (Liger allocates y like x); rstd fp32 in llama and gemma.
ACCEPTS = {"dtypes": {"x": FLOATS, "w": FLOATS, "y": FLOATS, "rstd": ["fp32"]}, "attrs": {"mode": ["llama", "gemma"]}}


MAX_ROW = 65536  # liger_kernel.ops.utils.calculate_settings: MAX_FUSED_SIZE


def contract(case):
    n = int(case["shape"][-1])
    if n > MAX_ROW:
        raise kverify.Unsupported(f"a row of {n} > {MAX_ROW}: Liger's kernel keeps a row in one Triton block")
    return {"acc": "fp32", "fma": True, "ftz": True,
            "math_ulps": {"rsqrt": 2, "div": {"ulps": 2, "in": "fp32"}},
            "reductions": {"row": {"serial": n, "depth": 0, "partials": 0}},
            "determinism": {}}


def liger_rms_norm_fwd(t, case):
    a = case["attr_values"]
    x = t["x"].reshape(-1, t["x"].shape[-1])
    y, _, rstd, *_ = rms_norm_forward(x, t["w"], float(a["eps"]), float(a["offset"]), case["attrs"]["mode"], None)
    return {"y": y, "rstd": rstd}
