"""What every Liger impl here shares: Triton's arithmetic as a contract, Liger's launch limits,
and the device's SM count (Liger's norm backward passes split their dW over one program per SM).

Triton's defaults, read off its lowering for sm_90: fp32 arithmetic, multiply-adds contracted
to FMA, subnormals possibly flushed, fp32 '/' as div.full.f32 (2 ulp), libdevice's rsqrt and
tanh (2 ulp), tl.exp as ex2.approx of a rounded product (2 ulp, exp2), tl.log as lg2.approx
times ln 2 (declared 2 ulp). tl.sum's order is Triton's choice: declared as the worst case,
one serial run over the axis."""

import math

import kverify

FLOATS = ["fp32", "bf16", "fp16"]
MAX_FUSED_SIZE = 65536  # liger_kernel.ops.utils.calculate_settings raises beyond it


def row_fits(n, what="a row"):
    """Liger keeps a row in one Triton block (calculate_settings): longer rows are declined."""
    n = int(n)
    if 1 << max(0, (n - 1).bit_length()) > MAX_FUSED_SIZE:
        raise kverify.Unsupported(f"{what} of {n} > {MAX_FUSED_SIZE}: Liger's kernel keeps it in one Triton block "
                                  "(calculate_settings raises)")
    return n


def one_dtype(case, names, why):
    """The one dtype of the tensors `names` the case has (None: all of its tensors); a case
    where they differ is declined with `why` (Liger allocates them alike, or writes one over
    another)."""
    d = case["dtypes"]
    got = {d[n] for n in (d if names is None else names) if n in d}
    if len(got) != 1:
        raise kverify.Unsupported(why)
    return got.pop()


def triton(acc="fp32", math_ulps=None, reductions=None, sites=None, determinism=None, **extra):
    c = {"acc": acc, "fma": True, "ftz": True, "math_ulps": dict(math_ulps or {}),
         "reductions": dict(reductions or {}), "determinism": dict(determinism or {})}
    if sites:
        c["rounding_sites"] = {k: v for k, v in sites.items() if v and v != "fp32"}
        if not c["rounding_sites"]:
            del c["rounding_sites"]
    c.update(extra)
    return c


def serial(n, partials=0):
    """Any order over n terms (Triton's tl.sum), optionally then `partials` serially summed."""
    return {"serial": int(n), "depth": 0, "partials": int(partials)}


DIV = {"ulps": 2, "in": "fp32"}  # fp32 '/': div.full.f32
RCP = {"ulps": 2, "in": "fp32", "via": "rcp"}  # x * (1 / n) with the reciprocal by div.full
EXP2 = {"ulps": 2, "in": "fp32", "via": "exp2"}  # tl.exp / tl.exp2(x * LOG2_E)

_sm = []


def sm_count():
    if not _sm:
        import torch
        _sm.append(torch.cuda.get_device_properties(0).multi_processor_count)
    return _sm[0]


def rows_over_sms(rows, extra=0):
    """A dW over rows as Liger's norm backward passes sum it: one program per SM adds its
    ceil(rows / SMs) rows serially (plus `extra` from an inner tl.sum), then torch sums the
    SM partials."""
    sms = sm_count()
    return serial(math.ceil(int(rows) / sms) + extra, partials=sms)


def rows(shape):
    return math.prod(int(s) for s in shape[:-1])
