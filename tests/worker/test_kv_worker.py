"""Tests of examples/worker/kv_worker.py driven as kverify drives it (PROTOCOL.md, version 1):
JSON lines on pipes, tensors in .safetensors files. The codec and the pure impls' math:
test_kv_tensors.py. Standard library only: python3 -m unittest discover -s tests/worker -v"""

import json
import math
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parents[2] / "examples" / "worker"
sys.path.insert(0, str(WORKER_DIR))

import kv_tensors as kt  # noqa: E402

TEST_IMPLS = textwrap.dedent('''
    """Impls for the worker tests: stray output, a failing impl, a static contract."""
    import os
    import pure_impls
    from kv_worker import impl

    STATIC = {"acc": "fp32", "fma": False, "ftz": False, "math_ulps": {"rsqrt": 1},
              "reductions": {"row": {"serial": 64, "depth": 0, "partials": 0}}, "determinism": {}}

    @impl(op="rms_norm.fwd", device="host", contract=STATIC, version="noisy 1")
    def noisy(t, case):
        print("a stray print")
        os.write(1, b"a stray write to fd 1\\n")
        return pure_impls.rms_norm_fwd(t, case)

    @impl(op="rms_norm.fwd", device="host", contract=pure_impls.rms_contract)
    def broken(t, case):
        raise ValueError("deliberate")

    @impl(op="rms_norm.fwd", device="host", contract=pure_impls.rms_contract)
    def cuda_error(t, case):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    @impl(op="rms_norm.fwd", device="host", contract=lambda case: 1 / 0)
    def bad_contract(t, case):
        return {}

    @impl(op="rms_norm.fwd", device="host")
    def no_contract(t, case):
        return {}

    def not_an_impl(t, case):
        return {}
''')

EPS = 1e-6


def rms_case(mode="llama", shape=(4, 64), dt="bf16"):
    return {
        "op": "rms_norm.fwd",
        "case": f"kv1 op=rms_norm.fwd shape={'x'.join(map(str, shape))} (test)",
        "config": {},
        "shape": list(shape),
        "dtypes": {"x": dt, "w": dt, "y": dt, "rstd": "fp32"},
        "attrs": {"mode": mode, "eps": float.hex(EPS), "offset": "0x0p+0"},
        "attr_values": {"mode": mode, "eps": EPS, "offset": 0.0},
    }


class Worker:
    """kv_worker.py as kverify runs it: JSON lines on pipes, stderr to a log file."""

    def __init__(self, tmp, *args):
        self.log = open(os.path.join(tmp, "worker.log"), "w+b")
        cmd = [sys.executable, str(WORKER_DIR / "kv_worker.py"), "--path", tmp, *args]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, bufsize=0)

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())

    def line(self, timeout=60):
        """One line from stdout, or None on timeout or EOF."""
        if not select.select([self.p.stdout], [], [], timeout)[0]:
            return None
        return self.p.stdout.readline().decode() or None

    def ask(self, obj, timeout=60):
        self.send(obj)
        line = self.line(timeout)
        if line is None:
            raise AssertionError(f"no answer to {obj.get('type')}; log: {self.stderr()}")
        return json.loads(line)

    def stderr(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.log):
            f.close()


class WorkerProtocol(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvw-")
        with open(os.path.join(self.tmp, "test_impls.py"), "w") as f:
            f.write(TEST_IMPLS)
        self.workers = []
        rng = random.Random(1)
        self.x = kt.Array([kt.bf16(rng.gauss(0, 1)) for _ in range(4 * 64)], [4, 64], "bf16")
        self.w = kt.Array([kt.bf16(rng.gauss(1, 0.25)) for _ in range(64)], [64], "bf16")
        self.inputs = os.path.join(self.tmp, "1-in.safetensors")
        kt.write_safetensors(self.inputs, {"x": self.x, "w": self.w}, {"case": "test"})

    def tearDown(self):
        for w in self.workers:
            w.close()
        for name in os.listdir(self.tmp):
            os.remove(os.path.join(self.tmp, name))
        os.rmdir(self.tmp)

    def start(self, *args):
        w = Worker(self.tmp, *args)
        self.workers.append(w)
        return w

    def hello(self, w, protocol=1):
        return w.ask({"type": "hello", "protocol": protocol, "io_dir": self.tmp,
                      "device": {"kind": "host", "name": "test"}, "kverify": {"commit": "test"}})

    def run_req(self, impl, rid, case=None, out=None):
        case = case or rms_case()
        tensors = [{"name": "x", "role": "input", "dtype": "bf16", "shape": [4, 64]},
                   {"name": "w", "role": "input", "dtype": "bf16", "shape": [64]},
                   {"name": "y", "role": "output", "dtype": "bf16", "shape": [4, 64]},
                   {"name": "rstd", "role": "output", "dtype": "fp32", "shape": [4]}]
        out = out or os.path.join(self.tmp, f"{rid}-out.safetensors")
        return dict(case, type="run", id=rid, impl=impl, inputs=self.inputs, outputs=out, tensors=tensors)

    def test_hello_contract_and_run(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd", "--impl", "noisy=test_impls:noisy")
        h = self.hello(w)
        self.assertEqual((h["type"], h["protocol"]), ("hello", 1))
        by_name = {i["impl"]: i for i in h["impls"]}
        self.assertEqual(by_name["pure"], {"op": "rms_norm.fwd", "impl": "pure", "device": "host",
                                           "version": "pure_impls 1", "knobs": {}, "contract": None})
        self.assertEqual(by_name["noisy"]["contract"]["reductions"]["row"]["serial"], 64)

        c = w.ask(dict(rms_case(), type="contract", id=7, impl="pure"))
        self.assertEqual((c["type"], c["id"]), ("contract", 7))
        self.assertEqual(c["contract"]["reductions"], {"row": {"serial": 64, "depth": 0, "partials": 0}})
        self.assertEqual(c["contract"]["math_ulps"], {"rsqrt": 1})

        r = w.ask(self.run_req("pure", 8))
        self.assertEqual((r["type"], r["id"], r["ok"]), ("result", 8, True), r)
        self.assertGreaterEqual(r["impl_ms"], 0)
        out, _ = kt.read_safetensors(os.path.join(self.tmp, "8-out.safetensors"))
        self.assertEqual(sorted(out), ["rstd", "y"])
        self.assertEqual((out["y"].dtype, out["y"].shape), ("bf16", [4, 64]))
        self.assertEqual((out["rstd"].dtype, out["rstd"].shape), ("fp32", [4]))
        self.assertTrue(all(math.isfinite(v) for v in out["y"].data + out["rstd"].data))
        # Against the same formula in double: within a few bf16 ulps (2^-8 relative each).
        for r_ in range(4):
            row = self.x.data[r_ * 64 : (r_ + 1) * 64]
            rstd = 1 / math.sqrt(sum(v * v for v in row) / 64 + EPS)
            self.assertAlmostEqual(out["rstd"].data[r_], rstd, delta=rstd * 2**-20)
            for j, v in enumerate(row):
                want = kt.bf16(v * rstd) * self.w.data[j]
                self.assertAlmostEqual(out["y"].data[r_ * 64 + j], want, delta=abs(want) * 2**-6 + 1e-30)

    def test_stray_output_goes_to_stderr(self):
        w = self.start("--impl", "noisy=test_impls:noisy")
        self.hello(w)
        self.assertTrue(w.ask(self.run_req("noisy", 1))["ok"])
        self.assertEqual(w.ask(self.run_req("noisy", 2))["id"], 2)  # nothing stray in between
        log = w.stderr()
        self.assertIn("a stray print", log)
        self.assertIn("a stray write to fd 1", log)

    def test_wrong_protocol_is_refused_naming_both(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd")
        a = self.hello(w, protocol=2)
        self.assertEqual(a["type"], "error")
        self.assertIn("protocol 1", a["error"])
        self.assertIn("protocol 2", a["error"])

    def test_impl_exception_is_an_answer_and_the_worker_goes_on(self):
        w = self.start("--impl", "broken=test_impls:broken", "--impl", "pure=pure_impls:rms_norm_fwd")
        self.hello(w)
        r = w.ask(self.run_req("broken", 3))
        self.assertEqual((r["id"], r["ok"]), (3, False))
        self.assertEqual(r["error"], "ValueError: deliberate")
        self.assertTrue(w.ask(self.run_req("pure", 4))["ok"])
        r = w.ask(self.run_req("nonesuch", 5))
        self.assertFalse(r["ok"])
        self.assertIn("nonesuch", r["error"])

    def test_sticky_cuda_error_ends_the_worker_after_its_answer(self):
        w = self.start("--impl", "ce=test_impls:cuda_error")
        self.hello(w)
        r = w.ask(self.run_req("ce", 1))
        self.assertFalse(r["ok"])
        self.assertEqual(r["error"], "RuntimeError: CUDA error: an illegal memory access was encountered")
        self.assertEqual(w.p.wait(timeout=30), 1)

    def test_unsupported_and_failing_contracts(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd", "--impl", "bc=test_impls:bad_contract")
        self.hello(w)
        a = w.ask(dict(rms_case(mode="none"), type="contract", id=1, impl="pure"))
        self.assertEqual((a["type"], a["id"]), ("contract", 1))
        self.assertIn("mode=none", a["unsupported"])
        self.assertNotIn("contract", a)
        a = w.ask(dict(rms_case(), type="contract", id=2, impl="bc"))
        self.assertEqual(a["error"], "ZeroDivisionError: division by zero")
        r = w.ask(self.run_req("pure", 3, case=rms_case(mode="none")))
        self.assertFalse(r["ok"])
        self.assertTrue(r["error"].startswith("Unsupported: mode=none"))

    def test_wrong_impl_differs(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd", "--impl", "bad=pure_impls:rms_norm_fwd_bad")
        self.hello(w)
        self.assertTrue(w.ask(self.run_req("pure", 1))["ok"])
        self.assertTrue(w.ask(self.run_req("bad", 2))["ok"])
        good, _ = kt.read_safetensors(os.path.join(self.tmp, "1-out.safetensors"))
        bad, _ = kt.read_safetensors(os.path.join(self.tmp, "2-out.safetensors"))
        for g, b in zip(good["rstd"].data, bad["rstd"].data):
            self.assertGreater(b, g)  # one square fewer in the sum

    def test_one_name_for_two_ops_and_softmax(self):
        w = self.start("--impl", "p=pure_impls:rms_norm_fwd", "--impl", "p=pure_impls:softmax_fwd")
        h = self.hello(w)
        self.assertEqual(sorted(i["op"] for i in h["impls"]), ["rms_norm.fwd", "softmax.fwd"])
        case = {"op": "softmax.fwd", "case": "kv1 test", "config": {}, "shape": [4, 64],
                "dtypes": {"x": "bf16", "y": "fp32"}, "attrs": {}, "attr_values": {}}
        tensors = [{"name": "x", "role": "input", "dtype": "bf16", "shape": [4, 64]},
                   {"name": "y", "role": "output", "dtype": "fp32", "shape": [4, 64]}]
        out = os.path.join(self.tmp, "9-out.safetensors")
        r = w.ask(dict(case, type="run", id=9, impl="p", inputs=self.inputs, outputs=out, tensors=tensors))
        self.assertTrue(r["ok"], r)
        y = kt.read_safetensors(out)[0]["y"].data
        for i in range(4):
            self.assertAlmostEqual(sum(y[i * 64 : (i + 1) * 64]), 1.0, delta=1e-5)

    def test_startup_errors(self):
        for arg, why in (("x=test_impls:no_contract", "declares no contract"),
                         ("x=test_impls:not_an_impl", "is not an @impl function"),
                         ("nonsense", "NAME=module:function")):
            with self.subTest(arg=arg):
                w = self.start("--impl", arg)
                self.assertEqual(w.p.wait(timeout=30), 2)
                self.assertIn(why, w.stderr())

    def test_closing_stdin_ends_the_worker(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd")
        self.hello(w)
        w.p.stdin.close()
        self.assertEqual(w.p.wait(timeout=5), 0)

    def test_help_documents_the_test_only_switches(self):
        p = subprocess.run([sys.executable, str(WORKER_DIR / "kv_worker.py"), "--help"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0)
        for s in ("test-only", "--speak-protocol", "--crash-on-run", "--hang-on-run", "--garbage-on-run"):
            self.assertIn(s, p.stdout)

    # -- the test-only switches kverify's tests use --

    def test_speak_protocol(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd", "--speak-protocol", "7")
        self.assertEqual(self.hello(w)["protocol"], 7)

    def test_garbage_on_run(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd", "--garbage-on-run", "2")
        self.hello(w)
        self.assertTrue(w.ask(self.run_req("pure", 1))["ok"])
        w.send(self.run_req("pure", 2))
        with self.assertRaises(ValueError):
            json.loads(w.line())

    def test_crash_on_run(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd", "--crash-on-run", "1")
        self.hello(w)
        w.send(self.run_req("pure", 1))
        self.assertIsNone(w.line())
        self.assertIn(w.p.wait(timeout=30), (-signal.SIGSEGV, 3))

    def test_hang_on_run(self):
        w = self.start("--impl", "pure=pure_impls:rms_norm_fwd", "--hang-on-run", "2")
        self.hello(w)
        self.assertTrue(w.ask(self.run_req("pure", 1))["ok"])
        w.send(self.run_req("pure", 2))
        self.assertIsNone(w.line(timeout=1.5))
        self.assertIsNone(w.p.poll())


if __name__ == "__main__":
    unittest.main()
