"""The failures kverify found in Liger, each confirmed by an fp64 emulation of what Liger's code
computes: the minimal case replayed through Liger with its inputs captured, the output
recomputed in float64 the way Liger's kernel does it and the way kverify's definition does it,
and how far Liger's output lies from each (relative error, and the count of elements that
differ). Writes OUT/findings.json.

    findings.py OUT      (on the GPU, in campaign.py's environment)"""

import json
import math
import sys

import numpy as np
import torch

import cross_entropy
import flce
import kverify
import softmax

LINES = {
    "ce_softcap": "kv1 op=cross_entropy.fwd impl=liger_cross_entropy_fwd config= shape=8x15 dtypes=logits:fp32,loss:fp32 "
                  "attrs=softcap:1,reduction:none,ignored_grad:zero,empty_mean:zero,ignore_index:-100 dist=normal seed=1",
    "flce_scale": "kv1 op=fused_linear_cross_entropy.bwd impl=liger_flce_bwd config= shape=64x32x100 "
                  "dtypes=x:bf16,weight:bf16,dloss:fp32 attrs=reduction:sum,ignored_grad:zero,empty_mean:zero "
                  "dist=normal seed=3",
    "softmax_bf16": "kv1 op=softmax.fwd impl=liger_softmax_fwd config= shape=16x4096 dtypes=x:bf16 dist=normal seed=1",
}


def capture(fn):
    seen = {}

    def wrapped(t, case):
        out = fn(t, case)
        seen.update(inputs={k: v.detach().clone() for k, v in t.items()}, outputs=out, case=case)
        return out
    return wrapped, seen


def replay(key, fn, contract, accepts):
    wrapped, seen = capture(fn)
    line = kverify.replay(wrapped, LINES[key], contract=contract, device="cuda", raise_on_failure=False, **accepts)
    return line, seen


def ce_softcap():
    """Liger's CE kernel loads masked lanes as -inf and softcaps them to -softcap, which then
    enter the softmax's sum: d gains (lanes past V in the last block) * exp(-softcap - max)."""
    line, seen = replay("ce_softcap", cross_entropy.liger_cross_entropy_fwd, cross_entropy.contract, cross_entropy.ACCEPTS)
    x = seen["inputs"]["logits"].double().cpu().numpy()
    t = seen["inputs"]["target"].long().cpu().numpy()
    s = float(seen["case"]["attr_values"]["softcap"])
    v = x.shape[-1]
    block = min(32768, 1 << (v - 1).bit_length())
    pad = math.ceil(v / block) * block - v
    z = s * np.tanh(x / s)
    m = z.max(1)
    rows = np.arange(len(t))

    def loss(extra):
        lse = m + np.log(np.exp(z - m[:, None]).sum(1) + extra * np.exp(-s - m))
        return np.where(t == -100, 0.0, lse - z[rows, np.clip(t, 0, None)])
    got = seen["outputs"]["loss"].double().cpu().numpy()
    as_liger, as_defined = loss(pad), loss(0)
    return {"case": LINES["ce_softcap"], "verdict": line.get("verdict"), "reason": line.get("reason", ""),
            "padded_lanes": pad, "max_rel_err_vs_liger_emulation": float(np.max(np.abs(got - as_liger) / np.abs(as_liger))),
            "max_rel_err_vs_definition": float(np.max(np.abs(got - as_defined) / np.abs(as_defined))),
            "code": "src/liger_kernel/ops/cross_entropy.py, liger_cross_entropy_kernel: tl.load(..., other=float('-inf')) "
                    "then X_block = softcap * tanh(X_block / softcap) before tl.sum(tl.exp2((X_block - m_new) * LOG2_E))"}


def _bf16(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64)).to(torch.bfloat16).double().numpy()


def flce_scale():
    """Under mean/sum, Liger's FLCE backward multiplies dx and dW by dloss after they were
    rounded to x's dtype (element_mul_kernel on the stored gradients): two roundings where
    kverify's definition scales the logits' gradient before the products."""
    line, seen = replay("flce_scale", flce.liger_flce_bwd, flce.contract_bwd, flce.ACCEPTS_BWD)
    t = {k: v.double().cpu().numpy() for k, v in seen["inputs"].items()}
    s = float(t["dloss"].reshape(-1)[0])
    tgt = t["target"].astype(np.int64)
    logits = _bf16(t["x"] @ t["weight"].T)  # flce.logits: x W^T rounded to bf16
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    keep = tgt != -100
    p[np.arange(len(tgt))[keep], tgt[keep]] -= 1.0
    g = _bf16(np.where(keep[:, None], p, 0.0))  # flce.grad: the CE kernel stores it in bf16
    prods = {"dx": g @ t["weight"], "dweight": g.T @ t["x"]}
    out = {}
    for name, prod in prods.items():
        got = seen["outputs"][name].double().cpu().numpy()
        twice, once = _bf16(_bf16(prod) * s), _bf16(prod * s)
        out[name] = {"elements": int(got.size), "liger_equals_RN(RN(P)*dloss)": int(np.sum(got == twice)),
                     "liger_equals_RN(P*dloss)": int(np.sum(got == once)),
                     "RN(RN(P)*dloss)_differs_from_RN(P*dloss)": int(np.sum(twice != once))}
    return {"case": LINES["flce_scale"], "dloss": s, "verdict": line.get("verdict"), "reason": line.get("reason", ""),
            "outputs": out,
            "code": "src/liger_kernel/ops/fused_linear_cross_entropy.py, fused_linear_cross_entropy_backward: "
                    "element_mul_kernel(grad_input / grad_weight, grad_output) on the bf16 results"}


def softmax_bf16():
    """Liger's softmax keeps bf16 x in bf16: x - max, exp's result and tl.sum's additions round
    to bf16. The size of the effect against torch.softmax (fp32 inside) on the same input."""
    line, seen = replay("softmax_bf16", softmax.liger_softmax_fwd, softmax.contract_fp32, softmax.ACCEPTS)
    x = seen["inputs"]["x"]
    exact = torch.softmax(x.double(), -1)
    ulp = torch.finfo(torch.bfloat16).eps

    def err(y):
        return float(((y.double() - exact).abs() / (exact.abs() * ulp)).max())
    return {"case": LINES["softmax_bf16"], "verdict_under_fp32_contract": line.get("verdict"),
            "reason": line.get("reason", ""), "max_err_bf16_ulps_liger": err(seen["outputs"]["y"]),
            "max_err_bf16_ulps_torch_softmax": err(torch.softmax(x, -1)),
            "code": "src/liger_kernel/ops/softmax.py, _softmax_single_block_forward_kernel: no cast to fp32; "
                    "tl.sum keeps the input dtype"}


def main(out):
    res = {}
    for name, f in (("ce_softcap", ce_softcap), ("flce_scale", flce_scale), ("softmax_bf16", softmax_bf16)):
        try:
            res[name] = f()
        except Exception as e:  # noqa: BLE001: one finding's error is recorded, the others run
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        print(name, json.dumps(res[name])[:1500], flush=True)
    with open(f"{out}/findings.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
