#!/usr/bin/env bash
# Issue 7's GPU campaign in one command: every CUDA impl of every op, shapes up to 64K
# elements, at least CASES generated cases in two resumable chunks (the second joined with
# --resume), then the seed case (3D RoPE bf16 1x32760x12x128, fwd and bwd) end to end.
# DIST: the binaries (ci/dist.sh); OUT: where logs and the campaign go.
set -uo pipefail
cd "$(dirname "$0")/.."
K=${DIST:-.dist}/kverify
OUT=${OUT:-out/fuzz-gpu}
SEED=${SEED:-2028}
CASES=${CASES:-22000}
mkdir -p "$OUT"
common=(--max-shrink-seconds "${SHRINK_S:-20}")
# Chunk 1 stops on its time budget; chunk 2 resumes the same campaign to CASES.
"$K" fuzz --device cuda --op all --budget-cases "$CASES" --budget-seconds "${CHUNK1_S:-90}" --seed "$SEED" \
  --max-elements 65536 "${common[@]}" --out "$OUT/campaign" > "$OUT/chunk1.log" 2>&1
echo "chunk 1 exit $?" >> "$OUT/chunk1.log"
"$K" fuzz --device cuda --resume --budget-seconds "${CHUNK2_S:-420}" "${common[@]}" --out "$OUT/campaign" \
  > "$OUT/chunk2.log" 2>&1
echo "chunk 2 exit $?" >> "$OUT/chunk2.log"
tail -n 12 "$OUT/chunk1.log" "$OUT/chunk2.log"
# The seed case, end to end (inputs, kernel, reference, check): timings in its results.
/usr/bin/time -v "$K" run --device cuda --op rope.fwd --op rope.bwd --impl cuda --shape 1x32760x12x128 --dtype bf16 \
  --attrs positions=3d --out "$OUT/seed" > "$OUT/seed.log" 2>&1
tail -n 4 "$OUT/seed.log"
