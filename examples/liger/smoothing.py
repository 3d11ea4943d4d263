"""Liger's label-smoothed cross-entropy loss, emulated on the host, to confirm the campaign's
failures of cross_entropy.fwd under label smoothing (finding ce_smoothing_cancellation).

Liger's kernel (src/liger_kernel/ops/cross_entropy.py) sums `-eps * X` over the row in fp32
(eps = label_smoothing / V, scaled_x_sum) and adds `label_smoothing * lse` at the end
(smooth_loss): two terms of the size of the logits that cancel down to the size of the loss.
kverify's definition sums lse - x_v (each small) instead. With logits far from 0 (the fuzzer's
big_mean: 256 + 0.125 z) Liger's loss loses several ulps of the logits' size.

The emulation runs every fp32 operation of that path as Liger's code orders it, with tl.sum as a
pairwise tree over the block of next_pow2(V) lanes (masked lanes 0), and lse taken as the exact
log-sum-exp rounded once to fp32. Run on the inputs kverify regenerates on the host for the
failing case, it must give Liger's own output bit for bit at the case's worst element.

    KVERIFY_LIB=<libkverify_c.so> PYTHONPATH=python:examples/liger \\
        python3 examples/liger/smoothing.py LINES.jsonl[.xz]... OUT.json

reads the campaign's result lines (compact.py's lines.jsonl.xz or results.jsonl), confirms each
failing cross_entropy.fwd case with label smoothing, writes OUT.json and exits 1 if one is not
confirmed. Needs no GPU and no Liger."""

import json
import lzma
import math
import os
import sys

import numpy as np

import kverify
from _liger import DIV, EXP2, rows, serial, triton

f32 = np.float32


def contract(case):
    """cross_entropy.contract (cross_entropy.py) for fp32 logits, without importing Liger."""
    return triton("fp32", {"exp": EXP2, "log": 2, "div": DIV},
                  {"row": serial(case["shape"][-1]), "rows": serial(rows(case["shape"]))})


def tree_sum(vals, lanes):
    a = list(vals) + [f32(0)] * (lanes - len(vals))
    while len(a) > 1:
        h = len(a) // 2
        a = [f32(a[i] + a[i + h]) for i in range(h)]
    return a[0]


def row_loss(x, y, ls):
    """(Liger's fp32 loss, the exact loss) of one row x (float64 copy of fp32 logits)."""
    n = x.shape[-1]
    m = x.max()
    lse_exact = m + math.log(np.exp(x - m).sum())
    exact = (1 - ls) * (lse_exact - x[y]) + ls * (lse_exact - x.mean())
    lse, eps, lsf = f32(lse_exact), f32(f32(ls) / f32(n)), f32(ls)
    s = tree_sum([f32(-eps * v) for v in x.astype(np.float32)], 1 << (n - 1).bit_length())  # scaled_x_sum
    loss = f32(lse - f32(x[y]))
    return f32(f32(loss * f32(1 - lsf)) + f32(s + f32(lsf * lse))), exact


def emulate(t, case):
    a, attrs = case["attr_values"], case["attrs"]
    if attrs.get("weights") != "none" or float(a["softcap"]) or float(a["z_loss"]) or attrs["reduction"] != "none":
        raise kverify.Unsupported("the emulation covers reduction none without weights, softcap or z-loss")
    x, y = t["logits"].astype(np.float64), t["target"].astype(np.int64).reshape(-1)
    x = x.reshape(-1, x.shape[-1])
    out, exact = np.zeros(x.shape[0], np.float32), np.zeros(x.shape[0])
    for r in range(x.shape[0]):
        if y[r] != int(attrs["ignore_index"]):
            out[r], exact[r] = row_loss(x[r], int(y[r]), float(a["label_smoothing"]))
    emulate.out, emulate.exact = out, exact
    return {"loss": out.reshape([int(s) for s in case["shape"][:-1]])}


def confirm(j):
    """What the emulation says of one failing result line: Liger's worst element reproduced?"""
    o = j["outputs"]["loss"]
    b = o["bound"]
    try:
        line = kverify.replay(emulate, j["case"], contract=contract, device="host", raise_on_failure=False)
    except kverify.Unsupported as e:
        return {"case": j["case"], "confirmed": False, "why": str(e)}
    if "outputs" not in line:
        return {"case": j["case"], "confirmed": False, "why": line.get("reason", "")[:300]}
    k = int(np.argmin(np.abs(emulate.exact - b["v"])))  # the worst element: its exact value is the bound's v
    emu = float(emulate.out[k])
    return {"case": j["case"], "liger_out": b["out"], "emulated_out": emu, "exact": b["v"],
            "half_width": b["contract_half_width"], "error_over_half_width": abs(b["out"] - b["v"]) / b["contract_half_width"],
            "liger_n_fail": o["n_fail"], "emulated_n_fail": line["outputs"]["loss"]["n_fail"], "confirmed": emu == b["out"]}


def lines(paths):
    for p in paths:
        with (lzma.open(p, "rt") if p.endswith(".xz") else open(p)) as f:
            for s in f:
                if s.strip():
                    yield json.loads(s)


def bad_args(prog, argv):
    """The one-line complaint about a confirmation script's arguments (LINES... OUT.json), if any."""
    if len(argv) < 2:
        return f"usage: {prog} LINES.jsonl[.xz]... OUT.json"
    missing = [p for p in argv[:-1] if not os.path.isfile(p)]
    return f"{prog}: no such file: {missing[0]}" if missing else None


def write(path, res):
    """A confirmation script's results (JSON; xz-compressed where path ends in .xz); those not
    confirmed."""
    with (lzma.open(path, "wt") if path.endswith(".xz") else open(path, "w")) as f:
        json.dump(res, f)
    return [r for r in res if not r["confirmed"]]


def main(argv):
    err = bad_args("smoothing.py", argv)
    if err:
        print(err, file=sys.stderr)
        return 2
    res = [confirm(j) for j in lines(argv[:-1]) if j.get("verdict") == "fail" and j.get("op") == "cross_entropy.fwd"
           and float.fromhex(j["attrs"].get("label_smoothing", "0x0p+0")) > 0
           and float.fromhex(j["attrs"].get("softcap", "0x0p+0")) == 0]
    bad = write(argv[-1], res)
    print(f"smoothing.py: {len(res) - len(bad)} of {len(res)} failures reproduced bit for bit by the emulation")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
