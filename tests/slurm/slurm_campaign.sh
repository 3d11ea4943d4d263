#!/usr/bin/env bash
# A host fuzz campaign on a real Slurm (issue 23): a one-node cluster on this machine
# (tests/slurm/local_cluster.sh), the campaign submitted with tools/slurm/submit.sh as an
# array of 4 tasks; one task's kverify is killed (kill -9) midway, the task requeues itself
# and resumes its shard; the merged results must equal the single-process campaign of the
# same seed: the same (index, case, verdict) set, no index twice, none missing.
# Exit 77 (CTest skip) with the reason only where the daemons cannot start.
#   slurm_campaign.sh KVERIFY SOURCE_DIR WORK_DIR
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: slurm_campaign.sh KVERIFY SOURCE_DIR WORK_DIR" >&2; exit 2; }
kverify=$1 src=$2 work=$3
tasks=4 victim=1
cases=${KV_SLURM_CASES:-2000}
fuzz=(--op rms_norm.fwd --device host --seed 23 --budget-cases "$cases")
skip() { echo "[  SKIPPED ] SlurmArrayCampaign: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
now() { date +%s.%N; }
lines() { if [ -f "$1" ]; then grep -c . "$1"; else echo 0; fi; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root here (CI runs as root)"
for b in munged munge slurmctld slurmd sbatch scontrol squeue; do
  command -v "$b" >/dev/null || skip "no $b: Debian's slurm-wlm and munge are not installed (ci/setup.sh installs them)"
done
rm -rf "$work" && mkdir -p "$work" || fail "cannot create $work"
work=$(cd "$work" && pwd)
t=$(mktemp -d /tmp/kv-slurm.XXXXXX)
# shellcheck source=local_cluster.sh
. "$src/tests/slurm/local_cluster.sh"
trap 'cluster_stop; cp "$t"/*.log "$work/" 2>/dev/null; rm -rf "$t"' EXIT
cluster_start "$t" || skip "$cluster_why"

# The single-process campaign: the expected results and the time to beat.
t0=$(now)
"$kverify" fuzz "${fuzz[@]}" --out "$work/single" >"$work/single.log" 2>&1 || fail "single campaign: $(tail -n 3 "$work/single.log")"
t_single=$(secs "$t0" "$(now)")
echo "single process: $(grep -c . "$work/single/results.jsonl") results in ${t_single} s"

# Bad input stops the script with one line and exit 2, before anything is queued.
for bad in "--partition debgu" "--constraint h100"; do
  # shellcheck disable=SC2086
  out=$("$src/tools/slurm/submit.sh" --dir "$work/bad" --tasks 2 --kverify "$kverify" $bad -- --op rms_norm.fwd 2>&1)
  code=$?
  [ $code -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] || fail "submit.sh $bad: exit $code, '$out'"
  echo "submit.sh $bad: exit 2: $out"
done
[ -z "$(squeue -h)" ] || fail "a refused submission queued a job"

# The array: 4 tasks on this node's 2 CPUs, each shard into the shared directory.
dir=$work/campaign
t0=$(now)
merge=$("$src/tools/slurm/submit.sh" --dir "$dir" --tasks $tasks --kverify "$kverify" --constraint cpu \
  --max-requeues 2 -- "${fuzz[@]}") || fail "submit.sh refused the campaign"
type_dir=$dir/cpu
array=$(squeue -h -o '%F %j' | awk '$2 == "kv-fuzz-cpu" {print $1; exit}')
[ -n "$array" ] || fail "no array job in the queue: $(squeue 2>&1)"
echo "submitted: array job $array ($tasks tasks), merge job $merge"

# Kill task $victim's kverify once a quarter of its shard is done.
share=$(((cases + tasks - 1 - victim) / tasks))
results=$type_dir/shard-$victim/results.jsonl
wait_for "[ \$(lines '$results') -ge $((share / 4)) ]" 120 || fail "task $victim made no progress"
pid=$(cat "$type_dir/status/$victim.pid")
tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--shard $victim/$tasks" || fail "pid $pid is not task $victim's kverify"
before=$(lines "$results")
[ ! -f "$type_dir/status/$victim.done" ] || fail "task $victim finished before the kill: raise KV_SLURM_CASES"
kill -9 "$pid"
echo "killed task $victim's kverify (pid $pid, kill -9) after $before of its $share cases"

# Slurm holds a requeued job about two minutes before it may start again: start it now.
job="${array}_$victim"
wait_for "scontrol show job '$job' | grep -q 'Restarts=1'" 30 || fail "task $victim was not requeued: $(tail -n 3 "$type_dir/logs/task-$victim.log")"
echo "requeued: $(scontrol show job "$job" | grep -oE 'JobState=[A-Z]+ Reason=[A-Za-z]+|Restarts=[0-9]+' | tr '\n' ' ')"
wait_for "scontrol show job '$job' | grep -q 'JobState=PENDING'" 30 && scontrol update JobId="$job" StartTime=now

wait_for "scontrol show job '$merge' | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT)'" 300 ||
  fail "the merge job did not finish in 300 s: $(squeue 2>&1 | tail -n 5)"
t_array=$(secs "$t0" "$(now)")
cat "$type_dir/logs/merge.log"
scontrol show job "$merge" | grep -q 'JobState=COMPLETED' || fail "merge job: $(scontrol show job "$merge" | grep -o 'JobState=[A-Z]*')"

echo "--- task $victim's log"
cat "$type_dir/logs/task-$victim.log"
sessions=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sessions'])" "$type_dir/shard-$victim/campaign.json")
[ "$sessions" -eq 2 ] || fail "shard $victim ran in $sessions sessions, not 2 (killed once, resumed once)"
grep -q "session 2" "$type_dir/logs/task-$victim.log" || fail "task $victim's log has no second session"
python3 "$src/tests/slurm/same_campaign.py" "$work/single/results.jsonl" "$type_dir/results.jsonl" || fail "merged != single"
# Before the merge's dedup too: the resumed shard reran no finished case.
cat "$type_dir"/shard-*/results.jsonl >"$work/shards.jsonl"
python3 "$src/tests/slurm/same_campaign.py" "$work/single/results.jsonl" "$work/shards.jsonl" || fail "shards != single"
# And per case the same output bits (whole-tensor digests).
python3 "$src/tools/bench/same_results.py" "$work/single/results.jsonl" "$type_dir/results.jsonl" | tail -n 1 ||
  fail "merged outputs differ from the single process's"
[ -f "$type_dir/report/junit.xml" ] && [ -f "$type_dir/report/report.html" ] || fail "no report or junit.xml"
# Where the array's time went, from the tasks' and the merge job's own time stamps (1 s steps).
stamps() { grep -hoE "$1 at [0-9T:-]+Z" "$type_dir"/logs/$2 | sed 's/.* at //' | xargs -I{} date -d {} +%s | sort -n; }
first=$(stamps "session 1 .*" 'task-*.log' | head -n 1) last=$(stamps "exit [0-9]+" 'task-*.log' | tail -n 1)
merged=$(stamps "merge of .*" merge.log | head -n 1)
echo "timings: single process ${t_single} s; Slurm array of $tasks tasks on $(nproc) CPUs ${t_array} s from submit to" \
  "merged report, with task $victim killed and requeued (tasks ran from first start to last exit $((last - first)) s," \
  "the merge job started $((merged - last)) s after)"
echo "PASSED"
