"""kverify's pytest plugin (entry point `kverify`; or `-p kverify.pytest_plugin`).

    @pytest.mark.kverify(op="rms_norm.fwd", contract=CONTRACT, dtypes=["fp32", "bf16"])
    def test_my_rms_norm(kverify_check):
        kverify_check(my_rms_norm)

Options: --kverify-out DIR (every check's campaign under DIR/checks/, and for the session
DIR/results.jsonl, DIR/report.html, DIR/report.json, DIR/junit.xml), --kverify-budget X (scales
the generated cases of every check: 0.1 for a quick run, 10 for a nightly one),
--kverify-seed N, and --kverify-replay 'kv1 op=...' (the line a failure printed: the checks of
that op and impl run that one case alone, the others are skipped).
"""

import hashlib
import itertools
import math
import os
import re
import shutil
import tempfile

import pytest

import kverify


def pytest_addoption(parser):
    g = parser.getgroup("kverify")
    g.addoption("--kverify-out", default=None, help="directory for the session's results.jsonl, report.html, junit.xml")
    g.addoption("--kverify-budget", type=float, default=1.0, help="scale of the generated cases per check (default 1)")
    g.addoption("--kverify-seed", type=int, default=None, help="campaign seed of every check (default: each check's own)")
    g.addoption("--kverify-replay", default=None, help="run this one case line (as a failure printed it) alone")


def pytest_configure(config):
    config.addinivalue_line("markers", "kverify(op, contract, **options): a kverify check's op and options")
    config._kverify = _Session(config)


def pytest_sessionfinish(session, exitstatus):
    s = getattr(session.config, "_kverify", None)
    if s is not None and s.replay and s.replayed == 0:
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            f"kverify: --kverify-replay matched no check (its op and impl): {s.replay}", red=True)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def pytest_unconfigure(config):
    s = getattr(config, "_kverify", None)
    if s is not None:
        s.finish()


class _Session:
    def __init__(self, config):
        self.out = config.getoption("--kverify-out")
        self.budget = config.getoption("--kverify-budget")
        self.seed = config.getoption("--kverify-seed")
        self.replay = config.getoption("--kverify-replay")
        if not (self.budget > 0 and math.isfinite(self.budget)):
            raise pytest.UsageError(f"--kverify-budget must be a finite number above 0, not {self.budget}")
        self.replay_op = self.replay_impl = None
        if self.replay is not None:
            try:
                self.replay, self.replay_op, self.replay_impl = kverify.parse_case_line(self.replay)
            except ValueError as e:
                raise pytest.UsageError(f"--kverify-replay wants the line a failure printed: {e}") from None
        self.replayed = 0
        self.results = []
        self.serial = itertools.count()
        if self.out:
            if os.path.exists(self.out) and not os.path.isdir(self.out):
                raise pytest.UsageError(f"--kverify-out {self.out}: not a directory")
            os.makedirs(self.out, exist_ok=True)

    def campaign_dir(self, nodeid, op, impl):
        """One directory per check of the session: the test's name (shortened), a hash of its
        whole id, the op and impl, and the check's number in the session."""
        base = os.path.join(self.out, "checks") if self.out else tempfile.mkdtemp(prefix="kverify-")
        tag = hashlib.sha1(nodeid.encode()).hexdigest()[:10]
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[-60:] + f"-{tag}-{op}-{impl}-{next(self.serial)}"
        d = os.path.join(base, name)
        shutil.rmtree(d, ignore_errors=True)  # left by an earlier session
        return d

    def finish(self):
        if not self.out or not self.results:
            return
        path = os.path.join(self.out, "results.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for p in self.results:
                if p and os.path.exists(p):
                    with open(p, encoding="utf-8") as r:
                        shutil.copyfileobj(r, f)
        kverify.report(path, self.out, "kverify pytest session")


@pytest.fixture
def kverify_check(request):
    """kverify_check(fn, **options): kverify.check with the test's kverify marker and the
    session's options (budget, seed, output directory, replay)."""
    s = request.config._kverify
    marker = request.node.get_closest_marker("kverify")
    base = dict(marker.kwargs) if marker else {}

    def run(fn, **options):
        o = {**base, **options}
        if "op" not in o or "contract" not in o:
            raise pytest.UsageError("kverify_check needs op= and contract= (in the kverify marker or the call)")
        impl = kverify._impl_name(fn, o.get("impl"))
        if s.replay:
            if (o["op"], impl) != (s.replay_op, s.replay_impl):
                pytest.skip(f"--kverify-replay runs {s.replay_op} impl {s.replay_impl} alone")
            keep = {k: v for k, v in o.items() if k in ("contract", "dtypes", "attrs", "layouts", "knobs", "version", "device")}
            s.replayed += 1
            return kverify.replay(fn, s.replay, impl=impl, **keep)
        o["cases"] = max(1, round(o.get("cases", 100) * s.budget))
        if s.seed is not None:
            o["seed"] = s.seed
        o["out"] = s.campaign_dir(request.node.nodeid, o["op"], impl)
        try:
            res = kverify.check(fn, **o)
        except kverify.CheckFailed as e:
            s.results.append(e.results.results_path)
            raise
        s.results.append(res.results_path)
        return res

    return run
