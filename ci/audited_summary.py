#!/usr/bin/env python3
"""Declared against audited contracts, case by case (ci/gpu_contracts.sh): the two runs'
verdicts, each reduced axis's n_eff (declared -> measured, or why declared stands), and per
output the enclosure half-width at the worst element of each run and their ratio.
Usage: audited_summary.py DECLARED.jsonl AUDITED.jsonl (markdown on stdout)."""
import json
import sys


def lines(path):
    with open(path) as f:
        return {j["case"]: j for j in map(json.loads, filter(str.strip, f))}


def hw(j, out):
    return j.get("outputs", {}).get(out, {}).get("bound", {}).get("contract_half_width")


def main(declared, audited):
    d, a = lines(declared), lines(audited)
    print("| impl | op | dtype | config | verdict declared / audited | n_eff per axis | output: half-width declared / audited (ratio) |")
    print("|---|---|---|---|---|---|---|")
    for case, jd in d.items():
        ja = a.get(case)
        if ja is None:
            continue
        axes = []
        for axis, src in sorted(ja.get("contract_source", {}).items()):
            n0 = jd["contract"]["reductions"][axis]["n_eff"]
            n1 = ja["contract"]["reductions"][axis]["n_eff"]
            axes.append(f"{axis} {n0}->{n1}" if src == "measured" else f"{axis} {n0} ({src[:60]})")
        outs = []
        for out in sorted(jd.get("outputs", {})):
            h0, h1 = hw(jd, out), hw(ja, out)
            if isinstance(h0, (int, float)) and isinstance(h1, (int, float)) and h0 > 0:
                outs.append(f"{out}: {h0:.3g} / {h1:.3g} ({h1 / h0:.3g})")
        cfg = ",".join(f"{k}={v}" for k, v in sorted(jd.get("config", {}).items()))
        print(f"| {jd['impl']} | {jd['op']} | {jd.get('dtype', '')} | {cfg} | {jd['verdict']} / {ja['verdict']} | "
              f"{'; '.join(axes)} | {'; '.join(outs)} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
