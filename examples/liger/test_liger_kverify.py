"""Liger-Kernel's op tests in Liger's own style (test/transformers/test_*.py: one test per op and
pass, parametrized over dtype and the op's options), with kverify in place of hand-set
tolerances: where Liger writes

    assert_verbose_allclose(y_liger, y_torch, atol=2e-1, rtol=2e-2)   # bf16, weight = ones

against a reference in the same low precision, these tests ask kverify whether every output
element of Liger's kernel lies in the set that its declared arithmetic may produce, on Liger's
own test shapes (liger_shapes.json) and generated cases (shapes at the kernels' thresholds,
value distributions, special values), with shrinking and a replay line on failure.

    PYTHONPATH=python:examples/liger:<liger>/src KVERIFY_LIB=<libkverify_c.so> \\
        python3 -m pytest -p kverify.pytest_plugin examples/liger/test_liger_kverify.py \\
        --kverify-out out/liger --kverify-budget 0.2

Needs a CUDA GPU, torch and Triton (skipped, saying so, without them)."""

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: Liger's Triton kernels need one", allow_module_level=True)

import cross_entropy  # noqa: E402
import flce  # noqa: E402
import glu  # noqa: E402
import layer_norm  # noqa: E402
import rms_norm  # noqa: E402
import rope  # noqa: E402
import softmax  # noqa: E402

SHAPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "liger_shapes.json")
CASES = 100  # generated cases per test, scaled by --kverify-budget
SHRINK = 30  # cases run to shrink a failure (each new shape is a Triton compile)


def _check(kverify_check, impl, dtype, attrs=None, fixed=None):
    """One Liger impl at one dtype: every tensor in it, except those of a fixed dtype (weight,
    dloss: fp32) and those `fixed` names (rstd: fp32 in llama and gemma)."""
    name, fn, op, contract, accepts = impl
    acc = {"dtypes": {t: [dtype] for t in accepts["dtypes"]}, "attrs": dict(accepts.get("attrs", {}))}
    for t, allowed in accepts["dtypes"].items():
        if dtype not in allowed:
            acc["dtypes"][t] = allowed
    acc["dtypes"].update(fixed or {})
    acc["attrs"].update(attrs or {})
    return kverify_check(fn, op=op, contract=contract, impl=name, cases=CASES, device="cuda", curated=SHAPES,
                         max_shrink_runs=SHRINK, **acc)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("mode", ["llama", "gemma", "none"])
@pytest.mark.parametrize("impl", rms_norm.IMPLS, ids=lambda i: i[0])
def test_rms_norm(kverify_check, impl, mode, dtype):
    _check(kverify_check, impl, dtype, {"mode": [mode]}, {"rstd": [dtype if mode == "none" else "fp32"]})


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("impl", layer_norm.IMPLS + softmax.IMPLS + rope.IMPLS + glu.IMPLS, ids=lambda i: i[0])
def test_op(kverify_check, impl, dtype):
    """The ops without attributes to sweep: layer_norm, softmax, rope, swiglu and geglu."""
    _check(kverify_check, impl, dtype)


# Liger defects kverify found (reports/gpus/nvidia-h100-80gb-hbm3/python-liger-*/README.md): a
# test that meets one is a strict xfail, so it must go on failing until Liger fixes it.
SOFTCAP = "finding 1: softcap lets the padding lanes (-inf -> -softcap) into the softmax's sum"
FLCE_BF16 = ("findings 2 and 3: FLCE backward in bf16 rounds dx and dW, then scales them by dloss "
             "(and under none rounds dloss to bf16)")
# Run on the H100 at 307aa6e: under mean the 20 draws of liger_flce_bwd passed (the double rounding
# shows only for some dloss; the campaign found 1,472 such failures in bf16), and at softcap 30
# (Liger's own test value) the padding lanes add exp(-30 - max) each, below fp32's resolution
# unless the logits saturate the softcap: 20 draws passed. Hence not strict under mean, softcap 1.


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("impl", cross_entropy.IMPLS + flce.IMPLS, ids=lambda i: i[0])
def test_cross_entropy(request, kverify_check, impl, reduction, dtype):
    """cross_entropy and fused linear cross-entropy, each reduction, without softcap (below)."""
    if impl[0].startswith("liger_flce_bwd") and dtype == "bf16":
        request.applymarker(pytest.mark.xfail(strict=reduction != "mean", raises=AssertionError, reason=FLCE_BF16))
    _check(kverify_check, impl, dtype, {"reduction": [reduction], "softcap": ["0"]})


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=SOFTCAP)
@pytest.mark.parametrize("impl", cross_entropy.IMPLS + flce.IMPLS[:1], ids=lambda i: i[0])
def test_cross_entropy_softcap(kverify_check, impl):
    _check(kverify_check, impl, "fp32", {"reduction": ["sum"], "softcap": ["1"]})
