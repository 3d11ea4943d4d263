"""Tests of examples/worker: the pure-Python safetensors codec and its rounding, the pure impls'
math-function claims, and kv_worker.py driven as kverify drives it (PROTOCOL.md, version 1).
Standard library only: python3 -m unittest discover -s tests/worker -v"""

import decimal
import json
import math
import os
import random
import select
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest
from fractions import Fraction
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parents[2] / "examples" / "worker"
sys.path.insert(0, str(WORKER_DIR))

import kv_tensors as kt  # noqa: E402
import pure_impls  # noqa: E402

F32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
BF16_MAX = (2 - 2**-7) * 2.0**127


def same(a, b):
    """Equal values with equal signs of zero; NaN equals NaN."""
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def roundtrip(values, dtype):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        kt.write_safetensors(p, {"t": kt.Array(values, [len(values)], dtype)})
        out, _ = kt.read_safetensors(p)
    return out["t"].data


def f32_neighbours(r):
    """The fp32 values just below and above the fp32 value r > 0."""
    (b,) = struct.unpack("<I", struct.pack("<f", r))
    return tuple(struct.unpack("<f", struct.pack("<I", b + k))[0] for k in (-1, 1))


class Codec(unittest.TestCase):
    SPECIALS = {
        "fp32": [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 2.0**-149, -(2.0**-149), 2.0**-126,
                 2.0**-127 * 3, F32_MAX, -F32_MAX, kt.f32(1 / 3)],
        "fp16": [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 2.0**-24, -(2.0**-24), 2.0**-14,
                 2.0**-15 * 3, 65504.0, -65504.0, kt.f16(1 / 3)],
        "bf16": [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 2.0**-133, -(2.0**-133), 2.0**-126,
                 2.0**-128 * 3, BF16_MAX, -BF16_MAX, kt.bf16(1 / 3)],
        "i32": [0, -1, 1, 2**31 - 1, -(2**31), 12345],
    }

    def test_roundtrip_is_exact_for_each_dtype(self):
        for dtype, vals in self.SPECIALS.items():
            with self.subTest(dtype=dtype):
                back = roundtrip(vals, dtype)
                self.assertEqual(len(back), len(vals))
                for a, b in zip(vals, back):
                    self.assertTrue(same(a, b), f"{dtype}: wrote {a!r}, read {b!r}")

    def test_round_to_nearest_even(self):
        cases = {
            "fp32": [(1 + 2**-24, 1.0), (1 + 3 * 2**-24, 1 + 2**-22), (1 + 2**-24 + 2**-50, 1 + 2**-23),
                     (2.0**128, math.inf), (F32_MAX * (1 + 2**-25), F32_MAX), (-(2.0**128), -math.inf),
                     (2.0**-150, 0.0), (3 * 2.0**-150, 2.0**-148), (-(2.0**-151), -0.0)],
            "fp16": [(1 + 2**-11, 1.0), (1 + 3 * 2**-11, 1 + 2**-9), (65519.0, 65504.0), (65520.0, math.inf),
                     (2.0**-25, 0.0), (3 * 2.0**-25, 2.0**-23), (-(2.0**-26), -0.0)],
            # 1 + 2^-8 + 2^-30 is above the tie: rounding it to fp32 first would make it a tie
            # and round it down to 1 (double rounding); bf16() rounds the double directly.
            "bf16": [(1 + 2**-8, 1.0), (1 + 3 * 2**-8, 1 + 2**-6), (1 + 2**-8 + 2**-30, 1 + 2**-7),
                     (BF16_MAX + 2.0**119, math.inf), (BF16_MAX + 2.0**119 - 2.0**90, BF16_MAX),
                     (2.0**-134, 0.0), (3 * 2.0**-134, 2.0**-132), (-(2.0**-140), -0.0)],
        }
        for dtype, pairs in cases.items():
            back = roundtrip([x for x, _ in pairs], dtype)
            for (x, want), got in zip(pairs, back):
                with self.subTest(dtype=dtype, x=x):
                    self.assertTrue(same(got, want), f"{dtype}({x!r}) = {got!r}, want {want!r}")
                    self.assertTrue(same(kt.round_to(dtype, x), want))

    def test_bf16_against_exact_nearest(self):
        """Random doubles in bf16's normal range against the nearest of the two truncation
        neighbours, measured exactly (ties to the even mantissa)."""
        rng = random.Random(7)
        for _ in range(3000):
            x = rng.choice([-1, 1]) * math.ldexp(1 + rng.random(), rng.randint(-120, 120))
            (bits,) = struct.unpack("<Q", struct.pack("<d", abs(x)))
            lo = struct.unpack("<d", struct.pack("<Q", bits >> 45 << 45))[0]  # 7 mantissa bits kept
            hi = lo + math.ldexp(1, math.frexp(lo)[1] - 8)
            dl, dh = Fraction(abs(x)) - Fraction(lo), Fraction(hi) - Fraction(abs(x))
            even_lo = (bits >> 45) % 2 == 0
            want = lo if dl < dh or (dl == dh and even_lo) else hi
            self.assertEqual(kt.bf16(x), math.copysign(want, x), x)

    def test_file_layout(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.safetensors")
            kt.write_safetensors(p, {"b": kt.Array([1.0, 2.0, 3.0], [3], "bf16"), "a": kt.Array([7], [1, 1], "i32")},
                                 {"case": "kv1 test"})
            raw = Path(p).read_bytes()
            (hl,) = struct.unpack("<Q", raw[:8])
            self.assertEqual(hl % 8, 0)
            h = json.loads(raw[8 : 8 + hl])
            self.assertEqual(h["__metadata__"], {"case": "kv1 test"})
            self.assertEqual(h["b"], {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]})
            self.assertEqual(h["a"], {"dtype": "I32", "shape": [1, 1], "data_offsets": [6, 10]})
            self.assertEqual(raw[8 + hl :], struct.pack("<3H", 0x3F80, 0x4000, 0x4040) + struct.pack("<i", 7))
            _, meta = kt.read_safetensors(p)
            self.assertEqual(meta, {"case": "kv1 test"})

    def test_reader_rejects_malformed_files(self):
        good = kt.Array([1.0, 2.0], [2], "fp32")
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.safetensors")
            kt.write_safetensors(p, {"x": good})
            raw = Path(p).read_bytes()
            (hl,) = struct.unpack("<Q", raw[:8])
            header = json.loads(raw[8 : 8 + hl])

            def with_header(hd, data=raw[8 + hl :]):
                h = json.dumps(hd).encode()
                return struct.pack("<Q", len(h)) + h + data

            bad = {
                "truncated": raw[:-1],
                "short": raw[:4],
                "header length": struct.pack("<Q", 1 << 40) + raw[8:],
                "offsets": with_header({"x": dict(header["x"], data_offsets=[0, 16])}),
                "size": with_header({"x": dict(header["x"], shape=[3])}),
                "dtype": with_header({"x": dict(header["x"], dtype="F64")}),
            }
            for what, blob in bad.items():
                with self.subTest(what=what):
                    Path(p).write_bytes(blob)
                    with self.assertRaises(ValueError):
                        kt.read_safetensors(p)


class PureMath(unittest.TestCase):
    """The 1-ulp claims of pure_impls' contracts, checked exactly on random fp32 arguments."""

    def test_rsqrt32_within_one_ulp(self):
        rng = random.Random(3)
        for _ in range(3000):
            t = kt.f32(math.ldexp(1 + rng.random(), rng.randint(-140, 127)))
            r = pure_impls.rsqrt32(t)
            lo, hi = f32_neighbours(r)
            # t^-1/2 lies strictly between r's neighbours iff lo^2 t < 1 < hi^2 t.
            self.assertTrue(Fraction(lo) ** 2 * Fraction(t) < 1 < Fraction(hi) ** 2 * Fraction(t), t)

    def test_exp32_within_one_ulp(self):
        rng = random.Random(4)
        ctx = decimal.Context(prec=60)
        for _ in range(3000):
            a = kt.f32(-rng.random() * 87)  # softmax's arguments x - max <= 0, normal results
            r = pure_impls.exp32(a)
            lo, hi = f32_neighbours(r)
            exact = ctx.exp(decimal.Decimal(a))
            self.assertTrue(decimal.Decimal(lo) < exact < decimal.Decimal(hi), a)

    def test_special_values(self):
        self.assertEqual(pure_impls.rsqrt32(0.0), math.inf)
        self.assertEqual(pure_impls.rsqrt32(-0.0), -math.inf)
        self.assertEqual(pure_impls.rsqrt32(math.inf), 0.0)
        self.assertTrue(math.isnan(pure_impls.rsqrt32(-1.0)))
        self.assertEqual(pure_impls.exp32(-math.inf), 0.0)


# ---- the worker as a process ----------------------------------------------------------------

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
