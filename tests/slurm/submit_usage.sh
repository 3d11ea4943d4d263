#!/usr/bin/env bash
# tools/slurm/submit.sh and its sbatch scripts on bad input, no Slurm needed: each mistake is
# one line on stderr and exit 2 with nothing submitted; --dry-run shows the array, its
# requeue and resume, the merge job after it and, for two GPU types, the compare job.
#   submit_usage.sh KVERIFY SOURCE_DIR WORK_DIR
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: submit_usage.sh KVERIFY SOURCE_DIR WORK_DIR" >&2; exit 2; }
kverify=$1 slurm=$2/tools/slurm work=$3
rm -rf "$work" && mkdir -p "$work" && touch "$work/file"
failed=0 passed=0
ok=(--dir "$work/c" --tasks 4 --kverify "$kverify")

# expect_usage_error WHAT ARGS...: exit 2, one line on stderr, nothing on stdout.
expect_usage_error() {
  local what=$1 out err code
  shift
  out=$("$@" 2>"$work/err")
  code=$?
  err=$(cat "$work/err")
  if [ $code -eq 2 ] && [ -z "$out" ] && [ "$(wc -l <"$work/err")" -eq 1 ]; then
    echo "ok   $what: $err"
    passed=$((passed + 1))
  else
    echo "FAIL $what: exit $code, stdout '$out', stderr '$err'"
    failed=$((failed + 1))
  fi
}

s=$slurm/submit.sh
expect_usage_error "no arguments" "$s"
expect_usage_error "no --tasks" "$s" --dir "$work/c" -- --op rms_norm.fwd
expect_usage_error "--tasks 0" "$s" --dir "$work/c" --tasks 0 -- --op rms_norm.fwd
expect_usage_error "--tasks abc" "$s" --dir "$work/c" --tasks abc -- --op rms_norm.fwd
expect_usage_error "--tasks without a value" "$s" --dir "$work/c" --tasks
expect_usage_error "a missing parent directory" "$s" --dir "$work/no/such/c" --tasks 4 -- --op rms_norm.fwd
expect_usage_error "--dir a file" "$s" --dir "$work/file" --tasks 4 --kverify "$kverify" -- --op rms_norm.fwd
expect_usage_error "a missing kverify" "$s" --dir "$work/c" --tasks 4 --kverify "$work/none" -- --op rms_norm.fwd
expect_usage_error "a typo'd option" "$s" "${ok[@]}" --partitoin h100 -- --op rms_norm.fwd
expect_usage_error "fuzz arguments before --" "$s" "${ok[@]}" --op rms_norm.fwd
expect_usage_error "an empty --partition" "$s" "${ok[@]}" --partition= -- --op rms_norm.fwd
expect_usage_error "a partition twice" "$s" "${ok[@]}" --partition a --partition a -- --op rms_norm.fwd
expect_usage_error "--max-requeues -1" "$s" "${ok[@]}" --max-requeues -1 -- --op rms_norm.fwd
expect_usage_error "--shard in the fuzz arguments" "$s" "${ok[@]}" -- --op rms_norm.fwd --shard 1/2
expect_usage_error "--out in the fuzz arguments" "$s" "${ok[@]}" -- --op rms_norm.fwd --out=x
expect_usage_error "no --op" "$s" "${ok[@]}" -- --budget-cases 5
expect_usage_error "nothing to resubmit" "$s" "${ok[@]}" --dry-run
expect_usage_error "task.sbatch outside an array" env -u SLURM_ARRAY_TASK_ID "$slurm/task.sbatch" "$kverify" "$work/c" 4 3
expect_usage_error "merge.sbatch without arguments" "$slurm/merge.sbatch"
[ -e "$work/c" ] && { echo "FAIL a refused submission created $work/c"; failed=$((failed + 1)); }

# --dry-run: what would be submitted, for two GPU types.
out=$("$s" "${ok[@]}" --partition h100 --partition h200 --sbatch=--exclusive --dry-run -- --op rms_norm.fwd 2>&1)
for want in "--array=0-3" "--requeue" "--open-mode=append" "--exclusive" "--partition=h100" "--partition=h200" \
  "--dependency=afterany:\\<kv-fuzz-h100\\>" "merge.sbatch" "--dependency=afterany:\\<kv-merge-h100\\>:\\<kv-merge-h200\\>" \
  "compare"; do
  if grep -qF -- "$want" <<<"$out"; then
    passed=$((passed + 1))
  else
    echo "FAIL --dry-run does not show '$want':"$'\n'"$out"
    failed=$((failed + 1))
  fi
done
echo "--dry-run for two GPU types:"$'\n'"$out"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
