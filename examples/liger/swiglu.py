"""Liger-Kernel's SwiGLU forward (src/liger_kernel/ops/swiglu.py, swiglu_forward) as a kverify
impl on the GPU: c = RN_b(silu(a)) * b.

Its contract, read off the kernel: a cast to fp32; silu(a) = a * tl.sigmoid(a), Triton's
sigmoid 1 / (1 + exp(-a)) with exp as ex2.approx of a rounded product (2 ulp, via exp2) and the
reciprocal by div.full (2 ulp); the activation rounded to b's dtype (the rounding site
glu.act) before the product with b, which is rounded to c's dtype. FMA contraction allowed,
subnormals possibly flushed (Triton's defaults). No reductions. Rows over 65536 are declined
(calculate_settings raises for them)."""

from liger_kernel.ops.swiglu import swiglu_forward

import kverify

FLOATS = ["fp32", "bf16", "fp16"]
ACCEPTS = {"dtypes": {"a": FLOATS, "b": FLOATS, "c": FLOATS}}
MAX_ROW = 65536


def contract(case):
    n = int(case["shape"][-1])
    if n > MAX_ROW:
        raise kverify.Unsupported(f"a row of {n} > {MAX_ROW}: Liger's kernel keeps a row in one Triton block")
    c = {"acc": "fp32", "fma": True, "ftz": True,
         "math_ulps": {"exp": {"ulps": 2, "in": "fp32", "via": "exp2"}, "div": {"ulps": 2, "in": "fp32", "via": "rcp"}},
         "reductions": {}, "determinism": {}}
    if case["dtypes"]["b"] != "fp32":
        c["rounding_sites"] = {"glu.act": case["dtypes"]["b"]}
    return c


def liger_swiglu_fwd(t, case):
    _, _, c = swiglu_forward(t["a"], t["b"])
    return {"c": c}
