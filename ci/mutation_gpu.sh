#!/usr/bin/env bash
# The CUDA mutation suite on a GPU machine (issue 7): kverify-mutate runs the mutants of the
# CUDA RMSNorm kernels (core/mutant_catalog.def, device cuda) against the suite's CUDA
# cases, racecheck on the first case of each op of a mutant that survives them, and writes
# the kill-rate table. DIST: a folder holding kverify-mutate and libtbb.so.12 (ci/dist.sh
# builds it into build/release/tools/mutate/); OUT: where mutation.md, mutation.json, the
# run's log and the machine's description go. Extra arguments go to kverify-mutate.
set -uo pipefail
cd "$(dirname "$0")/.."
DIST=${DIST:-.dist}
OUT=${OUT:-out/mutation-cuda}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/machine.txt" 2>&1
# TIMEOUT bounds the run; the report is rewritten after each mutant, so a cut run keeps
# what it found.
timeout "${TIMEOUT:-100000}" "$DIST/kverify-mutate" --device cuda --sanitize racecheck --out "$OUT" "$@" > "$OUT/run.log" 2>&1
code=$?
tail -n 25 "$OUT/run.log"
exit $code
