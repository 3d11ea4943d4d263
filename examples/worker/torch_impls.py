"""PyTorch impls for kverify's worker (device cuda): rms_norm (HF LlamaRMSNorm), softmax and
cross_entropy, fwd and bwd, each as eager code and as the same Python function under torch.compile.

Contracts are per case. What they rest on:
- Math functions: CUDA C++ Programming Guide, appendix "Mathematical Functions", single-precision
  table (maximum ulp error, full range): expf 2, logf 1, rsqrtf 2. ATen's kernels call these
  (nvcc without fast-math); inductor's rsqrt is libdevice's __nv_rsqrtf; its exp, see below.
- Reductions: the order inside ATen's and Triton's reduction kernels is not documented and
  changes with shape and GPU, so every reduced axis declares the worst case, serial = the
  axis length, depth 0, partials 0 (PROTOCOL.md), which holds for any order (or run with
  `--contract audited`, which measures them).
- fma: true everywhere (nvcc contracts a*b + c inside a kernel by default, Triton too). kverify's
  enclosures contain the fused results anyway; the claim is just true.
- Divisions: declared per operation (math_ulps "div"), not as a contract-wide unit. Eager:
  ATen's mean is sum * RN(1/N), declared {"ulps": 0.5, "via": "rcp"}. Compiled: Triton's fp32
  '/' is div.full.f32, max 2 ulp (PTX ISA), not RN: {"ulps": 2}.
- Compiled (Triton) code differs from eager in two more documented ways: libdevice may be
  linked flushing subnormals, so ftz = true (the weaker claim); and older inductor lowers exp
  to ex2.approx.f32(RN(x * log2 e)), declared {"via": "exp2"} (see _exp_error).
- softmax.bwd: ATen's kernel and the decomposition inductor compiles both evaluate the
  distributed form dx = dy*y - y*sum(dy*y): forms {"softmax.bwd_dx": "distributed"}.
- Determinism: eager ATen kernels are deterministic for these ops (no atomics), so per-row
  outputs claim run_to_run; reductions over rows (dW, a mean/sum loss) claim nothing beyond
  config_invariant (no knobs), as asked of framework reductions; nothing is claimed
  gpu_invariant or batch_invariant: ATen picks block shapes and splits from the GPU's SM
  count and the tensor's shape. Compiled kernels are autotuned by timing, so their reduction
  order may change between processes: config_invariant only.

Seen on an H100 (torch 2.11, triton 3.6), judged by kverify with these contracts: see the
README's table (reports/contracts-*). What remains a real difference from kverify's
definitions: inductor drops rms_norm's mandated (x * rstd).to(bf16) rounding (and m's), so
compiled rms_norm fails in bf16; with TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 it passes."""

import torch
import torch._dynamo
import torch._inductor.config
import torch.nn.functional as F

from kv_worker import Unsupported, impl

_DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}
_VERSION = f"torch {torch.__version__}"

# A recompile past dynamo's cache limit silently falls back to eager code; every case has its
# own shapes, so raise the limits, and compile with fullgraph=True so a graph break raises.
for _k, _v in (("cache_size_limit", 4096), ("accumulated_cache_size_limit", 65536)):
    if hasattr(torch._dynamo.config, _k):
        setattr(torch._dynamo.config, _k, _v)


def _compile(fn):
    return torch.compile(fn, fullgraph=True)


def _compiled_version():
    try:
        import triton

        return f"{_VERSION} inductor, triton {triton.__version__}"
    except ImportError:
        return f"{_VERSION} inductor"


def _exp_error():
    """exp in compiled code. Inductor with config.use_fast_math (False by default) emits
    libdevice.exp, __nv_expf: 2 ulp. Inductors without that option emit tl.exp, which Triton
    lowers to ex2.approx.f32(RN(x * log2 e)): declared as computed via exp2 (kverify encloses
    the argument's rounding itself), with ex2.approx's 2 ulp (the guide's exp2f)."""
    use_fast_math = getattr(torch._inductor.config, "use_fast_math", None)
    return 2 if use_fast_math is False else {"ulps": 2, "in": "fp32", "via": "exp2"}


def _contract(compiled, math_ulps, axes, per_row, across_rows, divides=True):
    """axes: {axis: length}; per_row / across_rows: output names (determinism claims above);
    divides: the op's definition divides (kverify list --json: math_functions "div")."""
    c = {
        "acc": "fp32",
        "fma": True,
        "ftz": compiled,
        "math_ulps": dict(math_ulps),
        "reductions": {a: {"serial": max(1, int(n)), "depth": 0, "partials": 0} for a, n in axes.items()},
        "determinism": {},
    }
    if divides:
        # Compiled: Triton's fp32 '/' is div.full.f32, 2 ulp. Eager: ATen's mean is
        # sum * RN(1/N), a reciprocal within 0.5 ulp (a correctly rounded division is inside too).
        c["math_ulps"]["div"] = {"ulps": 2, "in": "fp32"} if compiled else {"ulps": 0.5, "in": "fp32", "via": "rcp"}
    if compiled and "exp" in c["math_ulps"]:
        c["math_ulps"]["exp"] = _exp_error()
    for o in per_row:
        c["determinism"][o] = ["config_invariant"] if compiled else ["run_to_run", "config_invariant"]
    for o in across_rows:
        c["determinism"][o] = ["config_invariant"]
    return c


def _n_rows(case):
    shape = case["shape"]
    rows = 1
    for d in shape[:-1]:
        rows *= int(d)
    return int(shape[-1]), rows


def _pair(op, graph, body, contract, bwd=False):
    """The eager and the compiled impl of one op: body(graph_fn, t, case) run with graph as
    written or under torch.compile; contract(case, compiled, bwd) -> dict. Both warm up (an
    untimed first call per case signature): compilation, and CUDA's lazy module loading for
    eager kernels, stay out of impl_ms."""
    compiled = _compile(graph)
    eager_impl = impl(op=op, device="cuda", contract=lambda case: contract(case, False, bwd), version=_VERSION,
                      warmup=True)(lambda t, case: body(graph, t, case))
    compiled_impl = impl(op=op, device="cuda", contract=lambda case: contract(case, True, bwd),
                         version=_compiled_version(), warmup=True)(lambda t, case: body(compiled, t, case))
    return eager_impl, compiled_impl


# ---- rms_norm: HF LlamaRMSNorm ----------------------------------------------------------------


def _rms_fwd_graph(x, w, eps: float):
    """HF LlamaRMSNorm.forward, returning rstd too."""
    xf = x.float()
    var = xf.pow(2).mean(-1, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return w * (xf * rstd).to(x.dtype), rstd


class _GivenRstd(torch.autograd.Function):
    """rsqrt(v) whose value is the given rstd, and whose backward is torch's own rsqrt formula,
    -0.5 * grad * result^3, with result = the given rstd.

    Why not r = rsqrt(v); r + (rstd - r).detach(): its value is rstd exactly (Sterbenz: r and
    rstd are within a factor 2, so rstd - r is exact, and so is r + (rstd - r)), but autograd's
    rsqrt backward would still use the recomputed r^3, so dx's rstd^3/N * sum(m x) x term would
    carry r's few-ulp difference from the given rstd, which kverify's bwd takes as exact."""

    @staticmethod
    def forward(ctx, v, rstd):
        ctx.save_for_backward(rstd)
        return rstd.clone()

    @staticmethod
    def backward(ctx, grad):
        (rstd,) = ctx.saved_tensors
        return -0.5 * grad * rstd.pow(3), None


def _rms_bwd_graph(x, w, rstd, eps: float):
    """HF LlamaRMSNorm.forward with the given rstd (shape rows x 1) in place of the recomputed one."""
    xf = x.float()
    var = xf.pow(2).mean(-1, keepdim=True)
    r = _GivenRstd.apply(var + eps, rstd)
    return w * (xf * r).to(x.dtype)


def _rms_contract(case, compiled, bwd=False):
    a, av, dt = case["attrs"], case["attr_values"], case["dtypes"]
    if a["mode"] != "llama":
        raise Unsupported("HF LlamaRMSNorm: mode=llama only")
    if av["offset"] != 0:
        raise Unsupported("HF LlamaRMSNorm has no weight offset: offset=0 only")
    sites = {}
    if bwd:
        if not dt["dy"] == dt["x"] == dt["w"] == dt["dx"] == dt["dw"]:
            # Mixed dtypes make autograd round dy*w twice (to fp32, then to x's dtype), where
            # kverify's rounding site rounds once.
            raise Unsupported("bwd needs one dtype for dy, x, w, dx, dw")
        if dt["x"] != "fp32":
            # Autograd's products are tensors in x's dtype: m = dy*w (the attribute
            # m_rounding=x_dtype says the same and is deprecated), and each dW term dy * t.
            if a.get("m_rounding", "fp32") != "x_dtype":
                sites["rms_norm.m"] = dt["x"]
            sites["rms_norm.dw_product"] = dt["x"]
    n, rows = _n_rows(case)
    axes = {"row": n, "rows": rows} if bwd else {"row": n}
    outs = (["dx"], ["dw"]) if bwd else (["y", "rstd"], [])
    c = _contract(compiled, {"rsqrt": 2}, axes, *outs)
    if sites:
        c["rounding_sites"] = sites
    return c


def _rms_fwd(graph, t, case):
    x = t["x"]
    y, rstd = graph(x.reshape(-1, x.shape[-1]), t["w"], float(case["attr_values"]["eps"]))
    # y is promote(w, x)'s dtype; a cast to y's listed dtype is kverify's final rounding.
    return {"y": y.to(_DT[case["dtypes"]["y"]]), "rstd": rstd}


def _rms_bwd(graph, t, case):
    """dx, dw by autograd. Autograd's dw rounds each dy * (x rstd).to(x dtype) product to w's
    dtype before the sum over rows (a bf16 multiply): the contract declares the rounding site
    rms_norm.dw_product (kverify's definition, Liger's, keeps the products in fp32)."""
    n = t["x"].shape[-1]
    x = t["x"].reshape(-1, n).detach().requires_grad_(True)
    w = t["w"].detach().requires_grad_(True)
    y = graph(x, w, t["rstd"].reshape(-1, 1).float(), float(case["attr_values"]["eps"]))
    y.backward(t["dy"].reshape(y.shape).to(y.dtype))
    return {"dx": x.grad, "dw": w.grad}


rms_norm_fwd_eager, rms_norm_fwd_compiled = _pair("rms_norm.fwd", _rms_fwd_graph, _rms_fwd, _rms_contract)
rms_norm_bwd_eager, rms_norm_bwd_compiled = _pair("rms_norm.bwd", _rms_bwd_graph, _rms_bwd, _rms_contract, bwd=True)


# ---- softmax ------------------------------------------------------------------------------


def _softmax_fwd_graph(x, y_dtype: torch.dtype):
    # What a user writes; half types are computed in fp32 inside the kernel. A wider y than x
    # asks torch for the fp32 result instead of widening a rounded one.
    if y_dtype == x.dtype:
        return torch.softmax(x, dim=-1)
    return torch.softmax(x, dim=-1, dtype=torch.float32).to(y_dtype)


def _softmax_bwd_graph(dy, y, x_dtype: torch.dtype):
    # The op autograd runs for softmax's backward.
    return torch._softmax_backward_data(dy, y, -1, x_dtype)


def _softmax_contract(case, compiled, bwd=False):
    dt = case["dtypes"]
    if bwd and not (dt["dy"] == dt["y"] and (dt["dx"] == dt["y"] or (dt["y"] == "fp32" and dt["dx"] != "fp32"))):
        raise Unsupported("softmax backward: dy and y in one dtype; dx in it, or a half type under fp32 y")
    n, _ = _n_rows(case)
    c = _contract(compiled, {} if bwd else {"exp": 2}, {"row": n}, ["dx" if bwd else "y"], [], divides=not bwd)
    if bwd:
        # ATen's kernel and its decomposition (inductor's) both evaluate dx = dy*y - y*sum(dy*y).
        c["forms"] = {"softmax.bwd_dx": "distributed"}
    if bwd and not compiled and dt["dy"] != "fp32":
        # ATen's softmax backward computes dy * y as a tensor in dy's dtype.
        c["rounding_sites"] = {"softmax.bwd_dy_y": dt["dy"]}
    return c


def _softmax_fwd(graph, t, case):
    return {"y": graph(t["x"], _DT[case["dtypes"]["y"]])}


def _softmax_bwd(graph, t, case):
    return {"dx": graph(t["dy"], t["y"], _DT[case["dtypes"]["dx"]])}


softmax_fwd_eager, softmax_fwd_compiled = _pair("softmax.fwd", _softmax_fwd_graph, _softmax_fwd, _softmax_contract)
softmax_bwd_eager, softmax_bwd_compiled = _pair(
    "softmax.bwd", _softmax_bwd_graph, _softmax_bwd, _softmax_contract, bwd=True)


# ---- cross_entropy ------------------------------------------------------------------------
# torch's semantics against kverify's (reference/cross_entropy.hpp):
# - reduction=mean with every row ignored: torch returns NaN (0/0), kverify's empty_mean=nan (the
#   default); an ignored row's gradient is 0 * softmax (NaN where the softmax is), its
#   ignored_grad=propagate (the default). The other choices are rejected.
# - label smoothing: the same function (kverify follows PyTorch's weighted smoothing term), but
#   torch reduces the nll and smoothing terms separately and mixes them after the reduction,
#   with ls/V and 1 - ls computed in double; kverify mixes per row. Roundings sit elsewhere.
# - nll = -log_softmax(x)[t] is computed as -((x_t - m) - log d), kverify's as (m + log d) - x_t;
#   the backward recomputes p = exp(log p), whose error grows with |log p|.
# z_loss and softcap have no torch counterpart: rejected.


def _ce_graph(logits, target, weight, ignore_index: int, ls: float, reduction: str):
    return F.cross_entropy(logits.float(), target.long(), weight=weight, ignore_index=ignore_index,
                           label_smoothing=ls, reduction=reduction)


def _ce_contract(case, compiled, bwd=False):
    av = case["attr_values"]
    if av["z_loss"] != 0:
        raise Unsupported("torch's cross_entropy has no z_loss")
    if av["softcap"] != 0:
        raise Unsupported("torch's cross_entropy has no logit softcap")
    if case["attrs"].get("empty_mean", "nan") != "nan":
        raise Unsupported("torch's mean over rows that are all ignored is NaN (0/0): empty_mean=nan only")
    if bwd and case["attrs"].get("ignored_grad", "propagate") != "propagate":
        raise Unsupported("torch's gradient of an ignored row is 0 * softmax: ignored_grad=propagate only")
    v, rows = _n_rows(case)
    out = "dlogits" if bwd else "loss"
    reduced = case["attrs"]["reduction"] == "mean" if bwd else case["attrs"]["reduction"] != "none"
    return _contract(compiled, {"exp": 2, "log": 1}, {"row": v, "rows": rows},
                     [] if reduced else [out], [out] if reduced else [])


def _ce_args(t, case):
    av = case["attr_values"]
    v = t["logits"].shape[-1]
    weight = t["weight"].float() if case["attrs"]["weights"] == "class" else None
    return v, t["target"].reshape(-1), weight, (int(av["ignore_index"]), float(av["label_smoothing"]),
                                               case["attrs"]["reduction"])


def _ce_fwd(graph, t, case):
    v, target, weight, attrs = _ce_args(t, case)
    loss = graph(t["logits"].reshape(-1, v), target, weight, *attrs)
    return {"loss": loss.to(_DT[case["dtypes"]["loss"]])}


def _ce_bwd(graph, t, case):
    v, target, weight, attrs = _ce_args(t, case)
    logits = t["logits"].reshape(-1, v).detach().requires_grad_(True)
    loss = graph(logits, target, weight, *attrs)
    loss.backward(t["dloss"].reshape(loss.shape).to(loss.dtype))
    return {"dlogits": logits.grad}


cross_entropy_fwd_eager, cross_entropy_fwd_compiled = _pair("cross_entropy.fwd", _ce_graph, _ce_fwd, _ce_contract)
cross_entropy_bwd_eager, cross_entropy_bwd_compiled = _pair(
    "cross_entropy.bwd", _ce_graph, _ce_bwd, _ce_contract, bwd=True)
