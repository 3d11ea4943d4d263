"""Liger-Kernel's LayerNorm (src/liger_kernel/ops/layer_norm.py) forward and backward as kverify
impls on the GPU.

Contracts, read off the kernels (Triton's arithmetic: _liger.py):
- forward: x, w, b cast to fp32; mean = tl.sum(x) / N, var = tl.sum((x - mean)^2) / N (fp32 '/',
  2 ulp), rstd by libdevice rsqrt (2 ulp); y = (x - mean) * rstd * w + b, one rounding to x's
  dtype. Liger stores mean and rstd in x's dtype: kverify's stat_dtype=x_dtype.
- backward: mean and rstd as given (x's dtype); x_hat = (x - mean) * rstd, wdy = w * dy,
  c1 = tl.sum(x_hat * wdy) / N, c2 = tl.sum(wdy) / N, dx = (wdy - (x_hat * c1 + c2)) * rstd;
  dW and dB summed over each SM's rows serially, then torch sums the SM partials (fp32) and
  rounds to w's dtype.
Rows longer than 65536 are declined (calculate_settings raises)."""

from liger_kernel.ops.layer_norm import layer_norm_backward, layer_norm_forward

from _liger import DIV, FLOATS, one_dtype, row_fits, rows, rows_over_sms, serial, triton

ACCEPTS = {"dtypes": {"x": FLOATS, "w": FLOATS, "b": FLOATS, "y": FLOATS, "mean": FLOATS, "rstd": FLOATS},
           "attrs": {"stat_dtype": ["x_dtype"]}}
ACCEPTS_BWD = {"dtypes": {"dy": FLOATS, "x": FLOATS, "w": FLOATS, "mean": FLOATS, "rstd": FLOATS, "dx": FLOATS,
                          "dw": FLOATS, "db": FLOATS}, "attrs": {"stat_dtype": ["x_dtype"]}}


def _one_dtype(case, names):
    one_dtype(case, names, "Liger's LayerNorm takes x, w, b, dy of one dtype and gives its outputs in it")


def contract(case):
    n = row_fits(case["shape"][-1])
    _one_dtype(case, ["x", "w", "b", "y"])
    return triton("fp32", {"rsqrt": 2, "div": DIV}, {"row": serial(n)})


def contract_bwd(case):
    n = row_fits(case["shape"][-1])
    _one_dtype(case, ["x", "w", "dy", "dx", "dw", "db"])
    return triton("fp32", {"div": DIV}, {"row": serial(n), "rows": rows_over_sms(rows(case["shape"]))})


def liger_layer_norm_fwd(t, case):
    n = t["x"].shape[-1]
    y, _, mean, rstd, *_ = layer_norm_forward(t["x"].reshape(-1, n), t["w"], t["b"], float(case["attr_values"]["eps"]))
    return {"y": y, "mean": mean, "rstd": rstd}


def liger_layer_norm_bwd(t, case):
    n = t["x"].shape[-1]
    dx, dw, db = layer_norm_backward(t["dy"].reshape(-1, n), t["x"].reshape(-1, n), t["w"], t["w"],  # B: only its dtype is read
                                     t["mean"].reshape(-1), t["rstd"].reshape(-1))
    return {"dx": dx, "dw": dw, "db": db}


IMPLS = [("liger_layer_norm_fwd", liger_layer_norm_fwd, "layer_norm.fwd", contract, ACCEPTS),
         ("liger_layer_norm_bwd", liger_layer_norm_bwd, "layer_norm.bwd", contract_bwd, ACCEPTS_BWD)]
