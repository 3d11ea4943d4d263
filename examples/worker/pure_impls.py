"""Pure-Python host impls (device "host") for kverify's worker tests: rms_norm.fwd, softmax.fwd and
softmax.bwd (with a declared rounding site) in emulated fp32, in OPS.md's operation order, and
deliberately wrong rms_norm.fwd and softmax.bwd.

fp32 is emulated by computing each operation in double and rounding the result to fp32 (f32).
For +, -, *, / and sqrt of fp32 operands that is exactly fp32's RN result: double has
53 >= 2*24 + 2 bits, so rounding twice never differs from rounding once (Figueroa, "When is
double rounding innocuous?", 1995). Sums run serially left to right, one rounding per term."""

import math

from kv_worker import Array, Unsupported, f32, impl, round_to

ALL_CLAIMS = ["run_to_run", "config_invariant", "gpu_invariant", "batch_invariant"]  # serial Python code


def rsqrt32(t):
    """1/sqrt(t) for an fp32 t, within 1 fp32 ulp: math.sqrt is correctly rounded and 1/s is one
    more double rounding, so d = RN53(1/RN53(sqrt t)) has relative error below 2^-52 (about
    2^-28 fp32 ulp); f32(d) adds at most half an ulp: |f32(d) - t^-1/2| < 0.5 + 2^-28 ulp < 1."""
    if t == 0:
        return math.copysign(math.inf, t)  # IEEE: sqrt(-0) = -0, 1/-0 = -inf
    if t != t or t < 0:
        return math.nan
    if t == math.inf:
        return 0.0
    return f32(1.0 / math.sqrt(t))


def exp32(a):
    """exp of an fp32 a, within 1 fp32 ulp: libm's double exp errs by under 1 double ulp (2^-52
    relative, about 2^-28 fp32 ulp), and f32 adds at most half an ulp."""
    try:
        return f32(math.exp(a))
    except OverflowError:
        return math.inf


def _div(a, b):
    """IEEE a / b (Python raises on a zero divisor instead)."""
    if b == 0:
        if a != a or a == 0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _rows(case):
    shape = case["shape"]
    n = int(shape[-1])
    rows_shape = list(shape[:-1]) or [1]
    return n, rows_shape


# ---- rms_norm.fwd ---------------------------------------------------------------------------


def rms_contract(case):
    """Serial fp32 sum along the row, rsqrt within 1 ulp (rsqrt32), no FMA, subnormals kept."""
    mode = case["attrs"]["mode"]
    if mode not in ("llama", "gemma"):
        raise Unsupported(f"mode={mode}: this impl computes in fp32 (llama, gemma only)")
    off = case["attr_values"]["offset"]
    if f32(off) != off:
        # offset + w is then rounded once only if both are fp32 (see the module comment).
        raise Unsupported(f"offset {off!r} is not an fp32 value")
    n, _ = _rows(case)
    return {
        "acc": "fp32",
        "fma": False,
        "ftz": False,
        "math_ulps": {"rsqrt": 1},
        "reductions": {"row": {"serial": n, "depth": 0, "partials": 0}},
        "determinism": {"y": ALL_CLAIMS, "rstd": ALL_CLAIMS},
    }


def _rms_fwd(t, case, terms_dropped=0):
    """OPS.md rms_norm.fwd, reference/rms_norm.hpp's order: s = sum RN(x_j^2); ms = RN(s / N);
    rstd = rsqrt(RN(ms + RN(eps))); llama: y_j = RN(RN_x(RN(x_j rstd)) * W'_j); gemma:
    y_j = RN(RN(x_j rstd) * W'_j); W'_j = RN(offset + w_j). The final rounding to y's dtype is
    the worker's when it writes the file. terms_dropped > 0 leaves the row's last terms out of
    the sum (the wrong impl)."""
    rms_contract(case)  # the same checks as the contract request
    x, w = t["x"], t["w"]
    n, rows_shape = _rows(case)
    llama = case["attrs"]["mode"] == "llama"
    eps = f32(case["attr_values"]["eps"])
    off = case["attr_values"]["offset"]
    wp = [f32(off + wj) for wj in w.data]
    y, rstd = [], []
    for r in range(len(x.data) // n):
        row = x.data[r * n : (r + 1) * n]
        s = 0.0
        for v in row[: n - terms_dropped]:
            s = f32(s + f32(v * v))
        rs = rsqrt32(f32(f32(s / n) + eps))
        rstd.append(rs)
        for v, wj in zip(row, wp):
            xr = f32(v * rs)
            if llama:
                xr = round_to(x.dtype, xr)  # HF: (x * rstd).to(x.dtype), a mandated rounding
            y.append(f32(xr * wj))
    return {"y": Array(y, x.shape, case["dtypes"]["y"]), "rstd": Array(rstd, rows_shape, "fp32")}


@impl(op="rms_norm.fwd", device="host", contract=rms_contract, version="pure_impls 1")
def rms_norm_fwd(t, case):
    return _rms_fwd(t, case)


@impl(op="rms_norm.fwd", device="host", contract=rms_contract, version="pure_impls 1 (wrong on purpose)")
def rms_norm_fwd_bad(t, case):
    """Drops each row's last x_j^2 from the sum: kverify's tests must see it fail."""
    return _rms_fwd(t, case, terms_dropped=1)


# ---- softmax.fwd ----------------------------------------------------------------------------


def softmax_contract(case):
    n, _ = _rows(case)
    return {
        "acc": "fp32",
        "fma": False,
        "ftz": False,
        "math_ulps": {"exp": 1},
        "reductions": {"row": {"serial": n, "depth": 0, "partials": 0}},
        "determinism": {"y": ALL_CLAIMS},
    }


@impl(op="softmax.fwd", device="host", contract=softmax_contract, version="pure_impls 1")
def softmax_fwd(t, case):
    """reference/softmax.hpp's order: m = max x (exact; a < b ? b : a, as its policies do);
    e_j = exp(RN(x_j - m)); d = serial sum of e_j; y_j = RN(e_j / d). IEEE rules give NaN rows
    for rows holding NaN or +inf, or all -inf."""
    x = t["x"]
    n, _ = _rows(case)
    y = []
    for r in range(len(x.data) // n):
        row = x.data[r * n : (r + 1) * n]
        m = row[0]
        for v in row[1:]:
            m = v if m < v else m
        e = [exp32(f32(v - m)) for v in row]
        d = 0.0
        for ej in e:
            d = f32(d + ej)
        y.extend(f32(_div(ej, d)) for ej in e)
    return {"y": Array(y, x.shape, case["dtypes"]["y"])}


# ---- softmax.bwd, with a rounding site --------------------------------------------------------


def softmax_bwd_contract(case):
    """A serial fp32 row sum of dy_j * y_j, each product rounded to bf16 first: the rounding
    site softmax.bwd_dy_y, declared (as ATen's bf16 backward rounds it)."""
    n, _ = _rows(case)  # fp32 only: declared in accepts, so kverify never asks for another dtype
    return {
        "acc": "fp32",
        "fma": False,
        "ftz": False,
        "math_ulps": {},
        "reductions": {"row": {"serial": n, "depth": 0, "partials": 0}},
        "determinism": {"dx": ALL_CLAIMS},
        "rounding_sites": {"softmax.bwd_dy_y": "bf16"},
    }


def _softmax_bwd(t, case, rounded):
    dy, y = t["dy"], t["y"]
    n, _ = _rows(case)
    dx = []
    for r in range(len(y.data) // n):
        s = 0.0
        for j in range(r * n, (r + 1) * n):
            p = dy.data[j] * y.data[j]  # exact in double: two fp32 significands are 48 bits
            s = f32(s + (round_to("bf16", p) if rounded else f32(p)))
        for j in range(r * n, (r + 1) * n):
            dx.append(f32(y.data[j] * f32(dy.data[j] - s)))
    return {"dx": Array(dx, y.shape, "fp32")}


@impl(op="softmax.bwd", device="host", contract=softmax_bwd_contract, version="pure_impls 1",
      accepts={"dtypes": ["fp32"], "layouts": ["contiguous"]})
def softmax_bwd(t, case):
    return _softmax_bwd(t, case, True)


@impl(op="softmax.bwd", device="host", contract=softmax_bwd_contract, version="pure_impls 1 (wrong on purpose)",
      accepts={"dtypes": ["fp32"], "layouts": ["contiguous"]})
def softmax_bwd_unrounded(t, case):
    """Declares the site and does not round there: kverify's tests must see it fail."""
    return _softmax_bwd(t, case, False)
