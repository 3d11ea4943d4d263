#!/usr/bin/env python3
"""fp64 emulation of one dW element of an FLCE backward reproducer bundle (kverify's
<out>/repro/<case_id>/tensors.safetensors), for grad_rounding=x_dtype without bias, label
smoothing or z-loss: G from the logits (softcap S), rounded to x's dtype, then
dW[v, h] = sum_r G16[r, v] * x[r, h] with exact products. Prints the terms, their exact sum,
its fp32 rounding (what a correctly rounded accumulation gives), the kernel's output and the
admissible interval, and the grid (2^q) to which truncating the smaller terms reproduces the
output, if one does.

usage: flce_dw_emulate.py tensors.safetensors V H [--softcap S]
"""
import argparse
import json
import math
import struct
from fractions import Fraction

import numpy as np


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]

    def get(name):
        h = hdr[name]
        a, b = h["data_offsets"]
        buf = data[a:b]
        if h["dtype"] == "BF16":
            arr = (np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype={"F16": np.float16, "F32": np.float32, "F64": np.float64, "I32": np.int32}[h["dtype"]])
        return arr.reshape(h["shape"])
    return get


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("v", type=int)
    ap.add_argument("h", type=int)
    ap.add_argument("--softcap", type=float, default=0.0)
    a = ap.parse_args()
    get = load(a.bundle)
    x, w = get("x").astype(np.float64), get("weight").astype(np.float64)
    t, dloss = get("target"), float(get("dloss").astype(np.float64).reshape(-1)[0])
    bt = x.shape[0]
    z = x @ w.T
    zc = a.softcap * np.tanh(z / a.softcap) if a.softcap else z
    terms = []
    for r in range(bt):
        p = np.exp(zc[r] - zc[r].max())
        p /= p.sum()
        g = p.copy()
        g[t[r]] -= 1
        if a.softcap:
            g *= 1 - np.tanh(z[r] / a.softcap) ** 2
        g = g / bt * dloss  # reduction=mean over the rows
        g16 = float(np.float16(g[a.v]))
        terms.append(Fraction(g16) * Fraction(float(x[r, a.h])))
        print(f"row {r}: G {g[a.v]:.9e} -> fp16 {g16:.9e}, x {x[r, a.h]:.9g}, product {float(terms[-1]):.9e}")
    exact = sum(terms, Fraction(0))
    out = Fraction(float(get("dweight")[a.v, a.h]))
    print(f"exact sum {float(exact):.10e}, fp32 RN {float(np.float32(float(exact))):.10e}")
    print(f"kernel    {float(out):.10e} (out - exact {float(out - exact):.4e})")
    print(f"admissible [{get('lo.dweight')[a.v, a.h]:.10e}, {get('hi.dweight')[a.v, a.h]:.10e}], reference {get('ref.dweight')[a.v, a.h]:.10e}")
    big = max(terms, key=abs)
    for q in range(-60, 0):
        step = Fraction(2) ** q
        trunc = big + sum((math.trunc(s / step) * step for s in terms if s is not big), Fraction(0))
        if trunc == out:
            e = math.floor(math.log2(abs(float(big))))
            print(f"the output is the largest term plus the others truncated toward zero to multiples of 2^{q} "
                  f"({e - q} bits below the largest term's leading bit, 2^{e})")
            break


if __name__ == "__main__":
    main()
