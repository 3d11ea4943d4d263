"""The first GPU run of the Python package on a real client: Liger's RMSNorm forward under
its contract, and a planted bug (eps added outside the square root) that must fail.

    PYTHONPATH=python:examples/liger:<liger>/src KVERIFY_LIB=<release>/libkverify_c.so \\
        python3 examples/liger/smoke.py OUT_DIR [CASES]

Writes OUT_DIR/smoke.json (counts per check) and each campaign under OUT_DIR; exits 1 when
Liger's check fails or the planted bug passes."""

import json
import sys

import torch

import kverify
import glu
from rms_norm import ACCEPTS, contract, liger_rms_norm_fwd


def eps_outside(t, case):
    x = t["x"].reshape(-1, t["x"].shape[-1]).float()
    rstd = 1 / (x.pow(2).mean(-1, keepdim=True).sqrt() + case["attr_values"]["eps"])
    y = (x * rstd).to(t["x"].dtype).float() * (case["attr_values"]["offset"] + t["w"].float())
    return {"y": y.to(t["x"].dtype), "rstd": rstd.reshape(-1)}


def main():
    out, cases = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
    summary, code = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}, 0
    try:
        res = kverify.check(liger_rms_norm_fwd, op="rms_norm.fwd", contract=contract, cases=cases, device="cuda",
                            out=f"{out}/liger-rms_norm-fwd", **ACCEPTS)
        summary["liger_rms_norm_fwd"] = {"counts": res.counts}
    except kverify.CheckFailed as e:
        summary["liger_rms_norm_fwd"] = {"counts": e.results.counts, "message": str(e)}
        code = 1
    try:
        res = kverify.check(glu.liger_swiglu_fwd, op="swiglu.fwd", contract=glu.swiglu_contract, cases=cases,
                            device="cuda", out=f"{out}/liger-swiglu-fwd", **glu.ACCEPTS)
        summary["liger_swiglu_fwd"] = {"counts": res.counts}
    except kverify.CheckFailed as e:
        summary["liger_swiglu_fwd"] = {"counts": e.results.counts, "message": str(e)}
        code = 1
    try:
        res = kverify.check(eps_outside, op="rms_norm.fwd", contract=contract, cases=20, device="cuda",
                            out=f"{out}/planted-eps-outside", **ACCEPTS)
        summary["planted_eps_outside"] = {"counts": res.counts, "message": "PASSED: the planted bug was not caught"}
        code = 1
    except kverify.CheckFailed as e:
        summary["planted_eps_outside"] = {"counts": e.results.counts, "message": str(e)[:2000]}
    with open(f"{out}/smoke.json", "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    sys.exit(code)


if __name__ == "__main__":
    main()
