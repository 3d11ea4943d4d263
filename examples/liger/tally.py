"""The published table of a Liger campaign made of several runs (one campaign seed each), from
compact.py's folders: per impl and per op group, the cases and their verdicts, and each failure
assigned to its finding (classify.explain). A case a run's stop signal interrupted (an `error`
that is the last case of its impl in its shard, the impl's compiler child killed by the same
SIGINT: builds before the campaign abandoned such cases itself) is counted apart, as abandoned.
Writes DEST/summary.json, DEST/summary.md, DEST/classified.json and DEST/sample.jsonl (up to 40
lines per impl, verdict and finding, for `kverify report`); exit 1 on an unexplained failure or
an error that is not abandoned.

    tally.py DEST SEED_DIR...      (each SEED_DIR holds verdicts.tsv.xz and lines.jsonl.xz)"""

import collections
import json
import lzma
import os
import sys

from classify import Classified

VERDICTS = ["pass", "fail", "unverifiable", "error", "skip"]


def read_run(d):
    with lzma.open(os.path.join(d, "verdicts.tsv.xz"), "rt") as f:
        head, *rows = [line.rstrip("\n").split("\t") for line in f]
    rows = [dict(zip(head, r)) for r in rows]
    with lzma.open(os.path.join(d, "lines.jsonl.xz"), "rt") as f:
        full = {j["case_id"]: j for j in map(json.loads, f)}
    last = {(r["impl"], r["shard"]): i for i, r in enumerate(rows)}
    for i, r in enumerate(rows):
        j = full.get(r["case_id"], {})
        if r["verdict"] != "pass" and not j:
            raise SystemExit(f"tally.py: {d}: no line in lines.jsonl.xz for the {r['verdict']} case {r['case_id']}")
        r["line"] = j
        r["abandoned"] = (r["verdict"] == "error" and last[(r["impl"], r["shard"])] == i
                          and "error code -2" in j.get("reason", ""))
    return rows


def group(op):
    return op.rsplit(".", 1)[0]


def main(dest, runs):
    impls = collections.defaultdict(collections.Counter)
    groups = collections.defaultdict(collections.Counter)
    classified, abandoned, stray = Classified(10), [], []
    sample, taken = [], collections.Counter()
    for d in runs:
        for r in read_run(d):
            if r["abandoned"]:
                abandoned.append({"run": os.path.basename(d.rstrip("/")), "case": r["line"].get("case")})
                continue
            for c in (impls[r["impl"]], groups[group(r["op"])]):
                c[r["verdict"]] += 1
                c["cases"] += 1
                c["curated"] += r["tier"] == "curated"
            if r["verdict"] == "error":
                stray.append(r["line"].get("case"))
            why = classified.add(r["impl"], r["line"]) if r["verdict"] == "fail" else ""
            key = (r["impl"], r["verdict"], why)
            if r["verdict"] != "pass" and taken[key] < 40:
                taken[key] += 1
                sample.append(r["line"])
    os.makedirs(dest, exist_ok=True)
    summary = {"runs": [os.path.basename(d.rstrip("/")) for d in runs], "impls": impls, "groups": groups,
               "abandoned": abandoned, "errors": stray}
    with open(os.path.join(dest, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    classified.write(os.path.join(dest, "classified.json"))
    with open(os.path.join(dest, "sample.jsonl"), "w") as f:
        f.write("".join(json.dumps(j) + "\n" for j in sample))
    md = []
    for title, table in (("op group", groups), ("impl", impls)):
        md += [f"| {title} | cases | curated | " + " | ".join(VERDICTS) + " |", "|---" * (3 + len(VERDICTS)) + "|"]
        md += [f"| {k} | {c['cases']:,} | {c['curated']:,} | " + " | ".join(f"{c[v]:,}" for v in VERDICTS) + " |"
               for k, c in sorted(table.items())]
        md.append("")
    md.append(f"{len(abandoned)} cases abandoned at a run's stop (not counted).")
    with open(os.path.join(dest, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    for k, v in sorted(classified.counts.items()):
        print(f"{v:7,d}  {k[0]} {k[1]}")
    return 1 if stray or classified.unexplained() else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: tally.py DEST SEED_DIR...", file=sys.stderr)
        sys.exit(2)
    missing = [d for d in sys.argv[2:] for f in ("verdicts.tsv.xz", "lines.jsonl.xz")
               if not os.path.isfile(os.path.join(d, f))]
    if missing:
        print(f"tally.py: {missing[0]} has no verdicts.tsv.xz and lines.jsonl.xz (compact.py's output)", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
