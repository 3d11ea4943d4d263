"""What a hostile or careless caller does to the package (a probe found each): nothing that
checked nothing passes, a replay passes only a verified case, checks in threads keep their own
impls, inputs kept past the call stay readable, a Ctrl-C in the impl stops the check and
leaves the process's own signal handling as it was, bad arguments are refused up front."""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

import kverify
from host_impls import rms_contract, rms_norm

A = {"op": "rms_norm.fwd", "dtypes": ["fp32"], "attrs": {"mode": ["llama", "gemma"]}}


def nan_impl(t, case):
    return {k: np.full_like(v, np.nan) for k, v in rms_norm(t, case).items()}


def test_a_check_of_only_unverifiable_cases_does_not_pass(tmp_path):
    def loose(case):  # bf16 accumulation over an absurd serial run: no element gets a useful bound
        c = rms_contract(case)
        c["acc"] = "bf16"
        c["reductions"]["row"]["serial"] = 10**12
        return c

    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(nan_impl, contract=loose, cases=4, curated="none", out=tmp_path / "u", **A)
    assert "no case was verified" in str(e.value) or "fail" in str(e.value)


def test_a_replay_passes_only_a_verified_case():
    line = ("kv1 op=rms_norm.fwd impl=rms_norm config= shape=0x2 dtypes=rstd:fp32,w:fp32,x:fp32,y:fp32 "
            "attrs=eps:0x1.0c6f7a0b5ed8dp-20,mode:llama,offset:0x0p+0 dist=normal seed=1 gen=1")
    with pytest.raises(kverify.CheckFailed) as e:
        kverify.replay(rms_norm, line, contract=rms_contract)
    assert "skip, not verified" in str(e.value)
    with pytest.raises(ValueError):
        kverify.replay(rms_norm, line.replace("shape=0x2", "shape=2xZ"), contract=rms_contract)


def test_checks_in_threads_keep_their_own_impl(tmp_path):
    got = {}

    def run(name, fn):
        try:
            got[name] = kverify.check(fn, impl="kernel", contract=rms_contract, cases=6, out=tmp_path / name, **A)
        except kverify.CheckFailed as e:
            got[name] = e

    ts = [threading.Thread(target=run, args=("nan", nan_impl)), threading.Thread(target=run, args=("good", rms_norm))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert isinstance(got["nan"], kverify.CheckFailed), got["nan"]
    assert isinstance(got["good"], kverify.Results), got["good"]


def test_inputs_kept_past_the_call_stay_readable(tmp_path):
    kept = []

    def keeps(t, case):
        kept.append(t["x"])
        return rms_norm(t, case)

    kverify.check(keeps, contract=rms_contract, cases=3, out=tmp_path / "k", **A)
    assert sum(float(np.abs(x).sum()) for x in kept) > 0  # a view of freed memory would crash here


def test_ctrl_c_in_the_impl_stops_the_check_and_signals_work_after(tmp_path):
    def interrupted(t, case):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        kverify.check(interrupted, contract=rms_contract, cases=50, curated="none", out=tmp_path / "i", **A)
    # The process's SIGINT handling is Python's again, and the next check runs in full.
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    res = kverify.check(rms_norm, contract=rms_contract, cases=5, curated="none", out=tmp_path / "after", **A)
    assert res.counts.get("pass") == 5


def test_a_case_the_stop_interrupted_is_abandoned_not_recorded(tmp_path):
    # A Ctrl-C reaches the impl's children too: a compiler killed by it makes the impl raise an
    # ordinary error (Triton's PTXASError, code -2). That case is the stop's, not the impl's.
    calls = []

    def child_killed_by_the_stop(t, case):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
            raise RuntimeError("ptxas failed with error code -2")
        return rms_norm(t, case)

    with pytest.raises(KeyboardInterrupt):
        kverify.check(child_killed_by_the_stop, contract=rms_contract, cases=20, curated="none", out=tmp_path / "s",
                      impl="rms", **A)
    lines = [json.loads(l) for l in open(tmp_path / "s" / "results.jsonl")]
    assert [l["verdict"] for l in lines] == ["pass", "pass"]  # the third case, in flight, left to --resume
    res = kverify.check(rms_norm, contract=rms_contract, cases=20, curated="none", out=tmp_path / "s", resume=True,
                        impl="rms", **A)
    assert res.counts.get("pass") == 20


@pytest.mark.parametrize("bad, words", [
    ({"cases": -1}, "cases"), ({"budget": 0}, "budget"), ({"budget": float("nan")}, "budget"),
    ({"seed": -1}, "seed"), ({"attrs": ["mode"]}, "attrs"), ({"op": None}, "op"), ({"contract": None}, "contract"),
])
def test_bad_arguments_are_refused_before_anything_runs(tmp_path, bad, words):
    args = {**A, "contract": rms_contract, "cases": 2, "out": tmp_path / "x", **bad}
    with pytest.raises(ValueError) as e:
        kverify.check(rms_norm, **args)
    assert words in str(e.value)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("output, words", [
    (lambda y: y + 1j, "not a real number type"), (lambda y: y.astype(str), "not a real number type"),
    (lambda y: np.ma.masked_all(y.shape), "masked"),
])
def test_outputs_that_are_not_real_numbers_are_errors(tmp_path, output, words):
    def odd(t, case):
        r = rms_norm(t, case)
        return {"y": output(r["y"]), "rstd": r["rstd"]}

    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(odd, contract=rms_contract, cases=2, curated="none", out=tmp_path / "o", **A)
    assert words in str(e.value)


def test_an_output_the_op_lacks_is_an_error_and_numpy_scalars_in_a_contract_are_numbers(tmp_path):
    def extra(t, case):
        return {**rms_norm(t, case), "mean": np.zeros(1)}

    def np_contract(case):
        c = rms_contract(case)
        c["reductions"]["row"]["serial"] = np.int64(c["reductions"]["row"]["serial"])
        return c

    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(extra, contract=rms_contract, cases=2, curated="none", out=tmp_path / "e", **A)
    assert "no output of" in str(e.value)
    assert kverify.check(rms_norm, contract=np_contract, cases=3, out=tmp_path / "n", **A).counts.get("pass", 0) >= 3


def test_an_impl_that_hangs_is_an_error_after_case_timeout(tmp_path):
    import subprocess
    import time

    def hangs(t, case):  # a compiler that never returns, as ptxas did on Liger's rope at 512 x 1024 tiles
        subprocess.run(["sleep", "30"], check=True)

    t0 = time.time()
    with pytest.raises(kverify.CheckFailed) as e:
        kverify.check(hangs, op="rms_norm.fwd", contract=rms_contract, cases=1, curated="none", max_shrink_runs=1,
                      case_timeout=0.5, out=tmp_path / "h", dtypes=["fp32"])
    assert time.time() - t0 < 20
    assert "case_timeout=0.5" in str(e.value)
    assert e.value.results.counts.get("error", 0) >= 1
    with pytest.raises(ValueError, match="case_timeout"):
        kverify.check(hangs, op="rms_norm.fwd", contract=rms_contract, cases=1, case_timeout=-1)
