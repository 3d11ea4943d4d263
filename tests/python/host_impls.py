"""numpy host impls for the package's tests: rms_norm.fwd computed in float64 (inside an fp32
contract: each of its operations errs less than fp32's), and a planted bug that drops the
last element of every row from the sum of squares."""

import numpy as np

CLAIMS = ["run_to_run", "config_invariant", "gpu_invariant", "batch_invariant"]


def rms_contract(case):
    """fp32 accumulation in any order (serial over the whole row: the worst case), rsqrt
    within 1 fp32 ulp (float64 1/sqrt rounded once)."""
    n = int(case["shape"][-1])
    return {"acc": "fp32", "fma": False, "ftz": False, "math_ulps": {"rsqrt": 1},
            "reductions": {"row": {"serial": n, "depth": 0, "partials": 0}},
            "determinism": {"y": CLAIMS, "rstd": CLAIMS}}


def _rms(t, case, drop_last=False):
    x = t["x"].astype(np.float64)
    w = t["w"].astype(np.float64) + case["attr_values"]["offset"]
    eps = case["attr_values"]["eps"]
    sq = x * x
    if drop_last:
        sq = sq[..., :-1]
    rstd = 1.0 / np.sqrt(sq.sum(axis=-1, keepdims=True) / x.shape[-1] + eps)
    rstd32 = rstd.astype(np.float32).astype(np.float64)
    y = x * rstd32 * w if case["attrs"]["mode"] == "gemma" else (x * rstd32).astype(np.float32).astype(np.float64) * w
    return {"y": y.astype(np.float32), "rstd": rstd32.astype(np.float32).reshape(t["rstd"].shape if "rstd" in t else -1)}


def rms_norm(t, case):
    return _rms(t, case)


def rms_norm_drops_last(t, case):
    return _rms(t, case, drop_last=True)


def rms_norm_fp32_serial(t, case):
    """gemma mode in fp32 with the sum of squares added left to right (np.cumsum): a tree
    kverify's audit can measure, n - 1 roundings deep."""
    x = t["x"].astype(np.float32)
    w = t["w"].astype(np.float32) + np.float32(case["attr_values"]["offset"])
    s = np.cumsum(x * x, axis=-1, dtype=np.float32)[..., -1:]
    ms = s / np.float32(x.shape[-1]) + np.float32(case["attr_values"]["eps"])
    rstd = (1.0 / np.sqrt(ms.astype(np.float64))).astype(np.float32)
    return {"y": (x * rstd) * w, "rstd": rstd.reshape(-1)}
