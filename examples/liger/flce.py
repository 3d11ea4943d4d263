"""Liger-Kernel's fused linear cross-entropy (src/liger_kernel/ops/fused_linear_cross_entropy.py)
as kverify impls on the GPU, called as its autograd Function calls it: the forward with the
gradients, then fused_linear_cross_entropy_backward's product with dloss (reduction none: the
forward again with token_grad_output = dloss, as Liger defers it).

Read off the code: rows go in chunks of next_pow2(ceil(BT / ceil(V / H))); each chunk's logits
x @ W^T come from torch (cuBLAS; bf16/fp16 operands on tensor cores, fp32 without TF32), are
stored in x's dtype (site flce.logits), then the cross-entropy kernel (see cross_entropy.py)
writes the gradient over them in x's dtype (site flce.grad); dx = G @ W; dW accumulates
G^T x per chunk in W's dtype by default (accum_dtype=None: each chunk's product rounded to
bf16, then added to a bf16 accumulator: the upstream trap, declared as a bf16 accumulator on
the rows axis) or in fp32 (`accum_dtype=torch.float32`, the second impl). The product sums
are declared as kverify's own cuBLAS impl declares them (2K + 128 steps of 2^-24 for tensor
cores, K for fp32). Declined: a bias with bf16/fp16 x (Liger rounds x W^T to x's dtype and then
adds the bias, rounding again, where the site flce.logits rounds once), and class weights
(kverify's FLCE has none)."""

import math

import torch
from liger_kernel.ops.fused_linear_cross_entropy import (fused_linear_cross_entropy_backward,
                                                         fused_linear_cross_entropy_forward)

import kverify
from _liger import DIV, EXP2, FLOATS, one_dtype, serial, triton

ATTRS = {"ignored_grad": ["zero"], "empty_mean": ["zero"]}
ACCEPTS = {"dtypes": {"x": FLOATS, "weight": FLOATS, "bias": FLOATS, "loss": ["fp32"]}, "attrs": ATTRS}
ACCEPTS_BWD = {"dtypes": {"x": FLOATS, "weight": FLOATS, "bias": FLOATS, "dloss": ["fp32"], "dx": FLOATS,
                          "dweight": FLOATS, "dbias": FLOATS}, "attrs": dict(ATTRS, grad_rounding=["fp32"])}


def _geom(case):
    bt, h, v = (int(s) for s in case["shape"])
    chunk = 1 << max(0, (math.ceil(bt / math.ceil(v / h)) - 1).bit_length())
    return bt, h, v, chunk, math.ceil(bt / chunk)


def _products(n, tc):
    return {"serial": 2 * n, "depth": 128, "partials": 0} if tc else serial(n)


def _contract(case, bwd, fp32_acc):
    names = ["x", "weight", "bias", "dx", "dweight", "dbias"] if bwd else ["x", "weight", "bias"]
    x = one_dtype(case, names, "Liger's FLCE takes x, weight, bias and gives its gradients in one dtype")
    if case["attrs"]["bias"] == "true" and x != "fp32":
        raise kverify.Unsupported("a bias with bf16/fp16 x: Liger rounds x W^T to x's dtype, then adds the bias and "
                                  "rounds again (the site flce.logits rounds once)")
    bt, h, v, chunk, nch = _geom(case)
    tc = x != "fp32"
    m = {"exp": EXP2, "log": 2, "div": DIV}
    if float(case["attr_values"]["softcap"]) > 0:
        m["tanh"] = 2
    red = {"h": _products(h, tc), "row": serial(v), "v": _products(v, tc), "rows": serial(bt)}
    sites = {"flce.logits": x}
    if bwd:
        sites["flce.grad"] = x
        dw = _products(chunk, tc)
        if x == "fp32" or fp32_acc:
            red["rows"] = dict(dw, partials=nch)
        else:  # each chunk's product rounded to bf16, then added to the bf16 accumulator
            red["rows"] = {"serial": math.ceil((dw["serial"] + dw["depth"] + bt) / (1 << 16)), "depth": 0,
                           "partials": 2 * nch, "acc": x}
    return triton("fp32", m, red, sites)


def contract(case):
    return _contract(case, False, False)


def contract_bwd(case):
    return _contract(case, True, False)


def contract_bwd_fp32_acc(case):
    return _contract(case, True, True)


def _call(t, case, grad, accum_dtype=None, token_grad=None):
    a, v = case["attr_values"], case["attrs"]
    return fused_linear_cross_entropy_forward(
        _input=t["x"], weight=t["weight"], target=t["target"].long(), bias=t.get("bias"),
        ignore_index=int(v["ignore_index"]), lse_square_scale=float(a["z_loss"]),
        label_smoothing=float(a["label_smoothing"]), reduction=v["reduction"], softcap=float(a["softcap"]) or None,
        accum_dtype=accum_dtype, token_grad_output=token_grad, compute_gradients=grad, weight_requires_grad=grad)


def liger_flce_fwd(t, case):
    with torch.no_grad():
        return {"loss": _call(t, case, False)[0]}


def _bwd(t, case, accum_dtype):
    with torch.no_grad():
        if case["attrs"]["reduction"] == "none":
            _, _, _, _, dx, dw, db = _call(t, case, True, accum_dtype, t["dloss"])
        else:
            _, _, _, _, dx, dw, db = _call(t, case, True, accum_dtype)
            dx, dw, db = fused_linear_cross_entropy_backward(t["dloss"].reshape(()), dx, dw, db)
    out = {"dx": dx, "dweight": dw}
    if db is not None:
        out["dbias"] = db
    return out


def liger_flce_bwd(t, case):
    return _bwd(t, case, None)


def liger_flce_bwd_fp32_acc(t, case):
    return _bwd(t, case, torch.float32)


IMPLS = [("liger_flce_fwd", liger_flce_fwd, "fused_linear_cross_entropy.fwd", contract, ACCEPTS),
         ("liger_flce_bwd", liger_flce_bwd, "fused_linear_cross_entropy.bwd", contract_bwd, ACCEPTS_BWD),
         ("liger_flce_bwd_fp32_acc", liger_flce_bwd_fp32_acc, "fused_linear_cross_entropy.bwd", contract_bwd_fp32_acc,
          ACCEPTS_BWD)]
