"""Each failing case of a Liger campaign assigned to the Liger behaviour that explains it
(findings.py confirms each by an fp64 emulation), or to `unexplained`:

- softcap_padding: cross_entropy / FLCE with softcap > 0 and V not a multiple of the kernel's
  block (min(32768, next_pow2(V))): the masked lanes, loaded as -inf, are softcapped to
  -softcap and enter the softmax's sum (softcap.py confirms each cross_entropy and FLCE forward
  failure). In FLCE's backward in bf16/fp16, where findings 2 or 3 act on the same inputs, the
  class is softcap_padding_or_<that one>.
- ce_smoothing_cancellation: cross_entropy forward with label smoothing: Liger sums -eps * x over
  the row and adds label_smoothing * lse, two terms of the logits' size that cancel (smoothing.py
  reproduces each such failure bit for bit).
- flce_scale_after_products: FLCE backward under mean or sum in bf16/fp16: dx and dW are
  rounded to x's dtype, then multiplied by dloss (element_mul_kernel) and rounded again.
- flce_none_dloss_rounded: FLCE backward under none in bf16/fp16: dloss is cast to x's dtype
  and the logits' gradient, already stored in x's dtype, is multiplied by it (three roundings
  where kverify's site flce.grad has one).

flce_bwd.py checks the FLCE backward ones case by case.

Usage: classify.py OUT (a campaign directory); writes OUT/classified.json, prints the counts;
exit 1 if any failure is unexplained."""

import collections
import json
import math
import os
import sys

from summarize import lines_of


def _real(attrs, name):
    v = attrs.get(name, "0x0p+0")
    return float.fromhex(v) if v.startswith(("0x", "-0x")) else float(v)


def liger_pad(v):
    """The lanes past V in the last block of Liger's cross-entropy kernel (block min(32768, next_pow2(V)))."""
    block = min(32768, 1 << (v - 1).bit_length())
    return math.ceil(v / block) * block - v


def explain(j):
    op, a, d = j["op"], j.get("attrs", {}), j.get("dtypes", {})
    base = op.rsplit(".", 1)[0]
    padded = False
    if base in ("cross_entropy", "fused_linear_cross_entropy") and _real(a, "softcap") > 0:
        v = int(j["shape"][-1])
        padded = liger_pad(v) != 0
    flce_rounding = None
    if op == "fused_linear_cross_entropy.bwd" and d.get("x") in ("bf16", "fp16"):
        flce_rounding = "flce_none_dloss_rounded" if a.get("reduction") == "none" else "flce_scale_after_products"
    if padded and flce_rounding:  # both defects act on these inputs: not told apart by them
        return "softcap_padding_or_" + flce_rounding
    if padded:
        return "softcap_padding"
    if op == "cross_entropy.fwd" and _real(a, "label_smoothing") > 0:
        return "ce_smoothing_cancellation"
    if flce_rounding:
        return flce_rounding
    return "unexplained"


class Classified:
    """Failures counted by (impl, finding), with up to `keep` case lines per finding."""

    def __init__(self, keep):
        self.counts, self.examples, self.keep = collections.Counter(), collections.defaultdict(list), keep

    def add(self, impl, j):
        why = explain(j)
        self.counts[(impl, why)] += 1
        if len(self.examples[why]) < self.keep:
            self.examples[why].append(j["case"])
        return why

    def unexplained(self):
        return any(k[1] == "unexplained" for k in self.counts)

    def write(self, path):
        res = {"counts": {f"{k[0]} {k[1]}": v for k, v in sorted(self.counts.items())}, "examples": self.examples}
        with open(path, "w") as f:
            json.dump(res, f, indent=1)


def main(out):
    c = Classified(20)
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        if not os.path.isdir(d) or not name.startswith("liger_"):
            continue
        for j in lines_of(d):
            if j.get("verdict") == "fail":
                c.add(name, j)
    c.write(os.path.join(out, "classified.json"))
    for k, v in sorted(c.counts.items()):
        print(f"{v:6d}  {k[0]} {k[1]}")
    return 1 if c.unexplained() else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: classify.py OUT", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
