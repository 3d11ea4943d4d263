#!/usr/bin/env bash
# Issue 18's soundness campaign on a GPU machine, in one command (one device call: the
# campaign's state cannot travel between calls, its results file is too large):
#   GPU: every CUDA impl of every op, shapes up to 64K elements, a seed never used before,
#        JOBS workers per GPU, until CASES generated cases or CAMPAIGN_S seconds;
#   HOST (HOST=1): `fuzz --device host --op all` for seeds 1..5 x HOST_CASES cases.
# What comes back (OUT/soundness.tar.xz, and the summaries beside it): the logs, the failures,
# and per campaign summary.json, summary.md and not-pass.jsonl (tools/bench/campaign_summary.py);
# the whole results stay on the machine (too large to carry back).
# RESUME=1 continues the GPU campaign left in WORK by an earlier call on the same machine
# (CASES is then the campaign's total, CAMPAIGN_S this call's seconds).
# DIST: the binaries (ci/dist.sh); OUT: where logs and summaries go.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root (these scripts moved from bench/ to tools/bench/)
K=${DIST:-.dist}/kverify
OUT=${OUT:-out/soundness}
WORK=${WORK:-/tmp/soundness}
SEED=${SEED:-18018}
CASES=${CASES:-240000}
JOBS=${JOBS:-8}
PUB="$WORK/pub"
mkdir -p "$OUT" "$WORK" "$PUB"
if [ "${GPU:-1}" = 1 ]; then
  "$K" fuzz --device cuda --op all --budget-cases "$CASES" --budget-seconds "${CAMPAIGN_S:-480}" --seed "$SEED" \
    --max-elements 65536 --devices all --jobs-per-device "$JOBS" --max-shrink-seconds "${SHRINK_S:-20}" \
    --out "$WORK/gpu" ${RESUME:+--resume} >> "$PUB/gpu.log" 2>&1
  echo "gpu campaign exit $?" >> "$PUB/gpu.log"
  cp "$WORK/gpu/failures.jsonl" "$PUB/gpu-failures.jsonl" 2>/dev/null
  python3 tools/bench/campaign_summary.py "$WORK/gpu/results.jsonl" "$PUB/gpu" --title "GPU soundness campaign seed $SEED"
fi
if [ "${HOST:-1}" = 1 ]; then
  for s in 1 2 3 4 5; do
    "$K" fuzz --device host --op all --budget-cases "${HOST_CASES:-2000}" --seed "$s" --devices "${HOST_WORKERS:-12}" \
      --max-shrink-seconds "${SHRINK_S:-20}" --out "$WORK/host-$s" > "$PUB/host-$s.log" 2>&1
    echo "host campaign seed $s exit $?" >> "$PUB/host-$s.log"
    cat "$WORK/host-$s/results.jsonl" >> "$WORK/host-all.jsonl"
    cat "$WORK/host-$s/failures.jsonl" >> "$PUB/host-failures.jsonl" 2>/dev/null
  done
  python3 tools/bench/campaign_summary.py "$WORK/host-all.jsonl" "$PUB/host" --title "host campaigns seeds 1-5"
fi
grep -h -E "^joined|exit [0-9]+$|interrupted" "$PUB"/*.log
tar -cJf "$OUT/soundness.tar.xz" -C "$PUB" .
cp "$PUB/gpu/summary.md" "$OUT/gpu-summary.md" 2>/dev/null
cp "$PUB/host/summary.md" "$OUT/host-summary.md" 2>/dev/null
