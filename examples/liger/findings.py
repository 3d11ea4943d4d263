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
    "flce_none": "kv1 op=fused_linear_cross_entropy.bwd impl=liger_flce_bwd config= shape=64x32x100 "
                 "dtypes=x:bf16,weight:bf16,dloss:fp32 attrs=reduction:none,ignored_grad:zero,empty_mean:zero "
                 "dist=normal seed=3",
    "softmax_bwd": "kv1 op=softmax.bwd impl=liger_softmax_bwd config= shape=16x4096 dtypes=dy:bf16,y:bf16,dx:bf16 dist=normal seed=1",
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
    kept = t != -100

    def rel(ref):
        return float(np.max(np.abs(got[kept] - ref[kept]) / np.abs(ref[kept])))
    return {"case": LINES["ce_softcap"], "verdict": line.get("verdict"), "reason": line.get("reason", ""),
            "padded_lanes": pad, "rows": int(kept.sum()), "max_rel_err_vs_liger_emulation": rel(as_liger),
            "max_rel_err_vs_definition": rel(as_defined),
            "code": "src/liger_kernel/ops/cross_entropy.py, liger_cross_entropy_kernel: tl.load(..., other=float('-inf')) "
                    "then X_block = softcap * tanh(X_block / softcap) before tl.sum(tl.exp2((X_block - m_new) * LOG2_E))"}


def _bf16(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64)).to(torch.bfloat16).double().numpy()


def flce_scale(key="flce_scale"):
    """Under mean/sum, Liger's FLCE backward multiplies dx and dW by dloss after they were
    rounded to x's dtype (element_mul_kernel on the stored gradients): two roundings where
    kverify's definition scales the logits' gradient before the products. Under none
    (key flce_none) it scales the stored bf16 gradient by dloss cast to bf16 before them."""
    line, seen = replay(key, flce.liger_flce_bwd, flce.contract_bwd, flce.ACCEPTS_BWD)
    t = {k: v.double().cpu().numpy() for k, v in seen["inputs"].items()}
    none = key == "flce_none"
    s = t["dloss"].reshape(-1, 1) if none else float(t["dloss"].reshape(-1)[0])
    tgt = t["target"].astype(np.int64)
    logits = _bf16(t["x"] @ t["weight"].T)  # flce.logits: x W^T rounded to bf16
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    keep = tgt != -100
    p[np.arange(len(tgt))[keep], tgt[keep]] -= 1.0
    g = _bf16(np.where(keep[:, None], p, 0.0))  # flce.grad: the CE kernel stores it in bf16
    if none:  # G * dloss.to(bf16), rounded to bf16, then the products (compared with G * dloss once)
        gl, gd = _bf16(g * _bf16(s)), _bf16(g * s)
        out = {}
        for name, (pl, pd) in {"dx": (gl @ t["weight"], gd @ t["weight"])}.items():
            got = seen["outputs"][name].double().cpu().numpy()
            out[name] = {"elements": int(got.size), "liger_equals_RN(RN(RN(G)*RN(dloss))@W)": int(np.sum(got == _bf16(pl))),
                         "liger_equals_RN(RN(G*dloss)@W)": int(np.sum(got == _bf16(pd)))}
        return {"case": LINES[key], "verdict": line.get("verdict"), "reason": line.get("reason", ""), "outputs": out,
                "code": "fused_linear_cross_entropy_forward: grad_logits_chunk * token_grad_output[...]"
                        ".unsqueeze(-1).to(grad_logits_chunk.dtype)"}
    prods = {"dx": g @ t["weight"], "dweight": g.T @ t["x"]}
    out = {}
    for name, prod in prods.items():
        got = seen["outputs"][name].double().cpu().numpy()
        twice, once = _bf16(_bf16(prod) * s), _bf16(prod * s)
        out[name] = {"elements": int(got.size), "liger_equals_RN(RN(P)*dloss)": int(np.sum(got == twice)),
                     "liger_equals_RN(P*dloss)": int(np.sum(got == once)),
                     "RN(RN(P)*dloss)_differs_from_RN(P*dloss)": int(np.sum(twice != once))}
    return {"case": LINES[key], "dloss": s, "verdict": line.get("verdict"), "reason": line.get("reason", ""),
            "outputs": out,
            "code": "src/liger_kernel/ops/fused_linear_cross_entropy.py, fused_linear_cross_entropy_backward: "
                    "element_mul_kernel(grad_input / grad_weight, grad_output) on the bf16 results"}


def softmax_contracts():
    """Liger's softmax under each candidate contract, 40 generated cases per dtype: which of
    them its arithmetic meets (probe_triton.py says what Triton does with bf16)."""
    res = {}
    cands = {"fwd": [("acc=x dtype", softmax.contract), ("fp32", softmax.contract_fp32)],
             "bwd": [("acc=x dtype", softmax.contract_bwd), ("fp32 + site dy*y", softmax.contract_bwd_fp32),
                     ("fp32", softmax.contract_bwd_plain_fp32)]}
    for pass_, fn, acc in (("fwd", softmax.liger_softmax_fwd, softmax.ACCEPTS),
                           ("bwd", softmax.liger_softmax_bwd, softmax.ACCEPTS_BWD)):
        for name, c in cands[pass_]:
            for dt in ("bf16", "fp16"):
                a = {"dtypes": {k: [dt] for k in acc["dtypes"]}}
                r = kverify.check(fn, f"softmax.{pass_}", contract=c, impl=fn.__name__, cases=40, device="cuda",
                                  curated="none", raise_on_failure=False, **a)
                res[f"{pass_} {dt} under {name}"] = r.counts
    return res


def softmax_bwd_effect():
    """The size of the backward's bf16 arithmetic: the worst element's error in bf16 ulps of
    Liger's dx and of PyTorch's softmax backward (autograd of torch.softmax, fp32 inside)
    against float64, on one input (rows of 4096, y = softmax(x))."""
    line, seen = replay("softmax_bwd", softmax.liger_softmax_bwd, softmax.contract_bwd_fp32, softmax.ACCEPTS_BWD)
    dy, y = seen["inputs"]["dy"], seen["inputs"]["y"]
    exact = y.double() * (dy.double() - (dy.double() * y.double()).sum(-1, keepdim=True))
    torch_dx = torch._softmax_backward_data(dy, y, -1, y.dtype)
    scale = exact.abs().amax(-1, keepdim=True) * torch.finfo(torch.bfloat16).eps  # ulps of the row's largest

    def err(d):
        return float(((d.double() - exact).abs() / scale).max())
    return {"case": LINES["softmax_bwd"], "verdict_under_fp32_contract": line.get("verdict"),
            "reason": line.get("reason", ""), "max_err_liger_in_bf16_ulps_of_row_max": err(seen["outputs"]["dx"]),
            "max_err_torch_in_bf16_ulps_of_row_max": err(torch_dx),
            "code": "src/liger_kernel/ops/softmax.py, _softmax_single_block_backward_kernel: "
                    "dot = tl.sum(dy * y, axis=0) on bf16 operands; dx = y * (dy - dot)"}


def main(out, only=None):
    res = {}
    for name, f in (("ce_softcap", ce_softcap), ("flce_scale", flce_scale), ("flce_none", lambda: flce_scale("flce_none")),
                    ("softmax_contracts", softmax_contracts), ("softmax_bwd_effect", softmax_bwd_effect)):
        if only and name not in only:
            continue
        try:
            res[name] = f()
        except Exception as e:  # noqa: BLE001: one finding's error is recorded, the others run
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        print(name, json.dumps(res[name])[:1500], flush=True)
    with open(f"{out}/findings.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(",") if len(sys.argv) > 2 else None)
