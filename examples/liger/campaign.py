"""Every Liger impl here under kverify.check on the GPU, one shard of a campaign:

    PYTHONPATH=python:examples/liger:<liger>/src KVERIFY_LIB=<release>/libkverify_c.so \\
        python3 examples/liger/campaign.py OUT --groups rms_norm,softmax --cases 2000 --shard 3/16

runs, for each impl of the named op groups (default: all), Liger's own test shapes and the seed
shapes (liger_shapes.json, the curated tier) and `cases` generated cases of indices = i mod N,
into OUT/<impl>/shard-<i>-of-<N>/, and writes OUT/<impl>/shard-<i>-of-<N>/check.json (counts,
the failures' messages). With --step K the impls take turns: each campaign is extended by K
cases (kverify's resume) until it has `cases`, so a run stopped at a time limit leaves every
impl with about as many cases; each shard starts at a different impl, so side-by-side shards
compile different Triton kernels first. campaign.sh runs N shards side by side and joins them
(kverify merge). Exit 0 when every check passed or declined, 1 when one failed."""

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


def run_one(a, name, fn, op, contract, accepts, cases, out, resume):
    """One impl's campaign in this shard (OUT/<impl>/<shard>), extended to `cases`; 1 if a case failed."""
    t0 = time.time()
    try:
        res, note = kverify.check(fn, op, contract=contract, impl=name, cases=cases, seed=a.seed, shard=a.shard,
                                  max_elements=a.max_elements, curated=a.curated, out=out, device="cuda",
                                  raise_on_failure=False, case_timeout=a.case_timeout, max_shrink_runs=a.shrink_runs,
                                  resume=resume,
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
    return 1 if fails else 0


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
    ap.add_argument("--step", type=int, default=0, help="extend each impl's campaign by this many cases in turn "
                    "(default: all `cases` at once)")
    ap.add_argument("--shrink-runs", type=int, default=200, help="cases run to shrink one failure (0: failures "
                    "kept as drawn; classify.py and findings.py explain them)")
    ap.add_argument("--case-timeout", type=float, default=300.0, help="seconds one Liger call may take (Triton's "
                    "compile included) before the case is an error")
    a = ap.parse_args(argv)
    groups = [g for g in a.groups.split(",") if g]
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        print(f"campaign.py: unknown group {bad[0]!r}; the groups are {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    if a.cases < 0 or a.step < 0 or a.shrink_runs < 0:
        print("campaign.py: --cases, --step and --shrink-runs take counts >= 0", file=sys.stderr)
        return 2
    i, _, n = a.shard.partition("/")
    if not (i.isdigit() and n.isdigit() and int(i) < int(n)):
        print(f"campaign.py: --shard takes i/N with 0 <= i < N, not {a.shard!r}", file=sys.stderr)
        return 2
    todo = [x for x in impls(groups) if not a.impls or x[0] in a.impls.split(",")]
    k = int(i) % max(1, len(todo))
    todo = todo[k:] + todo[:k]
    code = 0
    steps = list(range(a.step, a.cases, a.step)) + [a.cases] if a.step else [a.cases]
    begun = set()  # the campaigns this run started: extended by the next step
    for upto in steps:
        for name, fn, op, contract, accepts in todo:
            out = os.path.join(a.out, name, f"shard-{i}-of-{n}")
            resume = os.path.exists(os.path.join(out, "campaign.json")) and (a.resume or name in begun)
            begun.add(name)
            code |= run_one(a, name, fn, op, contract, accepts, upto, out, resume)
    return code


if __name__ == "__main__":
    sys.exit(main())
