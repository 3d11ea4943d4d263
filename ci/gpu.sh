#!/usr/bin/env bash
# What a GPU machine runs, from self-contained binaries in $DIST (built elsewhere with the
# `release` preset and ci/dist.sh): the CUDA tests, the math calibration, the
# launch-validation check and the standard suite. Everything lands in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
DIST=${DIST:-.dist}
OUT=${OUT:-out/gpu}
SUITE=${SUITE:-suites/standard.json}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv > "$OUT/machine.txt" 2>&1
nproc >> "$OUT/machine.txt"
"$DIST/kv_tests" --gtest_filter='Cuda.*' > "$OUT/cuda-tests.log" 2>&1
echo "cuda tests exit $?" >> "$OUT/cuda-tests.log"
"$DIST/kverify" calibrate-math --out "$OUT/calibration.json" > /dev/null 2>> "$OUT/cuda-tests.log"
{
  echo "\$ kverify run --device cuda --device-profile warp_size=64 --op rms_norm.fwd --config num_warps=32"
  "$DIST/kverify" run --device cuda --device-profile warp_size=64 --op rms_norm.fwd --config num_warps=32 --out /tmp/kv-w64
  echo "exit code $?"
} >> "$OUT/cuda-tests.log" 2>&1
start=$SECONDS
timeout "${SUITE_TIMEOUT:-100000}" "$DIST/kverify" run --device cuda --suite "$SUITE" ${SHARD:+--shard $SHARD} --quiet \
  --out "$OUT/suite" > "$OUT/suite.log" 2>&1
code=$?
echo "suite $SUITE shard ${SHARD:-all} exit $code wall_s $((SECONDS - start))" >> "$OUT/suite.log"
# dW determinism: every strategy twice (run to run), then under a 108-SM device profile.
if [ -n "${REPEAT_SUITE:-}" ]; then
  for profile in "" "" "sm_count=108"; do
    "$DIST/kverify" run --device cuda ${profile:+--device-profile $profile} --suite "$REPEAT_SUITE" --quiet \
      --out "$OUT/repeat" >> "$OUT/suite.log" 2>&1
  done
fi
