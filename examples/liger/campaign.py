"""Every Liger impl here under kverify.check on the GPU, one shard of a campaign:

    PYTHONPATH=python:examples/liger:<liger>/src KVERIFY_LIB=<release>/libkverify_c.so \\
        python3 examples/liger/campaign.py OUT --groups rms_norm,softmax --cases 2000 --shard 3/16

runs, for each impl of the named op groups (default: all), Liger's own test shapes and the seed
shapes (liger_shapes.json, the curated tier) and `cases` generated cases of indices = i mod N,
into OUT/<impl>/shard-<i>-of-<N>/, and writes OUT/<impl>/shard-<i>-of-<N>/check.json (counts,
the failures' messages). campaign.sh runs N shards side by side and joins them (kverify merge).
Exit 0 when every check passed or declined, 1 when one failed."""

import argparse
import json
import os
import sys
import time

import kverify

HERE = os.path.dirname(os.path.abspath(__file__))
GROUPS = ["rms_norm", "layer_norm", "softmax", "rope", "glu", "cross_entropy", "flce"]


def impls(groups):
    out = []
    for g in groups:
        mod = __import__(g)
        out += mod.IMPLS
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--groups", default=",".join(GROUPS))
    ap.add_argument("--impls", default="", help="only these impl names (comma-separated)")
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-elements", type=int, default=1 << 20)
    ap.add_argument("--curated", default=os.path.join(HERE, "liger_shapes.json"))
    ap.add_argument("--resume", action="store_true", help="go on with the campaigns in OUT (a device call of 10 "
                    "minutes at most: run again with a larger --cases to extend)")
    ap.add_argument("--case-timeout", type=float, default=300.0, help="seconds one Liger call may take (Triton's "
                    "compile included) before the case is an error")
    a = ap.parse_args(argv)
    groups = [g for g in a.groups.split(",") if g]
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        print(f"campaign.py: unknown group {bad[0]!r}; the groups are {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    i, n = a.shard.split("/")
    code = 0
    for name, fn, op, contract, accepts in impls(groups):
        if a.impls and name not in a.impls.split(","):
            continue
        out = os.path.join(a.out, name, f"shard-{i}-of-{n}")
        t0 = time.time()
        try:
            res, note = kverify.check(fn, op, contract=contract, impl=name, cases=a.cases, seed=a.seed, shard=a.shard,
                                      max_elements=a.max_elements, curated=a.curated, out=out, device="cuda",
                                      raise_on_failure=False, case_timeout=a.case_timeout,
                                      resume=a.resume and os.path.exists(os.path.join(out, "campaign.json")),
                                      **accepts), ""
        except kverify.CheckFailed as e:  # this shard verified nothing (all declined or unverifiable)
            res, note = e.results, str(e)[:600]
        fails = [l for l in res.lines if l.get("verdict") in ("fail", "error")]
        summary = {"impl": name, "op": op, "shard": a.shard, "counts": res.counts, "seconds": round(time.time() - t0, 1),
                   "note": note,
                   "failing": [{"case": l.get("case"), "verdict": l.get("verdict"), "reason": l.get("reason", "")[:600]}
                               for l in fails[:20]]}
        with open(os.path.join(out, "check.json"), "w") as f:
            json.dump(summary, f, indent=1)
        print(json.dumps({k: summary[k] for k in ("impl", "shard", "counts", "seconds")}), flush=True)
        code |= 1 if fails else 0
    return code


if __name__ == "__main__":
    sys.exit(main())
