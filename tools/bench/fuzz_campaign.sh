#!/usr/bin/env bash
# Issue 7's GPU campaign and speed figures in one command on a GPU machine:
#   1. the campaign: every CUDA impl of every op, shapes up to 64K elements, at least CASES
#      generated cases in two resumable chunks (the second joined with --resume), JOBS
#      workers per GPU (--jobs-per-device; the parent prints the joined rate);
#   2. the same seed's first indices with one worker (the rate one worker reaches);
#   3. a sanitizer sample: SAN_CASES cases, every SAN_EVERY-th index rerun under memcheck,
#      racecheck and initcheck;
#   4. the seed case (3D RoPE bf16 1x32760x12x128, fwd and bwd) end to end, twice.
# DIST: the binaries (ci/dist.sh); OUT: where logs and the campaign go.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root (these scripts moved from bench/ to tools/bench/)
K=${DIST:-.dist}/kverify
OUT=${OUT:-out/fuzz-gpu}
SEED=${SEED:-2029}
CASES=${CASES:-22000}
JOBS=${JOBS:-8}
mkdir -p "$OUT"
common=(--max-shrink-seconds "${SHRINK_S:-20}")
# 1. Chunk 1 stops on its time budget; chunk 2 resumes the same campaign to CASES.
"$K" fuzz --device cuda --op all --budget-cases "$CASES" --budget-seconds "${CHUNK1_S:-30}" --seed "$SEED" \
  --max-elements 65536 --devices all --jobs-per-device "$JOBS" "${common[@]}" --out "$OUT/campaign" > "$OUT/chunk1.log" 2>&1
echo "chunk 1 exit $?" >> "$OUT/chunk1.log"
"$K" fuzz --device cuda --resume --budget-seconds "${CHUNK2_S:-420}" --devices all --jobs-per-device "$JOBS" "${common[@]}" \
  --out "$OUT/campaign" > "$OUT/chunk2.log" 2>&1
echo "chunk 2 exit $?" >> "$OUT/chunk2.log"
grep -h "^joined" "$OUT/chunk1.log" "$OUT/chunk2.log"
# 2. One worker on the same seed, for its rate.
"$K" fuzz --device cuda --op all --budget-cases "$CASES" --budget-seconds "${ONE_S:-30}" --seed "$SEED" --max-elements 65536 \
  "${common[@]}" --out "$OUT/one-worker" > "$OUT/one-worker.log" 2>&1
echo "one worker exit $?" >> "$OUT/one-worker.log"
tail -n 8 "$OUT/one-worker.log" | grep -E "cases/s|fuzz campaign"
# 3. The sanitizer sample.
"$K" fuzz --device cuda --op all --budget-cases "${SAN_CASES:-600}" --seed "$SEED" --max-elements 65536 --curated none \
  --sanitize memcheck,racecheck,initcheck --sanitize-every "${SAN_EVERY:-100}" "${common[@]}" --out "$OUT/sanitize" \
  > "$OUT/sanitize.log" 2>&1
echo "sanitize exit $?" >> "$OUT/sanitize.log"
grep -A4 "^sanitizer:" "$OUT/sanitize.log"
# 4. The seed case, end to end (inputs, kernel, reference, check): timings in its results.
for r in 1 2; do
  /usr/bin/time -v "$K" run --device cuda --op rope.fwd --op rope.bwd --impl cuda --shape 1x32760x12x128 --dtype bf16 \
    --attrs positions=3d --out "$OUT/seed$r" > "$OUT/seed$r.log" 2>&1
done
tail -n 4 "$OUT/seed1.log"
