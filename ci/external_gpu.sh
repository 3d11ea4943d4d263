#!/usr/bin/env bash
# [external] on a GPU machine, from the binaries in $DIST (ci/dist.sh): PyTorch eager and
# torch.compile through the Python worker (suites/external-torch.json), and the example
# plugin's CUDA impl. Results, logs and a tolerance summary land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
DIST=${DIST:-.dist}
OUT=${OUT:-out/gpu/external}
mkdir -p "$OUT"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" \
  > "$OUT/versions.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$OUT/versions.txt" 2>&1

# The example plugin's CUDA impl: every dtype x mode x num_warps at upstream and seed shapes.
"$DIST/kverify" run --device cuda --plugin "$DIST/libkverify_example_plugin.so" --op rms_norm.fwd --impl plugin_cuda \
  --dtype fp32 --dtype fp16 --dtype bf16 --shape 5x123x123 --shape 2x128x512 --shape 32760x1536 \
  --config num_warps=1 --config num_warps=4 --config num_warps=8 --config num_warps=32 --quiet \
  --out "$OUT/plugin" > "$OUT/plugin.log" 2>&1
echo "plugin exit $?" >> "$OUT/plugin.log"
"$DIST/kverify" run --device cuda --plugin "$DIST/libkverify_example_plugin.so" --op rms_norm.fwd --impl plugin_cuda \
  --dtype bf16 --shape 4096x2048 --attrs mode=gemma,offset=1 --quiet --out "$OUT/plugin" >> "$OUT/plugin.log" 2>&1
echo "plugin gemma exit $?" >> "$OUT/plugin.log"

# PyTorch through the worker: one worker for the whole suite, every impl by (op, name).
impls=""
for op in rms_norm_fwd rms_norm_bwd softmax_fwd softmax_bwd cross_entropy_fwd cross_entropy_bwd; do
  impls="$impls --impl torch_eager=torch_impls:${op}_eager --impl torch_compile=torch_impls:${op}_compiled"
done
start=$SECONDS
timeout "${TORCH_TIMEOUT:-100000}" "$DIST/kverify" run --device cuda --worker "python3 examples/worker/kv_worker.py$impls" --worker-timeout 400 \
  --suite suites/external-torch.json --out "$OUT/torch" > "$OUT/torch.log" 2>&1
echo "torch suite exit $? wall_s $((SECONDS - start))" >> "$OUT/torch.log"
python3 ci/tolerance_summary.py "$OUT/torch/results.jsonl" "$OUT/plugin/results.jsonl" > "$OUT/summary.md"
