"""The Liger campaign's host-side tools (examples/liger: summarize.py, classify.py), which need
no GPU: shards joined once per case, and each failure assigned to the Liger behaviour that
explains it, an unexplained one named as such (classify exits 1 on it)."""

import json
import os
import sys

import numpy as np

import kverify

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "liger"))

import classify  # noqa: E402
import smoothing  # noqa: E402
import summarize  # noqa: E402


def line(op, shape, verdict="fail", attrs=None, dtypes=None, index=0, impl="liger_x"):
    return {"op": op, "impl": impl, "shape": shape, "verdict": verdict, "attrs": attrs or {}, "dtypes": dtypes or {},
            "case": f"kv1 op={op} impl={impl} shape={'x'.join(map(str, shape))} seed={index}",
            "fuzz": {"seed": 1, "index": index, "tier": "generated"}}


def test_failures_are_assigned_to_their_finding():
    sc = {"softcap": "0x1p+0", "reduction": "mean"}
    assert classify.explain(line("cross_entropy.fwd", [8, 15], attrs=sc)) == "softcap_padding"
    assert classify.explain(line("cross_entropy.fwd", [8, 16], attrs=sc)) == "unexplained"  # no padded lane
    assert classify.explain(line("fused_linear_cross_entropy.bwd", [4, 8, 100], attrs=sc)) == "softcap_padding"
    assert classify.explain(line("fused_linear_cross_entropy.bwd", [4, 8, 100], attrs=sc, dtypes={"x": "bf16"})) == \
        "softcap_padding_or_flce_scale_after_products"  # both act: the inputs do not tell them apart
    bf = {"x": "bf16"}
    assert classify.explain(line("fused_linear_cross_entropy.bwd", [4, 8, 128], attrs={"reduction": "sum"},
                                 dtypes=bf)) == "flce_scale_after_products"
    assert classify.explain(line("fused_linear_cross_entropy.bwd", [4, 8, 128], attrs={"reduction": "none"},
                                 dtypes=bf)) == "flce_none_dloss_rounded"
    assert classify.explain(line("fused_linear_cross_entropy.bwd", [4, 8, 128], attrs={"reduction": "sum"},
                                 dtypes={"x": "fp32"})) == "unexplained"
    assert classify.explain(line("cross_entropy.fwd", [8, 16], attrs={"label_smoothing": "0x1p-1"})) == \
        "ce_smoothing_cancellation"
    assert classify.explain(line("cross_entropy.bwd", [8, 16], attrs={"label_smoothing": "0x1p-1"})) == "unexplained"
    assert classify.explain(line("rms_norm.fwd", [4, 64])) == "unexplained"


SMOOTHED = ("kv1 op=cross_entropy.fwd impl=liger_cross_entropy_fwd config= shape=397x4 dtypes=logits:fp32,loss:fp32,"
            "target:i32,weight:fp32 attrs=empty_mean:zero,ignore_index:-100,ignored_grad:zero,label_smoothing:0x1p+0,"
            "reduction:none,softcap:0x0p+0,weights:none,z_loss:0x0p+0 dist=big_mean seed=433034337 gen=1")


def test_the_smoothing_emulation_reproduces_an_output_and_nothing_else():
    # The emulated kernel fails kverify on big_mean logits, and confirm() finds its own worst
    # element bit for bit; one ulp off at that element is not confirmed.
    j = kverify.replay(smoothing.emulate, SMOOTHED, contract=smoothing.contract, device="host", raise_on_failure=False)
    assert j["verdict"] == "fail" and j["outputs"]["loss"]["n_fail"] > 0
    c = smoothing.confirm(j)
    assert c["confirmed"] and c["emulated_n_fail"] == j["outputs"]["loss"]["n_fail"], c
    b = j["outputs"]["loss"]["bound"]
    b["out"] = float(np.nextafter(np.float32(b["out"]), np.float32(np.inf)))
    assert not smoothing.confirm(j)["confirmed"]


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("".join(json.dumps(l) + "\n" for l in lines))


def test_shards_join_once_and_an_unexplained_failure_exits_1(tmp_path):
    d = tmp_path / "liger_rms"
    a = line("rms_norm.fwd", [4, 64], verdict="pass", index=0)
    _write(str(d / "shard-0-of-2" / "results.jsonl"), [a, line("rms_norm.fwd", [4, 64], index=2)])
    _write(str(d / "shard-1-of-2" / "results.jsonl"), [a, line("rms_norm.fwd", [4, 64], verdict="pass", index=1)])
    assert summarize.main(str(tmp_path)) == 1  # a failure
    s = json.load(open(tmp_path / "summary.json"))["liger_rms"]
    assert s["cases"] == 3 and s["verdicts"] == {"pass": 2, "fail": 1}  # the line in both shards counted once
    assert classify.main(str(tmp_path)) == 1  # rms_norm failing: no known Liger defect explains it
    c = json.load(open(tmp_path / "classified.json"))
    assert c["counts"] == {"liger_rms unexplained": 1}


def test_compact_and_tally_count_each_case_once_and_set_the_stops_case_apart(tmp_path):
    import compact
    import tally

    def at(j, shard, cid, reason=""):
        j["fuzz"]["shard"], j["case_id"], j["reason"], j["impl"] = shard, cid, reason, "liger_ce"
        return j
    sc = {"softcap": "0x1p+0", "reduction": "sum"}
    stop = "the impl failed: PTXASError: `ptxas` failed with error code -2"
    out = tmp_path / "campaign"
    _write(str(out / "liger_ce" / "shard-0-of-2" / "results.jsonl"),
           [at(line("cross_entropy.fwd", [8, 15], "pass", index=0), "0/2", "a"),
            at(line("cross_entropy.fwd", [8, 15], attrs=sc, index=2), "0/2", "b"),
            at(line("cross_entropy.fwd", [8, 15], "error", index=4), "0/2", "c", stop)])  # in flight at the stop
    _write(str(out / "liger_ce" / "shard-1-of-2" / "results.jsonl"),
           [at(line("cross_entropy.fwd", [8, 15], "unverifiable", index=1), "1/2", "d")])
    run = tmp_path / "runs" / "seed-1"
    assert compact.main(str(out), str(run)) == 0
    assert tally.main(str(tmp_path / "t"), [str(run)]) == 0
    s = json.load(open(tmp_path / "t" / "summary.json"))
    assert s["impls"]["liger_ce"] == {"cases": 3, "curated": 0, "pass": 1, "fail": 1, "unverifiable": 1}
    assert len(s["abandoned"]) == 1 and s["errors"] == []
    assert json.load(open(tmp_path / "t" / "classified.json"))["counts"] == {"liger_ce softcap_padding": 1}
    # An error that is not the shard's last case, or not the stop's, is counted and fails the tally.
    _write(str(out / "liger_ce" / "shard-1-of-2" / "results.jsonl"),
           [at(line("cross_entropy.fwd", [8, 15], "error", index=1), "1/2", "d", stop),
            at(line("cross_entropy.fwd", [8, 15], "pass", index=3), "1/2", "e")])
    assert compact.main(str(out), str(run)) == 0
    assert tally.main(str(tmp_path / "t"), [str(run)]) == 1
    assert len(json.load(open(tmp_path / "t" / "summary.json"))["errors"]) == 1


SOFTCAPPED = ("kv1 op=cross_entropy.fwd impl=liger_cross_entropy_fwd config= shape=8x15 dtypes=logits:fp32,loss:fp32,"
              "target:i32,weight:fp32 attrs=empty_mean:zero,ignore_index:-100,ignored_grad:zero,label_smoothing:0x0p+0,"
              "reduction:none,softcap:0x1p+0,weights:none,z_loss:0x0p+0 dist=normal seed=1 gen=1")


def test_the_softcap_emulation_confirms_the_padded_lanes_and_nothing_else():
    import softcap

    def impl(pad, scale=1.0):
        def fn(t, case):
            return {"loss": (softcap.emulate(t, case, pad) * scale).astype(np.float32)}
        return fn
    # The definition (no padded lane) passes; Liger's padded lane fails and is confirmed; a
    # wrong loss (1% off) fails and is not.
    assert kverify.replay(impl(0), SOFTCAPPED, contract=softcap.contract)["verdict"] == "pass"
    liger = kverify.replay(impl(softcap.liger_pad(15)), SOFTCAPPED, contract=softcap.contract, raise_on_failure=False)
    assert liger["verdict"] == "fail" and softcap.confirm(liger)["confirmed"]
    wrong = kverify.replay(impl(0, 1.01), SOFTCAPPED, contract=softcap.contract, raise_on_failure=False)
    assert wrong["verdict"] == "fail" and not softcap.confirm(wrong)["confirmed"]


def test_the_softcap_emulation_takes_flce_logits_rounded_once():
    import softcap
    line = ("kv1 op=fused_linear_cross_entropy.fwd impl=liger_flce_fwd config= shape=8x16x15 dtypes=x:bf16,"
            "weight:bf16,loss:fp32 attrs=reduction:none,softcap:1,ignored_grad:zero,empty_mean:zero dist=normal seed=2")

    def impl(pad):
        def fn(t, case):
            return {"loss": softcap.emulate(softcap.flce_logits(t, case), case, pad).astype(np.float32)}
        return fn

    def stored_logits(case):  # Liger's: the logits stored in x's dtype (flce.py declares the same)
        return {**softcap.contract(case), "rounding_sites": {"flce.logits": "bf16"}}
    assert kverify.replay(impl(0), line, contract=stored_logits)["verdict"] == "pass"
    liger = kverify.replay(impl(1), line, contract=stored_logits, raise_on_failure=False)
    assert liger["verdict"] == "fail" and softcap.confirm(liger)["confirmed"]
    # One rounding step: 1 + 2^-8 is a tie (to even: 1); just above it rounds up, where going
    # through fp32 first would make it the tie again.
    assert list(softcap._round(np.array([1 + 2**-8, 1 + 2**-8 + 2**-30]), "bf16")) == [1.0, 1 + 2**-7]


def test_the_flce_backward_emulation_confirms_the_double_rounding_and_nothing_else():
    import flce_bwd
    import softcap
    line = ("kv1 op=fused_linear_cross_entropy.bwd impl=liger_flce_bwd config= shape=16x8x24 dtypes=x:bf16,"
            "weight:bf16,dloss:fp32 attrs=reduction:sum,ignored_grad:zero,empty_mean:zero dist=normal seed=3")
    sites = {"flce.logits": "bf16", "flce.grad": "bf16"}

    def liger_contract(case):  # flce.py's sites, without the bf16 dW accumulator (dW is not compared here)
        return {**softcap.contract(case), "rounding_sites": sites}

    def impl(dx):
        def fn(t, case):
            h, v = int(case["shape"][1]), int(case["shape"][2])
            return {"dx": dx(t, case).astype(np.float32), "dweight": np.zeros((v, h), np.float32)}
        return fn
    # dW is left out of the comparison by giving the definition's own value: only dx is judged here.
    definition = impl(lambda t, case: flce_bwd.dx_definition(t, case, sites))
    assert kverify.replay(definition, line, contract=liger_contract, raise_on_failure=False)["outputs"]["dx"][
        "n_fail"] == 0
    liger = kverify.replay(impl(lambda t, case: flce_bwd.dx_liger(t, case, 0)), line, contract=liger_contract,
                           raise_on_failure=False)
    assert liger["outputs"]["dx"]["n_fail"] > 0 and flce_bwd.confirm(liger)["confirmed"]
    off = impl(lambda t, case: flce_bwd.dx_definition(t, case, sites) * 1.02)
    wrong = kverify.replay(off, line, contract=liger_contract, raise_on_failure=False)
    assert wrong["outputs"]["dx"]["n_fail"] > 0 and not flce_bwd.confirm(wrong)["confirmed"]


def test_the_worst_element_shown_is_a_failing_one():
    # Near-overflow FLCE inputs: the contract admits NaN on the rows whose bf16 logits overflow
    # (an infinite ratio), while Liger's order fails elsewhere. The worst element shown must be a
    # failing one, not an admitted NaN.
    import flce_bwd
    import softcap
    line = ("kv1 op=fused_linear_cross_entropy.bwd impl=liger_flce_bwd config= shape=521x1x5 dtypes=x:bf16,weight:bf16,"
            "dloss:fp32 attrs=reduction:sum,ignore_index:-100,ignored_grad:zero,empty_mean:zero dist=near_overflow "
            "seed=336633218")
    sites = {"flce.logits": "bf16", "flce.grad": "bf16"}

    def fn(t, case):
        return {"dx": flce_bwd.dx_liger(t, case, 0).astype(np.float32), "dweight": np.zeros((5, 1), np.float32)}
    with np.errstate(all="ignore"):
        dx = kverify.replay(fn, line, contract=lambda c: {**softcap.contract(c), "rounding_sites": sites},
                            raise_on_failure=False)["outputs"]["dx"]
    b = dx["bound"]
    assert dx["n_fail"] > 0 and dx["n_nan_admitted"] > 0
    out, lo, hi = (float(b[k]) for k in ("out", "admissible_lo", "admissible_hi"))
    assert np.isfinite(out) and not lo <= out <= hi, b
    assert float(dx["max_ratio"]) == float("inf")  # the statistics keep every element's ratio
