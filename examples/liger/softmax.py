"""Liger-Kernel's softmax (src/liger_kernel/ops/softmax.py) forward and backward as kverify impls
on the GPU.

Read off the kernels: neither casts its input to fp32, and Triton's tl.sum adds floats in their
own dtype (triton/language/standard.py, _pick_sum_dtype widens integers only). The forward
loads x in its dtype, computes x - max in it, tl.exp of that (evaluated in fp32, given back in
x's dtype), sums the exponentials with tl.sum in x's dtype, and divides; the backward forms
dy * y in x's dtype, sums the products in x's dtype, and computes y * (dy - dot) in it. So the
honest contract of a bf16/fp16 Liger softmax names x's dtype as its accumulator (every
operation, the row sums' additions included); `contract_fp32` and `contract_bwd_fp32` are what
a softmax that accumulates in fp32 (PyTorch's) is held to, under which Liger's fails.
Rows over 65536 are declined: _softmax_forward's calculate_settings raises for them, so its
multi-block kernels are unreachable."""

from liger_kernel.ops.softmax import _softmax_backward, _softmax_forward
from liger_kernel.ops.utils import calculate_settings

from _liger import DIV, EXP2, FLOATS, row_fits, serial, triton

ACCEPTS = {"dtypes": {"x": FLOATS, "y": FLOATS}}
ACCEPTS_BWD = {"dtypes": {"dy": FLOATS, "y": FLOATS, "dx": FLOATS}}


def contract(case):
    return triton(case["dtypes"]["x"], {"exp": EXP2, "div": DIV}, {"row": serial(row_fits(case["shape"][-1]))})


def contract_fp32(case):
    """What a softmax that computes in fp32 (as PyTorch's does) is held to."""
    return triton("fp32", {"exp": EXP2, "div": DIV}, {"row": serial(row_fits(case["shape"][-1]))})


def contract_bwd(case):
    return triton(case["dtypes"]["dy"], {}, {"row": serial(row_fits(case["shape"][-1]))})


def contract_bwd_plain_fp32(case):
    """Every operation in fp32, dy * y included."""
    return triton("fp32", {}, {"row": serial(row_fits(case["shape"][-1]))})


def contract_bwd_fp32(case):
    """fp32 sums of dy * y rounded to dy's dtype (PyTorch's bf16 autograd of softmax)."""
    return triton("fp32", {}, {"row": serial(row_fits(case["shape"][-1]))}, {"softmax.bwd_dy_y": case["dtypes"]["dy"]})


def liger_softmax_fwd(t, case):
    y, *_ = _softmax_forward(t["x"])
    return {"y": y}


def liger_softmax_bwd(t, case):
    n = t["y"].shape[-1]
    block, warps = calculate_settings(n)
    return {"dx": _softmax_backward(t["dy"], t["y"], block, warps, False)}


IMPLS = [("liger_softmax_fwd", liger_softmax_fwd, "softmax.fwd", contract, ACCEPTS),
         ("liger_softmax_bwd", liger_softmax_bwd, "softmax.bwd", contract_bwd, ACCEPTS_BWD)]
