"""Liger-Kernel's softmax (src/liger_kernel/ops/softmax.py) forward and backward as kverify impls
on the GPU.

Read off the kernels: neither casts its input to fp32. The forward loads x in its dtype, takes
the row's max, computes x - max in x's dtype (a rounding to bf16/fp16), tl.exp of that (Triton
computes it in fp32 through ex2.approx and gives it back in x's dtype), tl.sum in fp32, and
e / d; rows over 65536 go through an online (multi-block) loop. The backward forms dy * y in
x's dtype and sums it in fp32 with tl.sum (the site softmax.bwd_dy_y). So the honest forward contract for a
bf16/fp16 softmax names x's dtype as its accumulator (every operation at least that precise);
`contract_fp32` is what a softmax computing in fp32 (as PyTorch's does) is held to.
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
