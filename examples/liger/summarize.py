"""The table of a Liger campaign (campaign.sh): per impl, its cases, verdicts, the declined
cases with their reasons, and its failures, from OUT/<impl>/merged/results.jsonl; written to
OUT/summary.json and OUT/summary.md. Usage: summarize.py OUT"""

import collections
import json
import os
import sys


def impl_summary(path):
    verdicts, reasons, fails, tiers = collections.Counter(), collections.Counter(), [], collections.Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            j = json.loads(line)
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
        p = os.path.join(out, name, "merged", "results.jsonl")
        if os.path.exists(p):
            rows[name] = impl_summary(p)
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
