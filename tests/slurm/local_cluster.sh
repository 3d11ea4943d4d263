# A one-node Slurm cluster on this machine for tests/slurm/slurm_campaign.sh (sourced): a
# private munged (its own key and socket), slurmctld and one slurmd, all in one temporary
# directory, on free ports, CPU-only. cluster_start fails with the reason in $cluster_why;
# cluster_stop cancels every job of this cluster and stops the daemons it started.

cluster_pids=()
cluster_why=""

# Two free TCP ports on the loopback.
free_ports() {
  python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])'
}

# slurm.conf for one node described as slurmd sees this machine (slurmd -C).
write_slurm_conf() {
  local t=$1 host=$2 ctld_port=$3 slurmd_port=$4 node
  node=$(slurmd -C | head -n 1 | sed -E 's/RealMemory=[0-9]+/RealMemory=1000/')
  cat >"$t/slurm.conf" <<EOF
ClusterName=kvtest
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$t/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$t/state
SlurmdSpoolDir=$t/spool
SlurmctldPidFile=$t/slurmctld.pid
SlurmdPidFile=$t/slurmd.pid
SlurmctldLogFile=$t/slurmctld.log
SlurmdLogFile=$t/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
JobRequeue=1
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$node Feature=cpu State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

# Waits up to $2 seconds for `$1` to succeed.
wait_for() {
  local cmd=$1 deadline=$((SECONDS + $2))
  until eval "$cmd" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

cluster_start() {
  local t=$1 host ports
  host=$(hostname -s)
  mkdir -p "$t/state" "$t/spool"
  chmod 755 "$t"  # munged wants its socket's directories searchable by all
  dd if=/dev/urandom of="$t/munge.key" bs=1024 count=1 status=none && chmod 600 "$t/munge.key"
  munged -F --force --socket="$t/munge.sock" --key-file="$t/munge.key" --pid-file="$t/munged.pid" \
    --seed-file="$t/munged.seed" --log-file="$t/munged.log" >"$t/munged.out" 2>&1 &
  cluster_pids+=($!)
  wait_for "munge -n -S '$t/munge.sock'" 15 || { cluster_why="munged did not start: $(tail -n 2 "$t/munged.out")"; return 1; }
  read -r -a ports <<<"$(free_ports)"
  write_slurm_conf "$t" "$host" "${ports[0]}" "${ports[1]}"
  export SLURM_CONF=$t/slurm.conf
  slurmctld -D -f "$SLURM_CONF" >"$t/slurmctld.out" 2>&1 &
  cluster_pids+=($!)
  slurmd -D -f "$SLURM_CONF" >"$t/slurmd.out" 2>&1 &
  cluster_pids+=($!)
  if ! wait_for "sinfo -h -o %T | grep -qx idle" 60; then
    cluster_why="the node did not come up idle in 60 s: $(sinfo -h -o '%T %E' 2>&1 | head -n 1); slurmctld: $(tail -n 1 "$t/slurmctld.log" 2>&1); slurmd: $(tail -n 1 "$t/slurmd.log" 2>&1)"
    return 1
  fi
  echo "cluster: munged, slurmctld (port ${ports[0]}) and slurmd (port ${ports[1]}) on $host; $(slurmd -C | head -n 1)"
}

cluster_stop() {
  if [ -n "${SLURM_CONF:-}" ] && [ ${#cluster_pids[@]} -ge 3 ]; then
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u)
    [ -z "$jobs" ] || scancel $jobs 2>/dev/null
    wait_for "[ -z \"\$(squeue -h 2>/dev/null)\" ]" 30 || echo "cluster: jobs still listed after 30 s"
  fi
  local p
  for ((k = ${#cluster_pids[@]} - 1; k >= 0; k--)); do
    p=${cluster_pids[k]}
    kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  cluster_pids=()
}
