"""The pytest plugin in a pytest run of its own: the marker and fixture, --kverify-out's
session files, --kverify-budget, and --kverify-replay of the line a failure printed."""

import json
import re

pytest_plugins = ["pytester"]

TESTS = '''
import pytest
from host_impls import rms_contract, rms_norm, rms_norm_drops_last

pytestmark = pytest.mark.kverify(op="rms_norm.fwd", contract=rms_contract, dtypes=["fp32"],
                                 attrs={"mode": ["llama", "gemma"]}, cases=20)

def test_good(kverify_check):
    kverify_check(rms_norm)

def test_bad(kverify_check):
    kverify_check(rms_norm_drops_last)
'''


def _run(pytester, *args):
    pytester.makepyfile(test_rms=TESTS)
    return pytester.runpytest_subprocess("-p", "kverify.pytest_plugin", *args)


def test_session_files_and_a_failure_with_its_replay_line(pytester):
    out = pytester.path / "kv"
    r = _run(pytester, f"--kverify-out={out}", "--kverify-budget=0.5")
    r.assert_outcomes(passed=1, failed=1)
    text = r.stdout.str()
    assert "pytest --kverify-replay 'kv1 op=rms_norm.fwd impl=rms_norm_drops_last" in text
    for f in ("results.jsonl", "report.html", "report.json", "junit.xml"):
        assert (out / f).stat().st_size > 0, f
    lines = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    impls = {l["impl"] for l in lines}
    assert impls == {"rms_norm", "rms_norm_drops_last"}
    # --kverify-budget 0.5: 10 generated cases per check (the curated tier comes on top).
    generated = [l for l in lines if l["impl"] == "rms_norm" and l.get("fuzz", {}).get("tier") == "generated"]
    assert len(generated) == 10, [l.get("fuzz") for l in lines[:3]]
    assert json.loads((out / "report.json").read_text())["summary"]["cases"] == len(lines)

    # The printed line, given back: the failing check runs that case alone and fails again;
    # the other check is skipped.
    line = re.search(r"--kverify-replay '([^']+)'", text).group(1)
    again = _run(pytester, f"--kverify-replay={line}")
    again.assert_outcomes(failed=1, skipped=1)


def test_a_replay_line_that_matches_nothing_is_a_usage_error_not_a_green_run(pytester):
    garbage = _run(pytester, "--kverify-replay=garbage")
    assert garbage.ret == 4, garbage.stdout.str()[-1500:]  # pytest's usage error
    typo = _run(pytester, "--kverify-replay=kv1 op=rms_norm.fwd impl=rms_norm_typo config= shape=1x1 seed=1 gen=1")
    assert typo.ret == 4, typo.stdout.str()[-1500:]
    assert "matched no check" in typo.stdout.str()


def test_out_that_is_a_file_is_a_usage_error(pytester):
    f = pytester.path / "afile"
    f.write_text("x")
    r = _run(pytester, f"--kverify-out={f}")
    assert r.ret == 4
    assert "not a directory" in r.stderr.str() + r.stdout.str()
