#!/usr/bin/env bash
# Submits a kverify fuzz campaign to Slurm: per GPU type (a partition or a constraint) a job
# array of N tasks, task i running `kverify fuzz ... --shard i/N --devices all --resume` into
# DIR/<type>/shard-i (tools/slurm/task.sbatch), then a job after the array that merges the
# shards and writes the report and JUnit XML (tools/slurm/merge.sbatch); with two or more
# types a last job compares each type's report with the first's. Run it again on the same
# DIR to resume a campaign whose tasks did not all finish. README: "Campaigns on Slurm".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat <<'EOF'
usage: tools/slurm/submit.sh --dir DIR --tasks N [options] -- FUZZ-ARGS...
  --dir DIR            shared directory (its parent must exist), seen at this path on every node
  --tasks N            array tasks per GPU type (shards 0/N .. N-1/N)
  --partition P        one campaign on partition P, in DIR/P (repeatable: one per GPU type)
  --constraint C       one campaign on the nodes with feature C, in DIR/C (repeatable)
  --kverify BIN        the kverify binary, on a path every node sees (default: kverify on PATH)
  --sbatch ARG         an sbatch option for the array tasks, e.g. --sbatch=--gres=gpu:8 (repeatable)
  --merge-sbatch ARG   an sbatch option for the merge and compare jobs (repeatable)
  --max-requeues K     a task whose kverify dies is requeued at most K times (default 3)
  --dry-run            print the sbatch commands, submit nothing
FUZZ-ARGS are kverify fuzz's (--op ... --budget-cases ...; a --seed is drawn when missing);
--out, --shard and --resume are the script's. Without FUZZ-ARGS, DIR's campaign is resubmitted.
Prints what it submitted on stderr and the merge jobs' ids on stdout.
EOF
}

die() {
  echo "submit.sh: $*" >&2
  exit 2
}

# Options into globals: dir, tasks, types (name<TAB>sbatch option), bin, task_opts,
# merge_opts, max_requeues, dry_run, fuzz.
parse_args() {
  dir="" tasks="" bin="" max_requeues=3 dry_run=0
  types=() task_opts=() merge_opts=() fuzz=()
  while [ $# -gt 0 ]; do
    local opt=$1 val=""
    case $opt in
      --dry-run) dry_run=1; shift; continue ;;
      -h | --help) usage; exit 0 ;;
      --) shift; fuzz=("$@"); return ;;
      --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
      --*) [ $# -ge 2 ] || die "$opt needs a value (--help for usage)"; val=$2; shift 2 ;;
      *) die "unexpected '$opt': kverify fuzz's arguments go after -- (--help for usage)" ;;
    esac
    case $opt in
      --dir) dir=$val ;;
      --tasks) tasks=$val ;;
      --partition) types+=("$(type_name "$val")	--partition=$val") ;;
      --constraint) types+=("$(type_name "$val")	--constraint=$val") ;;
      --kverify) bin=$val ;;
      --sbatch) task_opts+=("$val") ;;
      --merge-sbatch) merge_opts+=("$val") ;;
      --max-requeues) max_requeues=$val ;;
      *) die "unknown option '$opt' (known: --dir --tasks --partition --constraint --kverify --sbatch" \
             "--merge-sbatch --max-requeues --dry-run; --help for usage)" ;;
    esac
  done
}

# A directory name for a partition or constraint ("h100&ib" -> "h100_ib").
type_name() {
  [ -n "$1" ] || die "an empty --partition or --constraint"
  printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'
}

check_args() {
  [ -n "$dir" ] || die "--dir DIR is required (the shared campaign directory)"
  [ -n "$tasks" ] || die "--tasks N is required (the number of array tasks)"
  [[ $tasks =~ ^[0-9]+$ ]] && [ "$tasks" -ge 1 ] || die "--tasks must be a positive count, not '$tasks'"
  [[ $max_requeues =~ ^[0-9]+$ ]] || die "--max-requeues must be a count >= 0, not '$max_requeues'"
  local parent
  parent=$(dirname "$dir")
  [ -d "$parent" ] || die "--dir $dir: its parent $parent does not exist"
  [ -e "$dir" ] && [ ! -d "$dir" ] && die "--dir $dir exists and is not a directory"
  dir=$(cd "$parent" && pwd)/$(basename "$dir")
  if [ -z "$bin" ]; then
    bin=$(command -v kverify) || die "no kverify on PATH: give --kverify BIN"
  fi
  [ -f "$bin" ] && [ -x "$bin" ] || die "--kverify $bin is not an executable file"
  bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
  [ ${#types[@]} -gt 0 ] || types=("default	")
  local names
  names=$(printf '%s\n' "${types[@]}" | cut -f1 | sort | uniq -d)
  [ -z "$names" ] || die "GPU type '$names' given twice"
  check_fuzz_args
}

check_fuzz_args() {
  local a has_op=0
  for a in "${fuzz[@]}"; do
    case $a in
      --out | --out=* | --shard | --shard=* | --resume)
        die "'$a' in the fuzz arguments: the script sets --out, --shard and --resume itself" ;;
      --op | --op=*) has_op=1 ;;
      *$'\n'*) die "a fuzz argument with a newline: '$a'" ;;
    esac
  done
  [ ${#fuzz[@]} -eq 0 ] || [ $has_op -eq 1 ] || die "the fuzz arguments need at least one --op (e.g. -- --op rms_norm.fwd)"
  if [ ${#fuzz[@]} -gt 0 ] && ! printf '%s\n' "${fuzz[@]}" | grep -qE '^--seed(=|$)'; then
    fuzz+=(--seed "$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')")  # one seed for every shard
  fi
  if [ ${#fuzz[@]} -gt 0 ] && ! printf '%s\n' "${fuzz[@]}" | grep -qE '^--devices(=|$)'; then
    fuzz+=(--devices all)
  fi
}

# Partitions and constraints the cluster knows, so a typo stops here, not in the queue.
check_types() {
  local t name opt val known f
  for t in "${types[@]}"; do
    name=${t%%	*} opt=${t#*	}
    val=${opt#*=}
    case $opt in
      --partition=*)
        scontrol show partition "$val" >/dev/null 2>&1 && continue
        known=$(sinfo -h -o %R 2>/dev/null | sort -u | tr '\n' ' ')
        known=${known% }
        die "unknown partition '$val' (this cluster has: ${known:-none})" ;;
      --constraint=*)
        known=$(sinfo -h -o %f 2>/dev/null | tr ',' '\n' | grep -vx '(null)' | sort -u | tr '\n' ' ')
        known=" $known"
        for f in $(printf '%s' "$val" | tr '&|,[]()!*' '         ' | sed 's/:[0-9]*//g'); do
          [[ $known == *" $f "* ]] || { known=${known# }; known=${known% }; die \
            "unknown node feature '$f' in --constraint $val (features: ${known:-none})"; }
        done ;;
    esac
  done
}

# DIR/<type>/fuzz.args and tasks: a new campaign's, or the stored ones when resubmitting.
prepare_type_dir() {
  local tdir=$1
  if [ -f "$tdir/fuzz.args" ]; then
    [ "$(cat "$tdir/tasks")" = "$tasks" ] || die "$tdir holds a campaign of $(cat "$tdir/tasks") tasks, not $tasks"
    if [ ${#fuzz[@]} -gt 0 ] && ! printf '%s\0' "${fuzz[@]}" | cmp -s - "$tdir/fuzz.args"; then
      die "$tdir holds a campaign with other fuzz arguments: resubmit without any after --, or use a new --dir"
    fi
    return
  fi
  [ ${#fuzz[@]} -gt 0 ] || die "$tdir holds no campaign: give kverify fuzz's arguments after --"
  [ $dry_run -eq 1 ] && return
  mkdir -p "$tdir/logs" "$tdir/status" || die "cannot create $tdir"
  printf '%s\0' "${fuzz[@]}" >"$tdir/fuzz.args"
  echo "$tasks" >"$tdir/tasks"
}

# sbatch with the given arguments; prints the job id (or, on --dry-run, the command).
submit() {
  if [ $dry_run -eq 1 ]; then
    printf '%q ' sbatch "$@" >&2
    echo >&2
    echo "<${1#--job-name=}>"
    return
  fi
  local out
  out=$(sbatch --parsable "$@" 2>&1) || die "sbatch refused: $(echo "$out" | tail -n 1)"
  echo "${out%%;*}"
}

submit_type() {
  local name=$1 opt=$2 tdir="$dir/$1" array merge
  local sel=()
  [ -z "$opt" ] || sel=("$opt")
  prepare_type_dir "$tdir"
  array=$(submit --job-name="kv-fuzz-$name" --array="0-$((tasks - 1))" --requeue --open-mode=append \
    --output="$tdir/logs/task-%a.log" "${sel[@]}" "${task_opts[@]}" \
    "$here/task.sbatch" "$bin" "$tdir" "$tasks" "$max_requeues")
  merge=$(submit --job-name="kv-merge-$name" --dependency="afterany:$array" --kill-on-invalid-dep=yes \
    --ntasks=1 --output="$tdir/logs/merge.log" "${merge_opts[@]}" "$here/merge.sbatch" "$bin" "$tdir" "$tasks")
  echo "$name: array job $array (${tasks} tasks) into $tdir/shard-*, merge job $merge -> $tdir/report/" >&2
  merges+=("$merge")
}

# With several GPU types: each type's report beside the first's (kverify compare).
submit_compare() {
  local first=${types[0]%%	*} t name cmd="set -u; code=0"
  for t in "${types[@]:1}"; do
    name=${t%%	*}
    cmd+="; $(printf '%q ' "$bin" compare "$dir/$first/report/report.json" "$dir/$name/report/report.json" \
      --out "$dir/compare-$first-vs-$name") || code=1"
  done
  local deps
  deps=$(IFS=:; echo "${merges[*]}")
  local job
  job=$(submit --job-name=kv-compare --dependency="afterany:$deps" --ntasks=1 --output="$dir/compare.log" \
    "${merge_opts[@]}" --wrap="$cmd; exit \$code")
  echo "compare job $job -> $dir/compare-$first-vs-*/compare.html" >&2
}

main() {
  parse_args "$@"
  check_args
  [ $dry_run -eq 1 ] || command -v sbatch >/dev/null || die "no sbatch on PATH (run this on a Slurm login node)"
  [ $dry_run -eq 1 ] || check_types
  [ $dry_run -eq 1 ] || mkdir -p "$dir" || die "cannot create $dir"
  merges=()
  [ ${#fuzz[@]} -eq 0 ] ||
    echo "each task: kverify fuzz $(printf '%q ' "${fuzz[@]}")--shard <i>/$tasks --resume --out $dir/<type>/shard-<i>" >&2
  local t
  for t in "${types[@]}"; do submit_type "${t%%	*}" "${t#*	}"; done
  [ ${#types[@]} -lt 2 ] || submit_compare
  [ $dry_run -eq 1 ] || echo "campaign: $dir (seed and options: $dir/*/shard-0/campaign.json)" >&2
  echo "${merges[*]}"
}

main "$@"
