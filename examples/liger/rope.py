"""Liger-Kernel's RoPE (src/liger_kernel/ops/rope.py: rope_forward, rope_backward) as kverify
impls on the GPU: HF's rotate-half layout with one (1, S, D) cos/sin table (positions=1d), q
and k of their own head counts (GQA), rotated in place.

Read off the kernel: it loads the first half of cos and sin only (HF tables have equal halves;
kverify's generator keeps that precondition), casts q and k to the table's dtype and computes
q1 * cos - q2 * sin and q2 * cos + q1 * sin in it (bf16 tables: every product and sum rounds
to bf16; fp32 tables: fp32, contracted to FMA), stored in q's dtype. The contract's
accumulator is the table's dtype. Declined: interleaved pairs, 3d and mrope positions (not
what this kernel computes; Liger's mrope is a kernel of its own), q in fp32 with narrower
tables (the kernel rounds q to the table's dtype before it rotates), and tables of two dtypes."""

import kverify
from liger_kernel.ops.rope import rope_backward, rope_forward

from _liger import FLOATS, triton

ACCEPTS = {"dtypes": {"q": FLOATS, "k": FLOATS, "cos": FLOATS, "sin": FLOATS, "q_out": FLOATS, "k_out": FLOATS},
           "attrs": {"layout": ["rotate_half"], "positions": ["1d"]}}
ACCEPTS_BWD = {"dtypes": {"dq_out": FLOATS, "dk_out": FLOATS, "cos": FLOATS, "sin": FLOATS, "dq": FLOATS,
                          "dk": FLOATS}, "attrs": {"layout": ["rotate_half"], "positions": ["1d"]}}
_BITS = {"fp32": 32, "bf16": 16, "fp16": 16}


def _contract(case, q, k, outs):
    d = case["dtypes"]
    if d["cos"] != d["sin"]:
        raise kverify.Unsupported("cos and sin of two dtypes: Liger computes in sin's dtype")
    if d[q] != d[k] or any(d[o] != d[q] for o in outs):
        raise kverify.Unsupported("Liger rotates q and k in place: q, k and their outputs of one dtype")
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
