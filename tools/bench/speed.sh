#!/usr/bin/env bash
# Issue 24's speed figures in one command on a GPU machine, into $OUT:
#   a. kernel rows: kverify-kernelbench at the issue's shapes, default configs (kernelbench.md);
#   b. PyTorch eager and torch.compile rows: tools/bench/torch_bench.py (torch.md, torch.err);
#   c. the seed case (3D RoPE fwd+bwd bf16 1x32760x12x128) end to end, REPS fresh processes
#      (seed-wall.txt; run 1's results in seed-1/, every run's log in seed-R.log);
#   d. the standard suite end to end, SUITE_REPS times (suite-wall.txt with each run's verdict
#      counts; run 1's results kept as suite-1-results.jsonl.gz);
#   e. fuzz throughput: FUZZ_REPS campaigns of FUZZ_S seconds, JOBS workers per GPU (fuzz-S.log,
#      fuzz-S-failures.jsonl where the campaign found any; the GPU count in gpu-count.txt);
#   f. the GPU's name (gpu.txt) and kverify --version (version.txt, with the commit);
#   g. tools/bench/speed_table.py: speed.json and speed.md from the files above.
# A step that fails does not stop the others: each step's exit code goes to steps.txt.
# DIST (default .dist: kverify, kverify-kernelbench) and OUT (default out/speed) are relative
# to the repository root. Usage: DIST=.dist OUT=out/speed tools/bench/speed.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
DIST=${DIST:-.dist}
OUT=${OUT:-out/speed}
REPS=${REPS:-5}
KREPS=${KREPS:-20}
SUITE_REPS=${SUITE_REPS:-2}
FUZZ_REPS=${FUZZ_REPS:-3}
FUZZ_S=${FUZZ_S:-40}
JOBS=${JOBS:-16}
K=$DIST/kverify
mkdir -p "$OUT"
: > "$OUT/steps.txt"

# Runs one step (a function) and records its exit code.
step() {
  echo "speed.sh: $1" >&2
  "$@"
  local rc=$?
  echo "$1 exit $rc" >> "$OUT/steps.txt"
}

wall() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# "pass N fail N unverifiable N skip N error N" over a results.jsonl's lines (one case each).
verdicts() {
  python3 - "$1" <<'EOF'
import collections, json, sys
c = collections.Counter()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if line.strip():
        try:
            c[json.loads(line).get("verdict", "none")] += 1
        except ValueError:
            c["unparsed"] += 1
known = ("pass", "fail", "unverifiable", "skip", "error")
print(" ".join(f"{k} {c[k]}" for k in known) + "".join(f" {k} {n}" for k, n in c.items() if k not in known))
EOF
}

kb() {
  "$DIST/kverify-kernelbench" --reps "$KREPS" "$@" >> "$OUT/kernelbench.md" 2>&1
  local rc=$?
  echo >> "$OUT/kernelbench.md"
  return "$rc"
}

kernels() {
  local worst=0
  : > "$OUT/kernelbench.md"
  kb --op rms_norm.fwd --op rms_norm.bwd --op softmax.fwd --op softmax.bwd --op layer_norm.fwd --op layer_norm.bwd \
     --op swiglu.fwd --op swiglu.bwd --op geglu.fwd --op geglu.bwd --dtype bf16 --shape 32760x1536 || worst=$?
  kb --op rope.fwd --dtype bf16 --shape 1x32760x12x128 --alias q_out=q,k_out=k --attrs positions=3d || worst=$?
  kb --op rope.bwd --dtype bf16 --shape 1x32760x12x128 --alias dq=dq_out,dk=dk_out --attrs positions=3d || worst=$?
  kb --op cross_entropy.fwd --op cross_entropy.bwd --dtype bf16 --shape 4096x128256 || worst=$?
  kb --op fused_linear_cross_entropy.fwd --op fused_linear_cross_entropy.bwd --dtype bf16 --shape 4096x2048x128256 \
     --attrs grad_rounding=x_dtype || worst=$?
  return "$worst"
}

torch_rows() { python3 tools/bench/torch_bench.py > "$OUT/torch.md" 2> "$OUT/torch.err"; }

seed() {
  local r t0 rc worst=0
  : > "$OUT/seed-wall.txt"
  for r in $(seq 1 "$REPS"); do
    rm -rf "$OUT/seed-$r"
    t0=$(date +%s.%N)
    "$K" run --device cuda --op rope.fwd --op rope.bwd --impl cuda --shape 1x32760x12x128 --dtype bf16 \
      --attrs positions=3d --out "$OUT/seed-$r" > "$OUT/seed-$r.log" 2>&1
    rc=$?
    echo "run $r wall_s $(wall "$t0" "$(date +%s.%N)") exit $rc" >> "$OUT/seed-wall.txt"
    [ "$r" -eq 1 ] || rm -rf "$OUT/seed-$r"
    [ "$rc" -eq 0 ] || worst=$rc
  done
  return "$worst"
}

suite() {
  local r t0 rc worst=0 res counts
  : > "$OUT/suite-wall.txt"
  rm -f "$OUT/suite-1-results.jsonl.gz"
  for r in $(seq 1 "$SUITE_REPS"); do
    rm -rf "$OUT/suite-$r"
    t0=$(date +%s.%N)
    "$K" run --device cuda --out "$OUT/suite-$r" > "$OUT/suite-$r.log" 2>&1
    rc=$?
    res=$OUT/suite-$r/results.jsonl
    counts="no results"
    [ -f "$res" ] && counts=$(verdicts "$res")
    echo "run $r wall_s $(wall "$t0" "$(date +%s.%N)") exit $rc $counts" >> "$OUT/suite-wall.txt"
    [ "$r" -eq 1 ] && [ -f "$res" ] && gzip -c "$res" > "$OUT/suite-1-results.jsonl.gz"
    rm -rf "$OUT/suite-$r"
    [ "$rc" -eq 0 ] || worst=$rc
  done
  return "$worst"
}

fuzz() {
  local s rc worst=0
  nvidia-smi -L | wc -l > "$OUT/gpu-count.txt"
  rm -f "$OUT"/fuzz-*.log
  for s in $(seq 11 $((10 + FUZZ_REPS))); do
    rm -rf "$OUT/fuzz-$s"
    "$K" fuzz --device cuda --op all --impl cuda --budget-seconds "$FUZZ_S" --max-elements 65536 --seed "$s" \
      --devices all --jobs-per-device "$JOBS" --curated none --out "$OUT/fuzz-$s" > "$OUT/fuzz-$s.log" 2>&1
    rc=$?
    echo "fuzz exit $rc" >> "$OUT/fuzz-$s.log"
    # A failure the campaign found is kept (its line, replay and class), whatever the speed.
    [ -s "$OUT/fuzz-$s/failures.jsonl" ] && cp "$OUT/fuzz-$s/failures.jsonl" "$OUT/fuzz-$s-failures.jsonl"
    rm -rf "$OUT/fuzz-$s"
    [ "$rc" -eq 0 ] || worst=$rc
  done
  return "$worst"
}

identify() {
  nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 > "$OUT/gpu.txt"
  "$K" --version > "$OUT/version.txt" 2>&1
}

step identify
step kernels
step torch_rows
step seed
step suite
step fuzz
python3 tools/bench/speed_table.py "$OUT"
rc=$?
cat "$OUT/steps.txt"
[ -f "$OUT/speed.md" ] && cat "$OUT/speed.md"
exit $rc
