#!/usr/bin/env python3
"""Two fuzz campaigns' results hold the same (index, case, verdict) set, each index once.

usage: same_campaign.py EXPECTED.jsonl ACTUAL.jsonl

EXPECTED is the single-process campaign, ACTUAL the merged shards of the same seed. Prints
the counts, then each duplicate, missing or extra entry (at most 20 of each); exit 0 when
the sets are equal and neither file repeats an index, 1 otherwise, 2 on bad input.
"""
import json
import sys
from collections import Counter


def entries(path):
    out = []
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                r = json.loads(line)
                if "fuzz" not in r:
                    raise ValueError(f"line {n} is not a fuzz result (no 'fuzz' object)")
                out.append((r["fuzz"]["index"], r["case"], r["verdict"]))
    except (OSError, ValueError, KeyError) as e:
        print(f"same_campaign.py: {path}: {e}", file=sys.stderr)
        sys.exit(2)
    return out


def show(what, items):
    items = sorted(items)
    for e in items[:20]:
        print(f"  {what}: index {e[0]} {e[2]} {e[1]}")
    if len(items) > 20:
        print(f"  ... {len(items) - 20} more {what}")


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    expected, actual = entries(argv[1]), entries(argv[2])
    ok = True
    for name, es in (("expected", expected), ("actual", actual)):
        dup = [i for i, k in Counter(e[0] for e in es).items() if k > 1]
        if dup:
            ok = False
            print(f"{name}: {len(dup)} index(es) more than once: {sorted(dup)[:20]}")
    missing, extra = set(expected) - set(actual), set(actual) - set(expected)
    show("missing", missing)
    show("extra", extra)
    ok = ok and not missing and not extra
    verdicts = Counter(e[2] for e in actual)
    print(f"{'same' if ok else 'DIFFERENT'}: expected {len(expected)} entries, actual {len(actual)} "
          f"({', '.join(f'{k} {v}' for k, v in sorted(verdicts.items()))}); "
          f"{len(missing)} missing, {len(extra)} extra")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
