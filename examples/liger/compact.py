"""A Liger campaign's results made small enough to publish: a campaign of 100,000s of cases writes
about 4.4 KB a case (600 MB), where one row a case and the whole line of the cases worth reading
again carry what a reader needs. Writes DEST/verdicts.tsv.xz (one row a case: impl, op, tier,
shard, index, case_id, verdict, the worst element's ratio to its admissible half-width, seconds)
and DEST/lines.jsonl.xz (for every case that did not pass, its line less what is alike on every
line or only a byte-for-byte comparison reads: slim()). Cases are read once each
(summarize.lines_of). Usage: compact.py OUT DEST"""

import json
import lzma
import os
import sys

from summarize import lines_of

COLUMNS = ["impl", "op", "tier", "shard", "index", "case_id", "verdict", "worst_ratio", "total_s"]


def worst_ratio(j):
    r = [o.get("max_ratio") for o in (j.get("outputs") or {}).values() if isinstance(o, dict)]
    r = [x for x in r if isinstance(x, (int, float))]
    return f"{max(r):.4g}" if r else ""


KEEP = ["case", "case_id", "impl", "op", "verdict", "reason", "fuzz", "replay", "repro", "shape", "dtypes", "attrs",
        "contract", "outputs"]
KEEP_OUT = ["n", "n_fail", "n_unverifiable", "n_nan_mismatch", "n_unwritten", "first_fail_index", "max_ratio", "max_ulps",
            "bound", "bias_ulps"]


def slim(j):
    """What a reader of a failure needs: the case, its verdict and reason, the contract and each
    output's worst element; the device and build, alike on every line, are in the README."""
    s = {k: j[k] for k in KEEP if k in j}
    s["outputs"] = {k: {a: o[a] for a in KEEP_OUT if a in o} if isinstance(o, dict) else o
                    for k, o in (j.get("outputs") or {}).items()}
    s["total_s"] = (j.get("timings") or {}).get("total_s")
    return s


def row(impl, j):
    fz = j.get("fuzz") or {}
    return [impl, j.get("op", ""), fz.get("tier", ""), fz.get("shard", ""), str(fz.get("index", "")),
            j.get("case_id", ""), j.get("verdict", "error"), worst_ratio(j),
            f"{(j.get('timings') or {}).get('total_s', 0):.3f}"]


def main(out, dest):
    os.makedirs(dest, exist_ok=True)
    n = kept = 0
    with lzma.open(os.path.join(dest, "verdicts.tsv.xz"), "wt", preset=9) as tsv, \
            lzma.open(os.path.join(dest, "lines.jsonl.xz"), "wt", preset=9) as full:
        tsv.write("\t".join(COLUMNS) + "\n")
        for impl in sorted(os.listdir(out)):
            if not (impl.startswith("liger_") and os.path.isdir(os.path.join(out, impl))):
                continue
            for j in lines_of(os.path.join(out, impl)):
                tsv.write("\t".join(row(impl, j)) + "\n")
                n += 1
                if j.get("verdict") != "pass":
                    full.write(json.dumps(slim(j), sort_keys=True) + "\n")
                    kept += 1
    print(f"compact.py: {n} cases in verdicts.tsv.xz, {kept} whole lines in lines.jsonl.xz")
    return 0 if n else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: compact.py OUT DEST", file=sys.stderr)
        sys.exit(2)
    if not os.path.isdir(sys.argv[1]):
        print(f"compact.py: {sys.argv[1]} is not a campaign directory", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
