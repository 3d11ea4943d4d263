#!/usr/bin/env python3
"""A Markdown tolerance summary of kverify result files: per case and output, the verdict, the
largest error in output ulps, the largest and 99th-percentile error as a fraction of the
admissible half-width, and the bias (mean signed error in ulps); then the failures with their
replay strings, and where two impls of one op got the same inputs, whether their bits agree."""
import collections
import json
import sys


def load(paths):
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                for n, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        print(f"<!-- {p}:{n}: malformed line skipped ({e}) -->")
        except OSError as e:
            print(f"<!-- {p}: {e} -->")
    return rows


def attrs_brief(r):
    a = r.get("attrs", {})
    keep = {k: v for k, v in a.items() if k in ("mode", "m_rounding", "label_smoothing", "reduction")}
    out = []
    for k, v in sorted(keep.items()):
        if k == "label_smoothing":
            v = f"{float.fromhex(v):g}" if v.startswith(("0x", "-0x")) else v
        out.append(f"{k}={v}")
    return " ".join(out)


def fmt(x, digits=3):
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    return f"{x:.{digits}g}"


def main(paths):
    rows = load(paths)
    if not rows:
        print("no results")
        return 1
    first = rows[0]
    print("# Tolerance summary\n")
    print(f"- device: {first.get('device_name', '?')}; kverify {first.get('build', {}).get('commit', '?')}")
    counts = collections.Counter(r.get("verdict", "?") for r in rows)
    print(f"- {len(rows)} cases: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print("- columns per output: max error in output ulps / 99th percentile and max of error over the admissible "
          "half-width (1 = the edge of what the declared contract allows) / bias = mean signed error in ulps\n")
    print("| op | impl | dtype | shape | attrs | verdict | output: max ulps / p99, max ratio / bias ulps |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        outs = []
        for name, o in sorted(r.get("outputs", {}).items()):
            fails = f" **{o['n_fail']} fail**" if o.get("n_fail") else ""
            outs.append(f"{name}: {fmt(o.get('max_ulps', 0))} / {fmt(o.get('p99_ratio', 0))}, "
                        f"{fmt(o.get('max_ratio', 0))} / {fmt(o.get('bias_ulps', 0), 2)}{fails}")
        shape = "x".join(str(d) for d in r.get("shape", []))
        cfg = ",".join(f"{k}={v}" for k, v in r.get("config", {}).items())
        print(f"| {r.get('op')} | {r.get('impl')}{' ' + cfg if cfg else ''} | {r.get('dtype')} | {shape} | "
              f"{attrs_brief(r)} | {r.get('verdict')} | {'<br>'.join(outs) or r.get('reason', '')} |")
    bad = [r for r in rows if r.get("verdict") in ("fail", "error")]
    if bad:
        print("\n## Failures and errors\n")
        print("(an external impl replays with the run's `--worker` or `--plugin` added)\n")
        for r in bad:
            print(f"- {r.get('verdict')}: {r.get('reason', '')}  \n  `kverify replay '{r.get('case')}'`")
    # Bits of impls that saw the same inputs (same input identity), per output.
    groups = collections.defaultdict(list)
    for r in rows:
        if r.get("verdict") in ("pass", "fail", "unverifiable"):
            groups[(r.get("op"), r.get("input_id"))].append(r)
    lines = []
    for (op, _), rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len({r["impl"] for r in rs}) < 2:
            continue
        for name in sorted(rs[0].get("outputs", {})):
            digests = collections.defaultdict(list)
            for r in rs:
                d = r["outputs"].get(name, {}).get("digest", {}).get("xxh64")
                cfg = ",".join(f"{k}={v}" for k, v in r.get("config", {}).items())
                digests[d].append(r["impl"] + (f"[{cfg}]" if cfg else ""))
            r0 = rs[0]
            shape = "x".join(str(d) for d in r0.get("shape", []))
            verdict = "identical bits" if len(digests) == 1 else " vs ".join("+".join(v) for v in digests.values())
            lines.append(f"| {op} | {r0.get('dtype')} | {shape} | {attrs_brief(r0)} | {name} | {verdict} |")
    if lines:
        print("\n## Same inputs, different impls: do the bits agree?\n")
        print("| op | dtype | shape | attrs | output | bits |")
        print("|---|---|---|---|---|---|")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
