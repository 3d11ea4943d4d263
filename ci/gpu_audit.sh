#!/usr/bin/env bash
# [contracts] on a GPU machine: `kverify audit` of every CUDA impl at two configs (and dw=atomics
# where a kernel has it), from the binaries in $DIST. The tables in $OUT/audit.txt, the rows in
# $OUT/audit.jsonl, and each exit status in $OUT/exits.txt (1: a contract understated, a sum
# dropping terms or a determinism claim broken; --determinism is on by default).
set -uo pipefail
cd "$(dirname "$0")/.."
DIST=${DIST:-.dist}
OUT=${OUT:-out/gpu/audit}
mkdir -p "$OUT"
: > "$OUT/exits.txt"
: > "$OUT/audit.txt"
n=0
# ONLY: a regex of the ops to audit (default all); DETERMINISM: on|off (default on).
audit() {  # op dtype shape config [attrs]
  [[ "$1" =~ ${ONLY:-.} ]] || return 0
  n=$((n + 1))
  local t=$OUT/audit.txt
  echo "## $*" >> "$t"
  timeout "${AUDIT_TIMEOUT:-300}" "$DIST/kverify" audit --device cuda --impl cuda --op "$1" --dtype "$2" --shape "$3" \
    ${4:+--config "$4"} ${5:+--attrs "$5"} --determinism "${DETERMINISM:-on}" --out "$OUT" >> "$t" 2>&1
  echo "$1 $2 $3 ${4:-default} exit $?" | tee -a "$t" >> "$OUT/exits.txt"
}
for dw in per_sm,num_warps=16 fixed_partials,num_warps=4 atomics,num_warps=8; do
  audit rms_norm.bwd fp32 4096x1024 "dw=$dw"
  audit layer_norm.bwd fp32 4096x1024 "dw=$dw"
done
audit rms_norm.bwd bf16 1024x512 dw=per_sm,num_warps=16
for op in rms_norm.fwd softmax.fwd softmax.bwd layer_norm.fwd; do
  for w in 4 1; do audit "$op" fp32 512x4096 "num_warps=$w"; done
done
audit softmax.bwd bf16 256x2048 num_warps=32
for op in cross_entropy.fwd cross_entropy.bwd; do
  # reduction none: one loss per row, so the row axis has a lane per row
  for cfg in block_v=row,num_warps=32 block_v=2048,num_warps=8; do audit "$op" fp32 64x8192 "$cfg" reduction=none; done
done
# reduction mean: the batch sum of the losses (rows), one lane
for cfg in block_v=row,num_warps=32 block_v=2048,num_warps=8; do audit cross_entropy.fwd fp32 64x8192 "$cfg"; done
for op in fused_linear_cross_entropy.fwd fused_linear_cross_entropy.bwd; do
  for cfg in chunk=1024 chunk=256,block_v=2048; do audit "$op" bf16 256x512x2048 "$cfg" grad_rounding=x_dtype; done
done
for cfg in chunk=1024 chunk=256,block_v=2048; do
  audit fused_linear_cross_entropy.fwd bf16 256x512x2048 "$cfg" grad_rounding=x_dtype,reduction=none
done
for op in swiglu.fwd swiglu.bwd geglu.fwd geglu.bwd; do audit "$op" bf16 64x4096; done
for op in rope.fwd rope.bwd; do audit "$op" bf16 2x64x8x128; done
audit rope_table.fwd fp32 4096x128
cat "$OUT/exits.txt"
