#!/usr/bin/env bash
# Replays every case string of a file (one `kv1 ...` per line, e.g. a campaign's
# not-pass lines) into one results file and prints the verdict counts.
#   usage: tools/bench/replay_list.sh CASES.txt OUTDIR [replay options...]
# DIST: the binaries (ci/dist.sh). Exit 1 when any case fails or errs.
set -uo pipefail
K=${DIST:-.dist}/kverify
list=$1 out=$2
shift 2
mkdir -p "$out"
while IFS= read -r c; do
  [ -n "$c" ] && "$K" replay "$c" --out "$out" "$@" > /dev/null 2>> "$out/stderr.log"
done < "$list"
python3 - "$out/results.jsonl" <<'P'
import collections, json, sys
v = collections.Counter(json.loads(l)["verdict"] for l in open(sys.argv[1]))
print(" ".join(f"{k}={n}" for k, n in sorted(v.items())))
sys.exit(1 if v["fail"] or v["error"] else 0)
P
