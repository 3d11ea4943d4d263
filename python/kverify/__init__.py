"""kverify in the calling process: check a Python impl of one of kverify's ops against its
certified references under the numerics contract it declares.

    import kverify
    kverify.check(my_rms_norm, op="rms_norm.fwd", contract=MY_CONTRACT, dtypes=["fp32"], cases=200)

runs kverify's curated cases for the op and `cases` generated ones (shapes at the impl's
thresholds, odd sizes, value distributions), shrinks a failure to a minimal case and raises
AssertionError with the reason, the worst element and its admissible interval, and the line
that replays it (`kverify.replay`). The impl is fn(inputs, case) -> {output name: array}:
inputs maps each input tensor's name to a numpy array (a copy; bf16 arrives as float32),
case holds the case's fields (op, shape, dtypes, attrs, attr_values, config, the replay
line). Outputs are rounded to nearest-even to their dtype when written (bf16 through
float32): make roundings that matter your own. The inputs are copies, yours to keep.

The impl runs in this process: a crash in it (a segfault, a write past a buffer) ends the
process, keeping the result lines written so far; for containment run it through kverify's
worker protocol (examples/worker). Checks in one process run one at a time (a lock).
"""

import ctypes
import json
import math
import os
import re
import signal
import tempfile
import threading
import traceback
import warnings

from . import _arrays, _native
from ._contracts import Audited, any_order, audited

__all__ = ["check", "replay", "report", "audited", "any_order", "Results", "Unsupported", "CheckFailed", "CaseTimeout"]


class Unsupported(Exception):
    """Raised by a contract function for a case the impl does not compute (kverify declines
    the case, and the fuzzer draws another)."""


class CaseTimeout(Exception):
    """Raised in the impl when it runs past check's case_timeout (the case becomes an error)."""


class CheckFailed(AssertionError):
    """A check that found failing or erroring cases; .results holds everything it ran."""

    def __init__(self, message, results):
        super().__init__(message)
        self.results = results


class Results:
    """What a check ran: .counts ({verdict: cases}), .lines (every result line), .failures
    (the shrunk failing cases' result lines), .results_path, .out."""

    def __init__(self, answer, out):
        self.out = out
        self.code = answer.get("code", 2)
        self.counts = answer.get("counts", {})
        self.failures = answer.get("failures", [])
        self.results_path = answer.get("results")
        self.lines = []
        if self.results_path and os.path.exists(self.results_path):
            with open(self.results_path, encoding="utf-8") as f:
                self.lines = [json.loads(l) for l in f if l.strip()]

    @property
    def cases(self):
        return sum(self.counts.values())

    def __repr__(self):
        return f"Results({self.cases} cases: {self.counts}, out={self.out!r})"


_alive = {}  # (op, impl) -> the ctypes callbacks kverify holds (kept from the collector)
_lock = threading.RLock()  # one check at a time: kverify's registry of impls is the process's
_pending = []  # a KeyboardInterrupt or SystemExit the impl raised, raised again after the check
_campaign = [False]  # a campaign runs (its SIGINT handler winds it down)
_case_timeout = [None]  # seconds an impl call may take (check's case_timeout), None: no limit


def _armed(limit):
    """SIGALRM raising CaseTimeout in the impl after `limit` seconds: in Python code and in
    waits on subprocesses (a compiler that hangs; subprocess.run kills its child on the way
    out), not inside a C call that never returns. Main thread only. Returns the disarm."""
    if not limit or threading.current_thread() is not threading.main_thread():
        return lambda: None

    def alarm(_sig, _frame):
        raise CaseTimeout(f"the impl ran past case_timeout={limit} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)

    def disarm():
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return disarm


def _register(fn, op, impl, contract, dtypes, attrs, layouts, knobs, version, device="host"):
    notes = set()
    if device not in ("host", "cuda"):
        raise ValueError(f"device must be host (numpy arrays) or cuda (torch tensors), not {device!r}")
    if device == "cuda":
        from . import _torch as io
    else:
        io = _arrays

    def run(_user, case_json, tensors, n, err, err_len):
        disarm = _armed(_case_timeout[0])
        try:
            case = json.loads(case_json)
            try:
                result = fn(io.inputs(tensors, n), case)
            finally:
                disarm()
            io.write_outputs(tensors, n, result, notes)
            return 0
        except (KeyboardInterrupt, SystemExit) as e:
            # Stop the campaign (its handler records the signal) and raise it again after it.
            _pending.append(e)
            if _campaign[0]:
                os.kill(os.getpid(), signal.SIGINT)
            _native.write_c_string(err, err_len, f"interrupted: {type(e).__name__} in the impl")
            return 1
        except BaseException as e:  # noqa: BLE001: everything else the impl raises becomes the case's error
            tb = traceback.extract_tb(e.__traceback__)
            where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
            _native.write_c_string(err, err_len, f"{type(e).__name__}: {e}{where}")
            return 1

    def contract_fn(_user, case_json, out, out_len):
        try:
            try:
                answer = {"contract": contract(json.loads(case_json))}
            except Unsupported as e:
                answer = {"unsupported": str(e) or "unsupported"}
            _native.write_c_string(out, out_len, json.dumps(answer, default=_plain))
            return 0
        except BaseException as e:  # noqa: BLE001
            _native.write_c_string(out, out_len, f"contract function: {type(e).__name__}: {e}")
            return 1

    decl = {"op": op, "impl": impl, "device": device, "version": version or getattr(fn, "__qualname__", "python"),
            "knobs": knobs or {}, "contract": None if callable(contract) else contract}
    accepts = {}
    if dtypes is not None:
        accepts["dtypes"] = [dtypes] if isinstance(dtypes, str) else list(dtypes) if not isinstance(dtypes, dict) else dtypes
    if attrs is not None:
        accepts["attrs"] = {k: [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])] for k, v in attrs.items()}
    if layouts is not None:
        accepts["layouts"] = list(layouts)
    if accepts:
        decl["accepts"] = accepts
    cbs = (_native.RUN_FN(run),
           _native.CONTRACT_FN(contract_fn) if callable(contract) else ctypes.cast(None, _native.CONTRACT_FN))
    err = _native.take(_native.lib().kvc_register(json.dumps(decl).encode(), cbs[0], cbs[1], None))
    if err:
        raise ValueError(err)
    _alive[(op, impl)] = cbs
    return notes


def _call_with(fn, op, impl, contract, dtypes, attrs, layouts, knobs, version, device, native, *args, campaign=False,
               case_timeout=None):
    """fn registered, then one call into the library, under the lock; a KeyboardInterrupt or
    SystemExit the impl raised during it is raised again here. Returns (notes, answer)."""
    with _lock:
        notes = _register(fn, op, impl, contract, dtypes, attrs, layouts, knobs, version, device)
        del _pending[:]
        _campaign[0], _case_timeout[0] = campaign, case_timeout
        try:
            answer = _native.call_json(native, *args)
        finally:
            _campaign[0], _case_timeout[0] = False, None
        if _pending:
            raise _pending.pop()
    return notes, answer


def parse_case_line(text):
    """(line, op, impl) of a case line as a failure printed it ('kv1 op=... impl=... ...'), also
    pasted whole in its `kverify replay '...' --device ...` form; ValueError for anything else."""
    m = re.search(r"'(kv1 [^']*)'", text)
    line = m.group(1) if m else text.strip()
    m = re.match(r"kv1 op=(\S+) impl=(\S+) ", line + " ")
    if not m:
        raise ValueError(f"not a kverify case line ('kv1 op=... impl=... ...'): {text!r}")
    return line, m.group(1), m.group(2)


def _plain(v):
    """numpy scalars and arrays in a contract, as JSON numbers and lists."""
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"{type(v).__name__} is not JSON")


def _validate(fn, op, contract, dtypes, attrs, cases, budget, seed, max_elements, shard=None, case_timeout=None):
    """Arguments checked before anything runs: one ValueError naming the argument."""
    if not callable(fn):
        raise ValueError(f"fn must be callable, not {type(fn).__name__}")
    if not isinstance(op, str) or not op:
        raise ValueError(f"op must be an op name like 'rms_norm.fwd', not {op!r}")
    if not (callable(contract) or isinstance(contract, dict) or contract == "audited"):
        raise ValueError(f"contract must be a dict, a function of the case or 'audited', not {contract!r}"[:200])
    if dtypes is not None and not isinstance(dtypes, (list, tuple, dict, str)):
        raise ValueError(f"dtypes must be a list of dtype names (or a dict per tensor), not {type(dtypes).__name__}")
    if attrs is not None and not isinstance(attrs, dict):
        raise ValueError(f"attrs must map attribute names to accepted values, not {type(attrs).__name__}")
    if cases is not None and (isinstance(cases, bool) or not isinstance(cases, int) or cases < 0):
        raise ValueError(f"cases must be a whole number >= 0, not {cases!r}")
    if budget is not None and (not isinstance(budget, (int, float)) or not math.isfinite(budget) or budget <= 0):
        raise ValueError(f"budget must be a finite number of seconds above 0, not {budget!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be a whole number in [0, 2^64), not {seed!r}")
    if max_elements is not None and (isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 1):
        raise ValueError(f"max_elements must be a whole number >= 1, not {max_elements!r}")
    if shard is not None:
        m = re.fullmatch(r"(\d+)/(\d+)", str(shard))
        if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
            raise ValueError(f"shard must be 'i/N' with 0 <= i < N, not {shard!r}")
    if case_timeout is not None and not (isinstance(case_timeout, (int, float)) and case_timeout > 0):
        raise ValueError(f"case_timeout must be a number of seconds above 0, not {case_timeout!r}")


def _contract_mode(contract):
    """(the contract to ask, "declared" or "audited"): 'audited' alone is audited(any_order)."""
    if contract == "audited":
        contract = audited()
    return contract, "audited" if isinstance(contract, Audited) else "declared"


def _impl_name(fn, impl):
    name = impl or getattr(fn, "__name__", "python")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _worst(line):
    """The failing output's worst element, with its admissible interval, in words."""
    for name, o in (line.get("outputs") or {}).items():
        if not o.get("n_fail"):
            continue
        b = o.get("bound", {})
        at = ", ".join(str(i) for i in o.get("worst_coords", []))
        return (f"worst element {name}[{at}] = {b.get('out')}, admissible [{b.get('admissible_lo')}, "
                f"{b.get('admissible_hi')}] around the reference {b.get('v')} (contract half-width "
                f"{b.get('contract_half_width')}); {o.get('n_fail')} of {o.get('n')} elements of {name} fail")
    return "no element outside its set (the case errs: see the reason)"


def _message(op, impl, res):
    head = f"kverify: {op} impl '{impl}': {res.counts.get('fail', 0) + res.counts.get('error', 0)} of {res.cases} cases fail or err"
    parts = [head]
    for f in res.failures[:3]:
        shrink = f.get("shrink", {})
        parts += [f"  {f.get('verdict')}: {f.get('reason', '')}",
                  f"    {_worst(f)}",
                  f"    shrunk in {shrink.get('runs', 0)} runs from {f.get('original', {}).get('case', f.get('case'))}",
                  f"    replay: kverify.replay(fn, {f.get('case')!r}, ...)  or  pytest --kverify-replay '{f.get('case')}'"]
    if len(res.failures) > 3:
        parts.append(f"  ... {len(res.failures) - 3} more in {res.out}/failures.jsonl")
    parts.append(f"  results: {res.results_path}")
    return "\n".join(parts)


def check(fn, op, *, contract, impl=None, dtypes=None, attrs=None, layouts=None, knobs=None, cases=None,
          budget=None, seed=0, max_elements=None, curated="builtin", max_shrink_runs=200, out=None, version=None,
          device="host", shard=None, raise_on_failure=True, case_timeout=None, resume=False):
    """Checks fn as an impl of op. contract: the numerics contract (a dict, or a function of the
    case returning one that may raise Unsupported; see examples/worker/PROTOCOL.md, Contracts);
    kverify.audited(contract) has the audit measure its reductions per case, and 'audited'
    alone is audited(kverify.any_order): fp32 arithmetic, documented math bounds, the sums'
    trees measured (for a kernel whose numerics one has not read).
    dtypes, attrs, layouts: what the impl accepts (the generator draws only these). cases: how
    many generated cases (default 100 unless budget); budget: seconds to keep drawing. out: the
    campaign directory (default: a fresh temporary one). device: host (fn gets numpy arrays) or
    cuda (torch tensors on the GPU; kverify runs as on that GPU). shard: "i/N", the generated
    cases of indices i mod N (one process per shard, the same seed; `kverify merge` joins the
    directories). case_timeout: seconds one call of fn may take before the case is an error
    (CaseTimeout raised in fn; Python code and subprocess waits, main thread). resume: go on with
    the campaign in out (the same seed and options; the cases it holds are not run again), as
    `kverify fuzz --resume` does. Returns Results;
    raises CheckFailed (an AssertionError) when a case fails or
    errs (raise_on_failure=False: returns them in Results) or when no case was verified (always),
    ValueError for bad arguments."""
    _validate(fn, op, contract, dtypes, attrs, cases, budget, seed, max_elements, shard, case_timeout)
    contract, mode = _contract_mode(contract)
    impl = _impl_name(fn, impl)
    if out is None:
        out = tempfile.mkdtemp(prefix=f"kverify-{op}-{impl}-")
    if os.path.exists(os.path.join(out, "campaign.json")) and not resume:
        raise ValueError(f"out={os.fspath(out)!r} already holds a campaign: give a new directory, remove it, or "
                         "resume=True to go on with it")
    opts = {"op": op, "impl": impl, "out": os.fspath(out), "seed": seed, "curated": curated, "device": device,
            "max_shrink_runs": int(max_shrink_runs), "contract": mode, "resume": bool(resume)}
    if cases is not None:
        opts["cases"] = cases
    if budget is not None:
        opts["seconds"] = float(budget)
    if max_elements is not None:
        opts["max_elements"] = max_elements
    if shard is not None:
        opts["shard"] = str(shard)
    notes, answer = _call_with(fn, op, impl, contract, dtypes, attrs, layouts, knobs, version, device,
                               _native.lib().kvc_check, json.dumps(opts).encode(), campaign=True,
                               case_timeout=case_timeout)
    if answer.get("interrupted") == signal.SIGINT:
        raise KeyboardInterrupt(f"kverify: check of {op} impl '{impl}' interrupted (results so far: {out})")
    if answer.get("interrupted"):
        os.kill(os.getpid(), answer["interrupted"])  # the caller's own handling of the signal (SIGTERM)
    if answer.get("code") == 2:
        raise ValueError(f"kverify: {answer.get('error')}")
    res = Results(answer, os.fspath(out))
    res.notes = sorted(notes)
    for n in res.notes:
        warnings.warn(f"kverify: {op} impl '{impl}': {n}", stacklevel=2)
    bad = res.counts.get("fail", 0) + res.counts.get("error", 0)
    if raise_on_failure and bad:
        raise CheckFailed(_message(op, impl, res), res)
    if res.counts.get("pass", 0) == 0 and not bad:  # always: a check that verified nothing is no pass
        raise CheckFailed(f"kverify: {op} impl '{impl}': no case was verified ({res.counts or 'none ran'}): a check "
                          "that checked nothing does not pass", res)
    if raise_on_failure and res.code != 0:
        raise CheckFailed(_message(op, impl, res), res)
    return res


def replay(fn, case_line, *, contract, impl=None, dtypes=None, attrs=None, layouts=None, knobs=None, version=None,
           device="host", raise_on_failure=True):
    """Runs one case (the line a failure printed) on fn; returns its result line, raises
    CheckFailed when it fails or errs."""
    case_line, op, line_impl = parse_case_line(case_line)
    impl = impl or line_impl
    contract, mode = _contract_mode(contract)
    _, line = _call_with(fn, op, impl, contract, dtypes, attrs, layouts, knobs, version, device, _native.lib().kvc_replay,
                         case_line.encode(), json.dumps({"device": device, "contract": mode}).encode())
    if "usage_error" in line:
        raise ValueError(f"kverify: {line['usage_error']}")
    if raise_on_failure and line.get("verdict") != "pass":
        res = Results({"code": 1, "counts": {line.get("verdict", "error"): 1}, "failures": [line]}, None)
        if line.get("verdict") in ("fail", "error"):
            raise CheckFailed(_message(op, impl, res), res)
        raise CheckFailed(f"kverify: {op} impl '{impl}': the case was {line.get('verdict')}, not verified: "
                          f"{line.get('reason', '')}", res)
    return line


def report(results_path, out_dir, title="kverify"):
    """report.html, report.json and junit.xml in out_dir from a results.jsonl."""
    err = _native.take(_native.lib().kvc_report(os.fspath(results_path).encode(), os.fspath(out_dir).encode(),
                                                title.encode()))
    if err:
        raise ValueError(err)
