#!/usr/bin/env bash
# What a GPU runner runs, one job per GPU type (see README "GPU CI"):
#   1. build (ci/build.sh, cuda preset) unless DIST names self-contained binaries built
#      elsewhere with ci/dist.sh;
#   2. the CUDA tests, the math calibration and the launch-validation check (TESTS=0 skips);
#   3. the standard suite (SUITE, default suites/standard.json; SHARD=i/N for a slice);
#   4. drift analyses of the CUDA impls (DRIFT_SPECS) with a forecast for a 108-SM GPU
#      (DRIFT=0 skips them);
#   5. the tolerance report (report.html, report.json, junit.xml) of 3 and 4;
#   6. the gate against the committed baseline of this GPU type,
#      reports/gpus/<gpu-slug>/baseline.jsonl.gz (GATE=0 skips it; none committed: a
#      visible skip).
# Everything lands in $OUT. Exit 0 only when the tests, the suite and the gate pass.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu}
SUITE=${SUITE:-suites/standard.json}
mkdir -p "$OUT"
if [ -z "${DIST:-}" ]; then
  preset=$(KVERIFY_PRESET=cuda ci/build.sh | tail -n 1) || { echo "gpu.sh: build failed"; exit 1; }
  DIST=$OUT/bin
  mkdir -p "$DIST"
  cp "build/$preset/kverify" "build/$preset/tests/kv_tests" "$DIST/"
fi
status=0
step() { echo "== $*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv > "$OUT/machine.txt" 2>&1
nproc >> "$OUT/machine.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
slug=$(echo "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+|-+$//g')
step "GPU: ${gpu:-none} (slug ${slug:-none})"

if [ "${TESTS:-1}" != 0 ]; then
step "CUDA tests"
"$DIST/kv_tests" --gtest_filter='Cuda.*' > "$OUT/cuda-tests.log" 2>&1 || status=1
tail -n 3 "$OUT/cuda-tests.log"
"$DIST/kverify" calibrate-math --out "$OUT/calibration.json" > /dev/null 2>> "$OUT/cuda-tests.log" || status=1
{
  echo "\$ kverify run --device cuda --device-profile warp_size=64 --op rms_norm.fwd --config num_warps=32"
  "$DIST/kverify" run --device cuda --device-profile warp_size=64 --op rms_norm.fwd --config num_warps=32 --out "$OUT/w64"
  echo "exit code $? (2 expected: the config is rejected before launch)"
} >> "$OUT/cuda-tests.log" 2>&1
else
  step "CUDA tests: skipped (TESTS=0)"
fi

step "suite $SUITE ${SHARD:+shard $SHARD}"
start=$SECONDS
timeout "${SUITE_TIMEOUT:-100000}" "$DIST/kverify" run --device cuda --suite "$SUITE" ${SHARD:+--shard $SHARD} --quiet \
  --out "$OUT/suite" > "$OUT/suite.log" 2>&1
code=$?
[ $code -eq 0 ] || status=1
echo "suite $SUITE shard ${SHARD:-all} exit $code wall_s $((SECONDS - start))" >> "$OUT/suite.log"
tail -n 4 "$OUT/suite.log"

# Drift: every CUDA impl on one input across its configs, run to run, and under a 108-SM
# profile (the forecast). DRIFT_SPECS: "op shape dtype repeats" per line.
DRIFT_SPECS=${DRIFT_SPECS:-"rms_norm.bwd 8192x2048 x:bf16,w:fp32 3
rms_norm.fwd 2048x2048 bf16 2
layer_norm.bwd 2048x2048 bf16 3
layer_norm.fwd 2048x2048 bf16 2
softmax.fwd 2048x2048 bf16 2
softmax.bwd 2048x2048 bf16 2
swiglu.bwd 2048x2048 bf16 2
geglu.bwd 2048x2048 bf16 2"}
drift_args=()
if [ "${DRIFT:-1}" != 0 ]; then
  mkdir -p "$OUT/drift"
  while read -r op shape dtype rep; do
    [ -n "$op" ] || continue
    step "drift: $op cuda $shape $dtype, $rep runs per config and under sm_count=108"
    "$DIST/kverify" drift --device cuda --op "$op" --impl cuda --dtype "$dtype" --shape "$shape" --repeat "$rep" \
      --forecast sm_count=108 --out "$OUT/drift/$op" > "$OUT/drift/$op.log" 2>&1 || status=1
    tail -n 1 "$OUT/drift/$op.log"
    [ -f "$OUT/drift/$op/drift.json" ] && drift_args+=(--drift "$OUT/drift/$op/drift.json")
  done <<< "$DRIFT_SPECS"
fi

step "report"
"$DIST/kverify" report --results "$OUT/suite/results.jsonl" "${drift_args[@]}" --title "kverify standard suite on $gpu" \
  --out "$OUT/report" || status=1

baseline="reports/gpus/$slug/baseline.jsonl.gz"
if [ "${GATE:-1}" = 0 ]; then
  step "gate: skipped (GATE=0)"
elif [ ! -f "$baseline" ]; then
  step "gate: SKIPPED, no baseline committed for this GPU type ($baseline)"
else
  step "gate against $baseline"
  gunzip -c "$baseline" > "$OUT/baseline.jsonl"
  "$DIST/kverify" gate --baseline "$OUT/baseline.jsonl" --results "$OUT/suite/results.jsonl" > "$OUT/gate.log" 2>&1 || status=1
  tail -n 1 "$OUT/gate.log"
  rm -f "$OUT/baseline.jsonl"
fi
echo "gpu.sh: exit $status"
exit $status
