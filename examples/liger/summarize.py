"""The table of a Liger campaign (campaign.sh): per impl, its cases, verdicts, the declined
cases with their reasons, and its failures, from OUT/<impl>/merged.jsonl (else its
shards' results.jsonl, each case once by campaign seed and index); written to OUT/summary.json
and OUT/summary.md. Usage: summarize.py OUT"""

import collections
import glob
import json
import os
import sys


def lines_of(d):
    """The impl's result lines: merged/, else every shard's, each (seed, index) once."""
    merged = os.path.join(d, "merged.jsonl")
    paths = [merged] if os.path.exists(merged) else sorted(glob.glob(os.path.join(d, "shard-*", "results.jsonl")))
    seen = set()
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                j = json.loads(line)
                fz = j.get("fuzz") or {}
                key = (fz.get("seed"), fz.get("index"), j.get("case"))
                if key in seen:
                    continue
                seen.add(key)
                yield j


def impl_summary(d):
    verdicts, reasons, fails, tiers = collections.Counter(), collections.Counter(), [], collections.Counter()
    for j in lines_of(d):
        v = j.get("verdict", "error")
        verdicts[v] += 1
        tiers[(j.get("fuzz") or {}).get("tier", "")] += 1
        if v in ("skip", "unverifiable"):
            reasons[f"{v}: {j.get('reason', '')[:160]}"] += 1
        if v in ("fail", "error"):
            fails.append({"case": j.get("case"), "verdict": v, "reason": j.get("reason", "")[:400]})
    return {"cases": sum(verdicts.values()), "verdicts": dict(verdicts), "curated": tiers.get("curated", 0),
            "not_passing": dict(reasons.most_common(12)), "failures": fails[:50]}


def main(out):
    rows = {}
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        if glob.glob(os.path.join(d, "*", "results.jsonl")) or os.path.exists(os.path.join(d, "merged.jsonl")):
            rows[name] = impl_summary(d)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
    md = ["| impl | cases | pass | fail | error | unverifiable | skip |", "|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        v = r["verdicts"]
        md.append(f"| {name} | {r['cases']} | " + " | ".join(str(v.get(k, 0)) for k in
                                                            ("pass", "fail", "error", "unverifiable", "skip")) + " |")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 1 if any(r["verdicts"].get("fail") or r["verdicts"].get("error") for r in rows.values()) else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: summarize.py OUT", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
