"""Liger-Kernel's SwiGLU and GeGLU (src/liger_kernel/ops/swiglu.py, geglu.py) forward and backward
as kverify impls on the GPU.

Contracts, read off the kernels (Triton's arithmetic: _liger.py):
- swiglu.fwd: a cast to fp32; silu(a) = a * tl.sigmoid(a) (1 / (1 + exp(-a)): exp via exp2, the
  reciprocal by div.full, 2 ulp each); silu rounded to b's dtype (site glu.act) before the
  product with b, rounded to c's dtype.
- swiglu.bwd: silu and sigmoid recomputed in fp32, db = dc * silu (fp32, no rounding of silu),
  da = dc * (silu * (1 - sig) + sig) * b in fp32 (an algebraically equal form of the
  definition's sig * (1 + a * (1 - sig))).
- geglu.fwd: gelu by the tanh approximation with libdevice tanh (2 ulp) and fp32 constants,
  rounded to b's dtype (glu.act), times b.
- geglu.bwd: gelu rounded to dc's dtype for db (glu.act); da = dc * b * (term1 + term2) where
  dc * b is a product of two values of dc's dtype, which Triton rounds to that dtype (site
  glu.dc_b).
Rows longer than 65536 are declined (calculate_settings raises)."""

from liger_kernel.ops.geglu import geglu_backward, geglu_forward
from liger_kernel.ops.swiglu import swiglu_backward, swiglu_forward

from _liger import DIV, EXP2, FLOATS, one_dtype, row_fits, triton

ACCEPTS = {"dtypes": {"a": FLOATS, "b": FLOATS, "c": FLOATS}}
ACCEPTS_BWD = {"dtypes": {"dc": FLOATS, "a": FLOATS, "b": FLOATS, "da": FLOATS, "db": FLOATS}}
SIGMOID = {"exp": EXP2, "div": dict(DIV, via="rcp")}


def _one_dtype(case):
    d = one_dtype(case, None, "Liger's GLU kernels take and give one dtype (outputs are written over the inputs)")
    row_fits(case["shape"][-1])
    return d


def swiglu_contract(case):
    return triton("fp32", SIGMOID, sites={"glu.act": _one_dtype(case)})


def swiglu_contract_bwd(case):
    _one_dtype(case)
    return triton("fp32", SIGMOID)


def geglu_contract(case):
    return triton("fp32", {"tanh": 2}, sites={"glu.act": _one_dtype(case)})


def geglu_contract_bwd(case):
    d = _one_dtype(case)
    return triton("fp32", {"tanh": 2}, sites={"glu.act": d, "glu.dc_b": d})


def _rows(t, name):
    return t[name].reshape(-1, t[name].shape[-1])


def liger_swiglu_fwd(t, case):
    _, _, c = swiglu_forward(t["a"], t["b"])
    return {"c": c}


def liger_swiglu_bwd(t, case):
    da, db = swiglu_backward(_rows(t, "a"), _rows(t, "b"), _rows(t, "dc"))
    return {"da": da, "db": db}


def liger_geglu_fwd(t, case):
    _, _, c = geglu_forward(t["a"], t["b"])
    return {"c": c}


def liger_geglu_bwd(t, case):
    da, db = geglu_backward(_rows(t, "a"), _rows(t, "b"), _rows(t, "dc"))
    return {"da": da, "db": db}


IMPLS = [("liger_swiglu_fwd", liger_swiglu_fwd, "swiglu.fwd", swiglu_contract, ACCEPTS),
         ("liger_swiglu_bwd", liger_swiglu_bwd, "swiglu.bwd", swiglu_contract_bwd, ACCEPTS_BWD),
         ("liger_geglu_fwd", liger_geglu_fwd, "geglu.fwd", geglu_contract, ACCEPTS),
         ("liger_geglu_bwd", liger_geglu_bwd, "geglu.bwd", geglu_contract_bwd, ACCEPTS_BWD)]
