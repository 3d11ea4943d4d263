#!/usr/bin/env python3
"""Summarize a fuzz campaign's results.jsonl (too large to publish whole): verdict counts
per op and impl, the build commit and device, and every line that is not a pass (fail,
error, unverifiable, skip) kept whole in not-pass.jsonl.

usage: campaign_summary.py RESULTS.jsonl OUTDIR [--title T]
writes OUTDIR/summary.json, OUTDIR/summary.md, OUTDIR/not-pass.jsonl
"""
import argparse
import collections
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("outdir")
    ap.add_argument("--title", default="fuzz campaign")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    per = collections.defaultdict(collections.Counter)
    verdicts = collections.Counter()
    commits, devices, seeds, malformed = set(), set(), set(), 0
    reasons = collections.Counter()
    with open(a.results) as f, open(os.path.join(a.outdir, "not-pass.jsonl"), "w") as bad:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                malformed += 1
                continue
            v = j.get("verdict", "?")
            verdicts[v] += 1
            per[(j.get("op", "?"), j.get("impl", "?"))][v] += 1
            commits.add((j.get("build") or {}).get("commit", "?"))
            devices.add(j.get("device_name", "?"))
            seeds.add((j.get("fuzz") or {}).get("seed"))
            if v != "pass":
                bad.write(line if line.endswith("\n") else line + "\n")
                # The reason's kind, without the numbers that make each one unique.
                reasons[(v, j.get("op", "?"), (j.get("reason") or "")[:60])] += 1
    total = sum(verdicts.values())
    s = {"title": a.title, "cases": total, "verdicts": dict(verdicts), "malformed_lines": malformed,
         "commits": sorted(c for c in commits if c), "devices": sorted(d for d in devices if d),
         "seeds": sorted(x for x in seeds if x is not None),
         "per_op_impl": [{"op": o, "impl": i, **dict(c)} for (o, i), c in sorted(per.items())],
         "not_pass_reasons": [{"verdict": v, "op": o, "reason": r, "count": n}
                              for (v, o, r), n in reasons.most_common()]}
    with open(os.path.join(a.outdir, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    cols = sorted(verdicts)
    with open(os.path.join(a.outdir, "summary.md"), "w") as f:
        f.write(f"# {a.title}\n\n{total} cases: " + ", ".join(f"{verdicts[c]} {c}" for c in cols) +
                f"; commits {', '.join(s['commits'])}; devices {', '.join(s['devices'])}\n\n")
        f.write("| op | impl | " + " | ".join(cols) + " |\n|" + "---|" * (len(cols) + 2) + "\n")
        for (o, i), c in sorted(per.items()):
            f.write(f"| {o} | {i} | " + " | ".join(str(c.get(x, 0)) for x in cols) + " |\n")
        if reasons:
            f.write("\n## Not passed, by kind\n\n| verdict | op | reason (first 60 chars) | count |\n|---|---|---|---|\n")
            for (v, o, r), n in reasons.most_common():
                f.write(f"| {v} | {o} | {r.replace('|', '/')} | {n} |\n")
    print(json.dumps({k: s[k] for k in ("cases", "verdicts", "malformed_lines", "commits")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
