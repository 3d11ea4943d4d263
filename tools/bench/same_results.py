#!/usr/bin/env python3
"""Before/after equivalence of two runs: the same cases, verdicts and output digests.

usage: tools/bench/same_results.py A.jsonl[.xz|.gz] B.jsonl[.xz|.gz]

Cases are matched by their replay string (`case`). For each case present on both sides it
compares the verdict, and per output tensor the verdict, the whole-tensor XXH64 digest and
the failing / unverifiable element counts. The digest of an output whose contract does not
claim `run_to_run` determinism (e.g. dW summed with atomics) may differ between two runs of
one binary: such digest differences are counted apart and do not fail the comparison.
Prints one line per difference and a summary;
exit 0 when the two runs hold the same cases with identical results, 1 otherwise, 2 on bad
input. (`kverify compare` gives the per-group view; this is the per-case one.)
"""
import gzip
import json
import lzma
import sys


def load(path):
    opener = lzma.open if path.endswith(".xz") else gzip.open if path.endswith(".gz") else open
    out = {}
    with opener(path, "rt") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON ({e})")
            key = r.get("case")
            if key is None:
                sys.exit(f"{path}:{n}: a result line without `case`")
            if key in out:
                sys.exit(f"{path}:{n}: case appears twice: {key}")
            out[key] = r
    return out


def repeatable(r, name):
    """Whether the contract claims this output's bits repeat run to run."""
    det = ((r.get("contract") or {}).get("determinism") or {})
    return name not in det or "run_to_run" in det[name]


def facts(r, digests=True):
    outs = {}
    for name, o in sorted((r.get("outputs") or {}).items()):
        d = (o.get("digest") or {}).get("xxh64") if digests and repeatable(r, name) else None
        outs[name] = (o.get("verdict"), d, o.get("n_fail"), o.get("n_unverifiable"))
    return r.get("verdict"), outs


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        a, b = load(argv[1]), load(argv[2])
    except OSError as e:
        print(f"same_results: {e}", file=sys.stderr)
        return 2
    diffs = 0
    for k in sorted(set(a) - set(b)):
        print(f"only in A: {k}")
        diffs += 1
    for k in sorted(set(b) - set(a)):
        print(f"only in B: {k}")
        diffs += 1
    both = sorted(set(a) & set(b))
    unclaimed = 0
    for k in both:
        fa, fb = facts(a[k]), facts(b[k])
        if fa != fb:
            print(f"differs: {k}\n  A: {fa}\n  B: {fb}")
            diffs += 1
        elif facts(a[k], False) == facts(b[k], False) and \
                any((o.get("digest") or {}).get("xxh64") != ((b[k].get("outputs") or {}).get(n, {}).get("digest") or {}).get("xxh64")
                    for n, o in (a[k].get("outputs") or {}).items()):
            unclaimed += 1
    verdicts = {}
    for k in both:
        verdicts[a[k]["verdict"]] = verdicts.get(a[k]["verdict"], 0) + 1
    n_out = sum(len(a[k].get("outputs") or {}) for k in both)
    print(f"{len(both)} cases on both sides ({n_out} outputs; verdicts {dict(sorted(verdicts.items()))}); "
          f"{len(a)} in A, {len(b)} in B; {diffs} differences; {unclaimed} cases whose outputs without a "
          f"run_to_run claim have other bits (same verdicts and counts)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
