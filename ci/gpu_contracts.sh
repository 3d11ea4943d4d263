#!/usr/bin/env bash
# [contracts] on a GPU machine, from the binaries in $DIST: the audit of every CUDA impl
# (ci/gpu_audit.sh), then the same cases judged under declared and audited contracts (CUDA
# kernels; PyTorch eager and torch.compile through the worker, whose contracts declare any
# order), and a table of verdicts and enclosure half-widths (ci/audited_summary.py) in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
DIST=${DIST:-.dist}
OUT=${OUT:-out/gpu/contracts}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt" 2>&1
[ -n "${SKIP_AUDIT:-}" ] || DIST=$DIST OUT=$OUT/audit ci/gpu_audit.sh > /dev/null
# The planted understated contract: the CUDA dW kernel declaring a quarter of its serial run
# (test.cuda.dw_understated, kverify-testbin): the audit must exit 1, naming the axis.
"$DIST/kverify-testbin" audit --device cuda --impl test.cuda.dw_understated --op rms_norm.bwd --dtype fp32 \
  --shape 4096x1024 --config dw=per_sm,num_warps=16 --out "$OUT/understated" > "$OUT/understated.txt" 2>&1
echo "understated audit exit $? (1 expected)" >> "$OUT/understated.txt"

both() {  # name, then the run arguments: one run per contract mode
  local name=$1
  shift
  for m in declared audited; do
    timeout "${RUN_TIMEOUT:-500}" "$DIST/kverify" run --device cuda --contract $m --quiet --out "$OUT/$name-$m" "$@" \
      >> "$OUT/runs.log" 2>&1
    echo "$name $m exit $?" >> "$OUT/runs.log"
  done
}
both cuda --impl cuda --op rms_norm.bwd --op layer_norm.bwd --dtype bf16 --dtype fp32 --shape 4096x1024 \
  --config dw=per_sm,num_warps=16 --config dw=fixed_partials,num_warps=4
both cuda-softmax --impl cuda --op softmax.bwd --dtype bf16 --dtype fp32 --shape 1024x4096 \
  --config num_warps=4 --config num_warps=1
impls=""
for op in rms_norm_bwd softmax_bwd; do
  impls="$impls --impl torch_eager=torch_impls:${op}_eager --impl torch_compile=torch_impls:${op}_compiled"
done
both torch --worker "python3 examples/worker/kv_worker.py$impls" --worker-timeout 400 --impl torch_eager \
  --impl torch_compile --op rms_norm.bwd --dtype bf16 --dtype fp32 --shape 2048x1024 --attrs mode=llama
both torch-softmax --worker "python3 examples/worker/kv_worker.py$impls" --worker-timeout 400 --impl torch_eager \
  --impl torch_compile --op softmax.bwd --dtype bf16 --dtype fp32 --shape 1024x2048
for name in cuda cuda-softmax torch torch-softmax; do
  python3 ci/audited_summary.py "$OUT/$name-declared/results.jsonl" "$OUT/$name-audited/results.jsonl"
done > "$OUT/summary.md"
cat "$OUT/summary.md" "$OUT/runs.log"
