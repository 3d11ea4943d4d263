#!/usr/bin/env bash
# Issue 6's speed targets in one command on a GPU machine: kverify-kernelbench (kverify's
# CUDA impls beside a device copy of the same input) and tools/bench/torch_bench.py (PyTorch eager
# and torch.compile) in the same run, into $OUT/bench.md.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root (these scripts moved from bench/ to tools/bench/)
DIST=${DIST:-.dist}
OUT=${OUT:-out/bench}
mkdir -p "$OUT"
md=$OUT/bench.md
kb() { "$DIST/kverify-kernelbench" "$@" >> "$md" 2>&1; echo >> "$md"; }
{ echo "# Speed, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"; echo; } > "$md"
NW=(--config num_warps=1 --config num_warps=2 --config num_warps=4 --config num_warps=8 --config num_warps=16 --config num_warps=32)
kb --op rms_norm.fwd --op rms_norm.bwd --dtype bf16 --shape 32760x1536 "${NW[@]}"
kb --op rms_norm.fwd --dtype bf16 --shape 16384x4096 "${NW[@]}"
kb --op softmax.fwd --op softmax.bwd --op layer_norm.fwd --op layer_norm.bwd --op swiglu.fwd --dtype bf16 --shape 32760x1536
kb --op softmax.fwd --op softmax.bwd --op layer_norm.fwd --op layer_norm.bwd --dtype bf16 --shape 32760x1536 "${NW[@]}"
kb --op swiglu.bwd --op geglu.fwd --op geglu.bwd --dtype bf16 --shape 32760x1536
kb --op rope.fwd --dtype bf16 --shape 1x32760x12x128 --alias q_out=q,k_out=k --attrs positions=1d
kb --op rope.fwd --dtype bf16 --shape 1x32760x12x128 --alias q_out=q,k_out=k --attrs positions=3d
kb --op rope.bwd --dtype bf16 --shape 1x32760x12x128 --alias dq=dq_out,dk=dk_out --attrs positions=3d
kb --op cross_entropy.fwd --op cross_entropy.bwd --dtype bf16 --shape 4096x128256
kb --op fused_linear_cross_entropy.fwd --op fused_linear_cross_entropy.bwd --dtype bf16 --shape 4096x2048x128256 \
   --attrs grad_rounding=x_dtype
{ echo "## PyTorch in the same run"; echo; python3 tools/bench/torch_bench.py 2>> "$OUT/torch.err"; } >> "$md"
cat "$md"
