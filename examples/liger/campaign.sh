#!/usr/bin/env bash
# A Liger campaign over one GPU: JOBS processes of campaign.py, shard j/JOBS each, side by side
# (the host's reference and judge set the pace, so several share the GPU), then, where KVERIFY
# names the kverify binary, each impl's shards joined with `kverify merge` into
# OUT/<impl>/merged.jsonl, and the table written (summarize.py). Usage: campaign.sh OUT CASES JOBS [campaign.py args...]; needs KVERIFY (the
# kverify binary), KVERIFY_LIB and PYTHONPATH as campaign.py does.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: campaign.sh OUT CASES JOBS [campaign.py args...]" >&2; exit 2; }
out=$1 cases=$2 jobs=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
pids=()
for ((j = 0; j < jobs; j++)); do
  python3 "$here/campaign.py" "$out" --cases "$cases" --shard "$j/$jobs" "$@" > "$out/shard-$j.log" 2>&1 &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM
code=0
for p in "${pids[@]}"; do wait "$p" || code=$?; done
if [ -x "${KVERIFY:-}" ]; then  # else summarize.py reads the shards themselves
  for d in "$out"/*/; do
    ls "$d" | grep -q '^shard-' || continue
    rm -f "$d/merged.jsonl"
    "$KVERIFY" merge "$d/merged.jsonl" "$d"/shard-*/results.jsonl > /dev/null || code=1
  done
fi
python3 "$here/summarize.py" "$out" || code=1
exit $code
