"""Liger's fused linear cross-entropy backward, emulated on the host case by case, to confirm each
failure of its dx that the campaign assigns to findings 1, 2 and 3 (or to 1 and 2 or 3 together).

What Liger computes (src/liger_kernel/ops/fused_linear_cross_entropy.py), in float64 with its
roundings to x's dtype (bf16/fp16; none in fp32):
- the logits x W^T (+ b), stored in x's dtype (softcap.flce_logits);
- the cross-entropy kernel's gradient G, under mean divided by the count of rows kept, with the
  softcap's padded lanes in the softmax's sum (finding 1), stored in x's dtype;
- under none, G times dloss cast to x's dtype, rounded (finding 3), then dx = G W rounded;
- under mean and sum, dx = G W rounded, then times dloss and rounded again (finding 2;
  element_mul_kernel, skipped where dloss is 1).
kverify's definition (reference/flce.hpp): G times dloss (over the weight sum under mean), rounded
to the site flce.grad where the contract declares it, then dx = G W. The emulated definition must
give the case's certified reference value at the worst element (a check of the emulation
itself); Liger's output must lie within the contract's half-width plus two ulps of the emulated
Liger value, and nearer it than the definition. Where the worst element shown is not finite (a
NaN or infinity the contract admits, shown for its infinite ratio), the emulation, judged under
the case's own contract, must fail in as many elements of dx, first at the same one.

    KVERIFY_LIB=<libkverify_c.so> PYTHONPATH=python:examples/liger \\
        python3 examples/liger/flce_bwd.py LINES.jsonl[.xz]... OUT.json[.xz]

confirms each FLCE backward failure whose dx fails (dW alone is not emulated: Liger sums it over
chunks in an order of its own), writes OUT and exits 1 if one is not confirmed. Needs no GPU."""

import sys

import numpy as np

import kverify
from smoothing import bad_args, lines, write
from classify import liger_pad
from softcap import _round, bound_of, candidates, flce_logits, host_inputs, missed, nearest, terms


def _inputs(t, case, pad):
    logits = flce_logits(t, case)["logits"]
    y = t["target"].astype(np.int64).reshape(-1)
    _, g, keep, wsum = terms(logits, y, None, case, pad)
    w = t["weight"].astype(np.float64).reshape(logits.shape[1], -1)
    return g, keep, wsum, w, t["dloss"].astype(np.float64).reshape(-1)


def dx_definition(t, case, sites):
    g, keep, wsum, w, dl = _inputs(t, case, 0)
    red = case["attrs"]["reduction"]
    G = g * (dl[:, None] if red == "none" else (dl[0] / wsum if red == "mean" and wsum else dl[0]))
    site = sites.get("flce.grad") or (case["dtypes"]["x"] if case["attrs"].get("grad_rounding") == "x_dtype" else None)
    if site and site != "fp32":
        G = _round(G, site)
    return G @ w


def dx_liger(t, case, pad):
    g, keep, wsum, w, dl = _inputs(t, case, pad)
    xd, red = case["dtypes"]["x"], case["attrs"]["reduction"]
    rnd = (lambda a: _round(a, xd)) if xd != "fp32" else (lambda a: a)
    n = int(keep.sum())
    G = rnd(g / n if red == "mean" and n else g)
    if red == "none":
        return rnd(rnd(G * rnd(dl)[:, None]) @ w)
    P = rnd(G @ w)
    return P if dl[0] == 1.0 else rnd(P * dl[0])


def confirm(j):
    o = j["outputs"]["dx"]
    b = bound_of(o)
    got = host_inputs(j["case"])
    if got is None:
        return {"case": j["case"], "confirmed": False, "why": "the case did not replay on the host"}
    t, case = got
    pad = liger_pad(int(case["shape"][-1])) if float(case["attr_values"]["softcap"]) > 0 else 0
    definition = dx_definition(t, case, (j.get("contract") or {}).get("rounding_sites", {})).reshape(-1)
    emulated = dx_liger(t, case, pad).reshape(-1)
    cand, tol_at = candidates(b, definition, case["dtypes"]["x"])
    if cand.size == 0:
        return missed(j)
    if not np.isfinite(b["out"]):
        # The worst element shown is not finite: an admitted NaN or infinity (ratio inf), which
        # says nothing of the failing ones. Judge the emulation under the case's own contract:
        # it must fail in as many elements of dx, first at the same one.
        def emulation(t2, case2):
            hv = (int(case2["shape"][2]), int(case2["shape"][1]))
            return {"dx": dx_liger(t2, case2, pad).astype(np.float32), "dweight": np.zeros(hv, np.float32)}
        e = kverify.replay(emulation, j["case"], contract=j["contract"], device="host",
                           raise_on_failure=False)["outputs"]["dx"]
        same = (e["n_fail"], e["first_fail_index"]) == (o["n_fail"], o["first_fail_index"])
        return {"case": j["case"], "pad": pad, "liger_out": b["out"], "definition": b["v"], "overflow": True,
                "liger_n_fail": o["n_fail"], "emulated_n_fail": e["n_fail"],
                "liger_first_fail": o["first_fail_index"], "emulated_first_fail": e["first_fail_index"],
                "confirmed": bool(same)}
    return nearest(j, b, cand, emulated, tol_at, pad=pad)


def main(argv):
    err = bad_args("flce_bwd.py", argv)
    if err:
        print(err, file=sys.stderr)
        return 2
    todo = [j for j in lines(argv[:-1]) if j.get("verdict") == "fail" and j.get("op") == "fused_linear_cross_entropy.bwd"]
    with np.errstate(all="ignore"):
        res = [confirm(j) for j in todo if (j["outputs"].get("dx") or {}).get("n_fail")]
    bad = write(argv[-1], res)
    print(f"flce_bwd.py: {len(todo)} failures, {len(res)} with dx failing: {len(res) - len(bad)} within the "
          f"contract's tolerance of the emulation of Liger (and nearer it than the definition); of the other "
          f"{len(bad)}, {sum(1 for r in bad if r.get('nearer_the_emulation'))} nearer the emulation")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
