"""contract='audited' and kverify.audited(base): the audit measures each case's reductions on
the impl itself, so a kernel whose numerics one has not read gets a sound contract (any order,
documented math bounds) held to the tree it really uses; a planted bug still fails."""

import pytest

import kverify
from host_impls import rms_contract, rms_norm_drops_last, rms_norm_fp32_serial

GEMMA = {"dtypes": ["fp32"], "attrs": {"mode": ["gemma"]}}


def test_audited_alone_measures_the_sum_the_impl_uses(tmp_path):
    res = kverify.check(rms_norm_fp32_serial, op="rms_norm.fwd", contract="audited", cases=12, out=tmp_path / "a",
                        **GEMMA)
    assert res.counts.get("pass", 0) >= 10, res.counts
    sources = [l.get("contract_source", {}).get("row", "") for l in res.lines if l["verdict"] == "pass"]
    assert "measured" in sources, sources[:5]  # the serial cumsum, measured, in place of "any order"
    line = next(l for l in res.lines if l.get("contract_source", {}).get("row") == "measured")
    assert line["contract_declared"]["reductions"]["row"]["serial"] == line["shape"][-1]  # any order, declared
    assert line["contract"]["math_ulps"]["rsqrt"]["ulps"] == 2  # CUDA's documented bound


def test_audited_still_fails_a_planted_bug(tmp_path):
    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(rms_norm_drops_last, op="rms_norm.fwd", contract="audited", cases=10, out=tmp_path / "b",
                      **GEMMA)
    assert e.value.results.counts.get("fail", 0) >= 1, e.value.results.counts


def test_audited_takes_a_declared_base(tmp_path):
    res = kverify.check(rms_norm_fp32_serial, op="rms_norm.fwd", contract=kverify.audited(rms_contract), cases=6,
                        out=tmp_path / "c", **GEMMA)
    assert res.code == 0 and res.counts.get("pass", 0) >= 4, res.counts
    assert any(l.get("contract_source", {}).get("row") == "measured" for l in res.lines)


def test_a_contract_function_sees_the_axes_and_math_functions(tmp_path):
    seen = []

    def contract(case):
        seen.append((case["shape"], case["axes"], case["math_functions"], case["approximate_ops"]))
        return kverify.any_order(case)

    kverify.check(rms_norm_fp32_serial, op="rms_norm.fwd", contract=contract, cases=3, out=tmp_path / "d", **GEMMA)
    assert seen
    for shape, axes, fns, ops in seen:
        assert axes == {"row": shape[-1]}
        assert fns == ["rsqrt"] and ops == ["div"]


def test_audited_rejects_what_is_not_a_contract():
    with pytest.raises(ValueError, match="audited"):
        kverify.audited("any")
    with pytest.raises(ValueError, match="contract must be"):
        kverify.check(rms_norm_fp32_serial, op="rms_norm.fwd", contract="audit", cases=1)
