#!/usr/bin/env bash
# A Liger campaign on one machine: JOBS processes of campaign.py, shard j/JOBS each, side by
# side (the host's reference and Triton's compiles set the pace, so several share a GPU; with
# several GPUs, GPUS of them, by default every one nvidia-smi lists, take the shards in turn).
# Then, where KVERIFY names the kverify binary, each impl's shards are joined with
# `kverify merge` into OUT/<impl>/merged.jsonl (else summarize.py and compact.py read the
# shards), and the table is written (summarize.py).
# Usage: campaign.sh OUT CASES JOBS [campaign.py args...]; needs KVERIFY_LIB and PYTHONPATH as
# campaign.py does.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: campaign.sh OUT CASES JOBS [campaign.py args...]" >&2; exit 2; }
out=$1 cases=$2 jobs=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
gpus=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
[[ "$gpus" =~ ^[0-9]+$ ]] && [ "$gpus" -ge 1 ] || gpus=0  # 0: CUDA_VISIBLE_DEVICES left as it is
pids=()
for ((j = 0; j < jobs; j++)); do
  if [ "$gpus" -gt 1 ]; then export CUDA_VISIBLE_DEVICES=$((j % gpus)); fi
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
