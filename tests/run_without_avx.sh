#!/usr/bin/env bash
# Runs the reference benchmark's FLCE case on an emulated CPU without AVX (QEMU user mode,
# Westmere) and on one with AVX2 but no AVX-512 (Haswell): each must pick the copy of the
# dense products it supports and run. Skips (exit 77) when qemu-x86_64 is missing.
set -euo pipefail
bench=$1
if ! command -v qemu-x86_64 >/dev/null; then
  echo "SKIP: qemu-x86_64 not installed (Debian package qemu-user)"
  exit 77
fi
for pair in Westmere:generic Haswell:avx2; do
  cpu=${pair%%:*} want=${pair##*:}
  out=$(qemu-x86_64 -cpu "$cpu" "$bench" --repeat 2 --only FLCE --flce 16x64x300 2>/dev/null)
  echo "$out"
  grep -q "dense products: eigen-$want;" <<<"$out" || { echo "FAIL: $cpu did not pick eigen-$want"; exit 1; }
  grep -q "^| FLCE" <<<"$out" || { echo "FAIL: no FLCE timing on $cpu"; exit 1; }
done
