"""Liger-Kernel's RoPE (src/liger_kernel/ops/rope.py: rope_forward, rope_backward) as kverify
impls on the GPU: HF's rotate-half layout with one (1, S, D) cos/sin table (positions=1d), q
and k of their own head counts (GQA), rotated in place.

Read off the kernel: it loads the first half of cos and sin only (HF tables have equal halves;
kverify's generator keeps that precondition), casts q and k to the table's dtype and computes
q1 * cos - q2 * sin and q2 * cos + q1 * sin in it (bf16 tables: every product and sum rounds
to bf16; fp32 tables: fp32, contracted to FMA), stored in q's dtype. The contract's
accumulator is the table's dtype. Declined: interleaved pairs, 3d and mrope positions (not
what this kernel computes; Liger's mrope is a kernel of its own), q in fp32 with narrower
tables (the kernel rounds q to the table's dtype before it rotates), tables of two dtypes, and
tiles past 32768 elements: one program holds every head of a token, a tile of
next_pow2(heads) x next_pow2(D)/2 (Liger's own test shapes reach 16384); at 512 x 1024
(396 heads of D = 1536, a shape the fuzzer drew) ptxas ran for over 8 minutes without
finishing, the compile-time cliff of the seed document (seeds/000), so larger tiles are
declined as unusable rather than judged."""

import kverify
from liger_kernel.ops.rope import rope_backward, rope_forward

from _liger import FLOATS, one_dtype, triton

ACCEPTS = {"dtypes": {"q": FLOATS, "k": FLOATS, "cos": FLOATS, "sin": FLOATS, "q_out": FLOATS, "k_out": FLOATS},
           "attrs": {"layout": ["rotate_half"], "positions": ["1d"]}}
ACCEPTS_BWD = {"dtypes": {"dq_out": FLOATS, "dk_out": FLOATS, "cos": FLOATS, "sin": FLOATS, "dq": FLOATS,
                          "dk": FLOATS}, "attrs": {"layout": ["rotate_half"], "positions": ["1d"]}}
_BITS = {"fp32": 32, "bf16": 16, "fp16": 16}


TILE_LIMIT = 32768


def _pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


def _contract(case, q, k, outs):
    d = case["dtypes"]
    b, s, hq, hd = (int(v) for v in case["shape"])
    hk = int(case["attr_values"].get("k_heads") or 0) or hq
    tile = max(_pow2(hq), _pow2(hk)) * _pow2(hd) // 2
    if tile > TILE_LIMIT:
        raise kverify.Unsupported(f"a tile of {tile} elements (next_pow2 of {max(hq, hk)} heads x next_pow2(D)/2): "
                                  f"Liger's rope holds every head of a token in one program, and ptxas does not finish "
                                  f"such kernels in minutes (see rope.py)")
    one_dtype(case, ["cos", "sin"], "cos and sin of two dtypes: Liger computes in sin's dtype")
    one_dtype(case, [q, k] + outs, "Liger rotates q and k in place: q, k and their outputs of one dtype")
    if _BITS[d[q]] > _BITS[d["cos"]] or (d[q] != d["cos"] and d["cos"] != "fp32"):
        raise kverify.Unsupported(f"{q} in {d[q]} with {d['cos']} tables: Liger rounds it to the tables' dtype first")
    return triton(d["cos"])


def contract(case):
    return _contract(case, "q", "k", ["q_out", "k_out"])


def contract_bwd(case):
    return _contract(case, "dq_out", "dk_out", ["dq", "dk"])


def liger_rope_fwd(t, case):
    # kverify's q is (B, S, H, D); Liger's is (B, H, S, D) and it transposes back itself.
    q, k, _, _ = rope_forward(t["q"].transpose(1, 2), t["k"].transpose(1, 2), t["cos"], t["sin"])
    return {"q_out": q.transpose(1, 2), "k_out": k.transpose(1, 2)}


def liger_rope_bwd(t, case):
    dq, dk = rope_backward(t["dq_out"].transpose(1, 2), t["dk_out"].transpose(1, 2), t["cos"], t["sin"])
    return {"dq": dq.transpose(1, 2), "dk": dk.transpose(1, 2)}


IMPLS = [("liger_rope_fwd", liger_rope_fwd, "rope.fwd", contract, ACCEPTS),
         ("liger_rope_bwd", liger_rope_bwd, "rope.bwd", contract_bwd, ACCEPTS_BWD)]
