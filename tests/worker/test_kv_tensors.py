"""Tests of examples/worker's pure-Python parts: the safetensors codec (kv_tensors.py) and its
rounding, and the math-function claims of the pure impls' contracts (pure_impls.py). The
worker as a process: test_kv_worker.py. Standard library only:
python3 -m unittest discover -s tests/worker -v"""

import decimal
import json
import math
import os
import random
import struct
import sys
import tempfile
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


if __name__ == "__main__":
    unittest.main()
