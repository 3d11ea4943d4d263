"""Liger-Kernel's cross-entropy (src/liger_kernel/ops/cross_entropy.py) as kverify impls on the
GPU: the loss (cross_entropy_forward) and the logits' gradient (the forward with gradients,
which writes them over the logits, then cross_entropy_backward's product with dloss).

Read off the kernel (Triton's arithmetic: _liger.py): logits cast to fp32, softcap as
s * tanh(x / s) (libdevice tanh), an online max and sum over blocks of the row with
tl.exp2((x - m) * LOG2_E) (exp via exp2) and lse = m + tl.log(d); the gradient
p = exp2(...) / d (div.full) with label smoothing, z-loss, class weights and, under mean, the
division by the count or weight sum, stored in the logits' dtype (site ce.grad), then times
dloss; the per-row loss stored in the logits' dtype (site ce.row_loss) and summed by torch.
Ignored rows get loss 0 and gradient 0 whatever their logits (ignored_grad=zero); with every
row ignored, mean gives 0 (empty_mean=zero). The loss takes the logits' dtype, as Liger
returns it. Rows over 65536 logits are fine: the kernel loops over blocks of 32768."""

import torch
from liger_kernel.ops.cross_entropy import cross_entropy_backward, cross_entropy_forward

import kverify
from _liger import DIV, EXP2, FLOATS, one_dtype, rows, serial, triton

ATTRS = {"ignored_grad": ["zero"], "empty_mean": ["zero"]}
ACCEPTS = {"dtypes": {"logits": FLOATS, "weight": ["fp32"], "loss": FLOATS}, "attrs": ATTRS}
ACCEPTS_BWD = {"dtypes": {"logits": FLOATS, "weight": ["fp32"], "dloss": ["fp32"], "dlogits": FLOATS}, "attrs": ATTRS}


def _math(case):
    m = {"exp": EXP2, "log": 2, "div": DIV}
    if float(case["attr_values"]["softcap"]) > 0:
        m["tanh"] = 2
    return m


def _semantics(case):
    a = case["attrs"]
    if a.get("weights") == "class" and a["reduction"] == "mean" and float(case["attr_values"]["z_loss"]) > 0:
        raise kverify.Unsupported("class weights, z-loss and mean: Liger divides the z-loss by the count of rows "
                                  "not ignored, kverify's definition (the loss's whole row term) by their weight sum")


def contract(case):
    _semantics(case)
    x = one_dtype(case, ["logits", "loss"], "Liger returns the loss in the logits' dtype")
    red = {"row": serial(case["shape"][-1]), "rows": serial(rows(case["shape"]))}
    return triton("fp32", _math(case), red, {"ce.row_loss": x})


def contract_bwd(case):
    _semantics(case)
    x = one_dtype(case, ["logits", "dlogits"], "Liger writes the gradient over the logits: dlogits in the logits' dtype")
    red = {"row": serial(case["shape"][-1]), "rows": serial(rows(case["shape"]))}  # rows: the mean's weight sum
    return triton("fp32", _math(case), red, {"ce.grad": x})


def _run(t, case, grad):
    a, v = case["attr_values"], case["attrs"]
    logits = t["logits"].reshape(-1, t["logits"].shape[-1]).clone().requires_grad_(grad)
    softcap = float(a["softcap"]) or None
    loss, _, _, _, g = cross_entropy_forward(
        logits, t["target"].reshape(-1).long(), t.get("weight"), int(v["ignore_index"]), float(a["z_loss"]),
        float(a["label_smoothing"]), v["reduction"], softcap, False)
    return loss, g


def liger_cross_entropy_fwd(t, case):
    loss, _ = _run(t, case, False)
    return {"loss": loss.reshape(t["loss"].shape) if "loss" in t else loss}


def liger_cross_entropy_bwd(t, case):
    with torch.no_grad():
        _, g = _run(t, case, True)
        dloss = t["dloss"]
        if case["attrs"]["reduction"] != "none":
            dloss = dloss.reshape(())  # a scalar loss's gradient, as autograd hands it over
        return {"dlogits": cross_entropy_backward(g.detach(), dloss)}


IMPLS = [("liger_cross_entropy_fwd", liger_cross_entropy_fwd, "cross_entropy.fwd", contract, ACCEPTS),
         ("liger_cross_entropy_bwd", liger_cross_entropy_bwd, "cross_entropy.bwd", contract_bwd, ACCEPTS_BWD)]
