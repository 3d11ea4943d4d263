"""Liger-Kernel's RMSNorm (src/liger_kernel/ops/rms_norm.py) forward and backward as kverify
impls on the GPU: torch tensors in, Liger's Triton kernels, kverify's outputs back.

Contracts, read off the kernels (Triton's arithmetic: _liger.py):
- forward: llama and gemma cast x (gemma also w) to fp32; the row's sum of squares by tl.sum,
  the mean by fp32 '/' (2 ulp), libdevice rsqrt (2 ulp); llama rounds x * rstd to x's dtype,
  then times (offset + w) in fp32, one rounding to y's dtype; gemma one final rounding.
  Mode none keeps x in its dtype: x * x rounds to it, eps and offset are cast to it, offset + w
  rounds to it, while the sum and rsqrt run in fp32: every operation is at least as precise
  as x's dtype, so the contract's accumulator is x's dtype (a bound over all of them).
- backward: w' = w + offset in fp32, m = dy * w' in fp32 (m_rounding fp32), dx by
  rstd * m + rstd * (-(1/N) * rstd * rstd * sum(m * x) * x) with 1/N by div.full; llama's
  dW term dy * RN_x(x * rstd) is a product of two x-dtype values and rounds to x's dtype
  (the site rms_norm.dw_product); dW is summed over each SM's rows (BLOCK_ROW = 16 rows at a
  time by tl.sum in the block kernel Liger picks for >= 32768 rows of <= 256), then torch sums
  the SM partials in fp32 and rounds to w's dtype.
Rows longer than 65536 are declined (calculate_settings raises)."""

from liger_kernel.ops.rms_norm import _str_to_casting_mode, rms_norm_backward, rms_norm_forward
from liger_kernel.ops.utils import calculate_settings

from _liger import FLOATS, RCP, one_dtype, row_fits, rows, rows_over_sms, serial, triton

MODES = ["llama", "gemma", "none"]
ACCEPTS = {"dtypes": {"x": FLOATS, "w": FLOATS, "y": FLOATS, "rstd": FLOATS}, "attrs": {"mode": MODES}}
ACCEPTS_BWD = {"dtypes": {"dy": FLOATS, "x": FLOATS, "w": FLOATS, "rstd": FLOATS, "dx": FLOATS, "dw": FLOATS},
               "attrs": {"mode": MODES, "m_rounding": ["fp32"]}}


def _same_dtype(case, names):
    one_dtype(case, names, f"Liger allocates {', '.join(names[1:])} like {names[0]}: one dtype for all of them")


def contract(case):
    n = row_fits(case["shape"][-1])
    _same_dtype(case, ["x", "w", "y"])
    mode = case["attrs"]["mode"]
    acc = case["dtypes"]["x"] if mode == "none" else "fp32"
    return triton(acc, {"rsqrt": 2, "div": {"ulps": 2, "in": "fp32"}}, {"row": serial(n)})


def contract_bwd(case):
    n = row_fits(case["shape"][-1])
    _same_dtype(case, ["x", "dy", "w", "dx", "dw"])
    mode, x = case["attrs"]["mode"], case["dtypes"]["x"]
    block = n <= 256 and rows(case["shape"]) >= 4096 * 8  # the block kernel sums 16 rows by tl.sum
    sites = {"rms_norm.dw_product": x} if mode == "llama" else {}
    return triton(x if mode == "none" else "fp32", {"div": RCP},
                  {"row": serial(n), "rows": rows_over_sms(rows(case["shape"]), 16 if block else 0)}, sites)


def _attrs(case):
    a = case["attr_values"]
    return float(a["eps"]), float(a["offset"]), case["attrs"]["mode"]


def liger_rms_norm_fwd(t, case):
    eps, offset, mode = _attrs(case)
    x = t["x"].reshape(-1, t["x"].shape[-1])
    y, _, rstd, *_ = rms_norm_forward(x, t["w"], eps, offset, mode, None)
    return {"y": y, "rstd": rstd}


def liger_rms_norm_bwd(t, case):
    _, offset, mode = _attrs(case)
    n = t["x"].shape[-1]
    block, warps = calculate_settings(n)
    x, dy = t["x"].reshape(-1, n), t["dy"].reshape(-1, n)
    dx, dw = rms_norm_backward(dy, x, t["w"], t["rstd"].reshape(-1), offset,
                               _str_to_casting_mode[mode], block, warps, False, None)
    return {"dx": dx, "dw": dw}


IMPLS = [("liger_rms_norm_fwd", liger_rms_norm_fwd, "rms_norm.fwd", contract, ACCEPTS),
         ("liger_rms_norm_bwd", liger_rms_norm_bwd, "rms_norm.bwd", contract_bwd, ACCEPTS_BWD)]
