"""Liger-Kernel's softmax (src/liger_kernel/ops/softmax.py) forward and backward as kverify impls
on the GPU.

Read off the kernels, and measured (probe_triton.py, findings.py): the forward loads x in its
dtype, but tl.max gives fp32 for bf16/fp16 (Triton widens floats in min/max), so x - max, the
exponentials (tl.exp takes fp32 and fp64 only), their tl.sum and e / d are fp32: the forward's
contract is fp32. The backward never widens: dy * y rounds to x's dtype, Triton's tl.sum adds
bf16/fp16 in their own dtype (_pick_sum_dtype widens integers only), and dy - dot and
y * (dy - dot) are bf16/fp16 operations, so its honest contract names x's dtype as the
accumulator; under fp32 (with or without the rounded dy * y) it fails, as findings.py shows
against PyTorch's softmax backward (fp32 inside).
Rows over 65536 are declined: _softmax_forward's calculate_settings raises for them, so its
multi-block kernels are unreachable."""

from liger_kernel.ops.softmax import _softmax_backward, _softmax_forward
from liger_kernel.ops.utils import calculate_settings

from _liger import DIV, EXP2, FLOATS, row_fits, serial, triton

ACCEPTS = {"dtypes": {"x": FLOATS, "y": FLOATS}}
ACCEPTS_BWD = {"dtypes": {"dy": FLOATS, "y": FLOATS, "dx": FLOATS}}


def contract(case):
    """Every operation in x's dtype (a wider set than the forward needs; findings.py)."""
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


IMPLS = [("liger_softmax_fwd", liger_softmax_fwd, "softmax.fwd", contract_fp32, ACCEPTS),
         ("liger_softmax_bwd", liger_softmax_bwd, "softmax.bwd", contract_bwd, ACCEPTS_BWD)]
