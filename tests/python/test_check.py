"""The Python package against numpy host impls: a correct impl passes the curated and
generated cases, a planted bug fails with the reason, the worst element's interval and a
replay line that reproduces it, and bad arguments are one clear error."""

import json
import os

import pytest

import kverify
from host_impls import rms_contract, rms_norm, rms_norm_drops_last

ACCEPTS = {"dtypes": ["fp32"], "attrs": {"mode": ["llama", "gemma"]}}


def test_a_correct_impl_passes(tmp_path):
    res = kverify.check(rms_norm, op="rms_norm.fwd", contract=rms_contract, cases=40, out=tmp_path / "c", **ACCEPTS)
    assert res.code == 0
    # Curated and generated cases, each judged: near_overflow inputs may leave a case unverifiable.
    assert res.counts.get("pass", 0) >= 35, res.counts
    assert set(res.counts) <= {"pass", "skip", "unverifiable"}, res.counts
    assert len(res.lines) == res.cases
    assert all(l["impl"] == "rms_norm" and l["op"] == "rms_norm.fwd" for l in res.lines)
    assert any(l["shape"][-1] > 1000 for l in res.lines)  # the generator reaches long rows


def test_a_planted_bug_fails_with_reason_interval_and_replay(tmp_path):
    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(rms_norm_drops_last, op="rms_norm.fwd", contract=rms_contract, cases=20, out=tmp_path / "b",
                      **ACCEPTS)
    msg = str(e.value)
    assert "cases fail or err" in msg
    assert "elements fail" in msg  # the reason
    assert "admissible [" in msg and "around the reference" in msg  # the worst element's interval
    f = e.value.results.failures[0]
    assert f["verdict"] == "fail"
    assert f["shrink"]["runs"] >= 1  # shrunk
    assert f"kverify.replay(fn, {f['case']!r}" in msg
    # The printed line replays the failure alone, and the correct impl passes it.
    with pytest.raises(kverify.CheckFailed):
        kverify.replay(rms_norm_drops_last, f["case"], contract=rms_contract, **ACCEPTS)
    ok = kverify.replay(rms_norm, f["case"].replace("impl=rms_norm_drops_last", "impl=rms_norm"),
                        contract=rms_contract, **ACCEPTS)
    assert ok["verdict"] == "pass"


def test_an_impl_that_raises_makes_its_cases_errors(tmp_path):
    def broken(t, case):
        raise RuntimeError("kernel launch failed")

    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(broken, op="rms_norm.fwd", contract=rms_contract, cases=3, curated="none", out=tmp_path / "e",
                      **ACCEPTS)
    assert "RuntimeError: kernel launch failed" in str(e.value)


def test_a_missing_output_is_an_error_not_a_pass(tmp_path):
    def no_rstd(t, case):
        return {"y": rms_norm(t, case)["y"]}

    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(no_rstd, op="rms_norm.fwd", contract=rms_contract, cases=2, curated="none", out=tmp_path / "m",
                      **ACCEPTS)
    assert "no output 'rstd'" in str(e.value)


def test_a_check_where_every_case_is_declined_does_not_pass(tmp_path):
    def none_taken(case):
        raise kverify.Unsupported("nothing")

    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(rms_norm, op="rms_norm.fwd", contract=none_taken, cases=3, curated="none", out=tmp_path / "d")
    assert "no case ran" in str(e.value) or "checked nothing" in str(e.value)


@pytest.mark.parametrize("kwargs, words", [
    ({"op": "rms_norm.fwdd"}, "unknown op"),
    ({"op": "rms_norm.fwd", "dtypes": ["fp33"]}, "fp33"),
    ({"op": "rms_norm.fwd", "contract": {"acc": "fp32"}}, "contract"),
])
def test_bad_arguments_are_one_clear_error(tmp_path, kwargs, words):
    args = {"contract": rms_contract, "cases": 1, "out": tmp_path / "x", **kwargs}
    with pytest.raises((ValueError, kverify.CheckFailed)) as e:
        kverify.check(rms_norm, **args)
    assert words in str(e.value).lower()
    assert "\n" not in str(e.value).strip() or isinstance(e.value, kverify.CheckFailed)


def test_report_writes_html_junit_and_json(tmp_path):
    res = kverify.check(rms_norm, op="rms_norm.fwd", contract=rms_contract, cases=5, out=tmp_path / "r", **ACCEPTS)
    kverify.report(res.results_path, tmp_path / "rep", "package test")
    for f in ("report.html", "report.json", "junit.xml"):
        assert (tmp_path / "rep" / f).stat().st_size > 0
    assert json.loads((tmp_path / "rep" / "report.json").read_text())["summary"]["cases"] == res.cases


def test_shards_of_one_seed_split_the_generated_cases(tmp_path):
    def indices(shard):
        res = kverify.check(rms_norm, op="rms_norm.fwd", contract=rms_contract, cases=8, seed=7, curated="none",
                            shard=shard, out=tmp_path / shard.replace("/", "of"), **ACCEPTS)
        return {l["fuzz"]["index"] for l in res.lines}

    a, b = indices("0/2"), indices("1/2")
    assert a and b and not a & b
    assert a | b == set(range(8))
    with pytest.raises(ValueError):
        kverify.check(rms_norm, op="rms_norm.fwd", contract=rms_contract, shard="2/2", out=tmp_path / "bad", **ACCEPTS)


def test_raise_on_failure_false_returns_the_failures(tmp_path):
    res = kverify.check(rms_norm_drops_last, op="rms_norm.fwd", contract=rms_contract, cases=6, out=tmp_path / "r",
                        raise_on_failure=False, **ACCEPTS)
    assert res.counts.get("fail", 0) >= 1 and res.failures, res.counts  # verified, and failing: no raise

    def none_taken(case):
        raise kverify.Unsupported("nothing")

    with pytest.raises(kverify.CheckFailed, match="checked nothing"):  # checking nothing still raises
        kverify.check(rms_norm, op="rms_norm.fwd", contract=none_taken, cases=3, out=tmp_path / "s",
                      raise_on_failure=False, curated="none")


def test_resume_goes_on_with_a_campaign_without_rerunning_its_cases(tmp_path):
    out = tmp_path / "r"
    first = kverify.check(rms_norm, op="rms_norm.fwd", contract=rms_contract, cases=6, out=out, curated="none",
                          **ACCEPTS)
    with pytest.raises(ValueError, match="resume=True"):
        kverify.check(rms_norm, op="rms_norm.fwd", contract=rms_contract, cases=12, out=out, **ACCEPTS)
    more = kverify.check(rms_norm, op="rms_norm.fwd", contract=rms_contract, cases=12, out=out, curated="none",
                         resume=True, **ACCEPTS)
    idx = [l["fuzz"]["index"] for l in more.lines]
    assert len(idx) == len(set(idx)) == 12, idx  # the first 6 kept, 6 more run, none twice
    assert [l["case"] for l in more.lines[:6]] == [l["case"] for l in first.lines]
