#!/usr/bin/env bash
# A two-node Slurm cluster on this machine, for the campaign tests (tests/test_campaign.py) and for
# trying `toolkit campaign` without a real cluster. Debian's packages, no systemd, no accounting daemon.
#
#   scripts/slurm-cluster.sh start [DIR]   start munged, slurmctld and slurmd n1 + n2 (state under DIR,
#                                          default a new temp dir); prints SLURM_CONF=... and the PIDs
#   scripts/slurm-cluster.sh stop DIR      stop exactly the processes `start` recorded in DIR/pids (by PID)
#   scripts/slurm-cluster.sh status DIR    sinfo of the cluster
#
# Facts this follows (measured): /work/shared/reference/slurm.md. Nodes n1 and n2 both run on 127.0.0.1
# (ports of their own), each with one fake GPU: a character device (c 1 3, like /dev/null) named in
# gres.conf as `gpu:fake`, so `--gres=gpu:fake:1` allocates it and Slurm sets ROCR_VISIBLE_DEVICES /
# CUDA_VISIBLE_DEVICES / SLURM_JOB_GPUS as on a real GPU node. munged listens on a socket under DIR
# (AuthInfo=socket=...), so a host munged, if any, is not touched. Installs slurmctld slurmd
# slurm-client munge with apt-get when absent (root). Everything it starts is recorded in DIR/pids.
set -euo pipefail

die() { echo "slurm-cluster: $*" >&2; exit 1; }

need_packages() {
  local missing=()
  for exe in slurmctld slurmd sbatch munged mungekey; do
    command -v "$exe" >/dev/null 2>&1 || [ -x "/usr/sbin/$exe" ] || missing+=("$exe")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}; as root: apt-get install -y slurmctld slurmd slurm-client munge"
  echo "slurm-cluster: installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge >&2 \
    || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
           slurmctld slurmd slurm-client munge >&2; }
}

free_ports() {  # N free TCP ports on 127.0.0.1
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local t=$1 what=$2; shift 2
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}

pid_of() { cat "$1" 2>/dev/null || true; }

start() {
  need_packages
  [ "$(id -u)" -eq 0 ] || die "start needs root (slurmd runs jobs as their users; munged runs as user munge)"
  local dir=${1:-$(mktemp -d /tmp/tk-slurm.XXXXXX)}
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -e "$dir/pids" ] && die "$dir/pids exists: a cluster was started there; stop it first ($0 stop $dir)"
  chmod 755 "$dir"
  runuser -u munge -- test -x "$dir" \
    || die "user munge cannot reach $dir (a parent folder is not world-searchable, e.g. pytest's tmp): use a folder under /tmp"
  mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/dev" "$dir/munge"
  : > "$dir/pids"

  # munge: a key of our own, a socket under DIR, run as user munge
  chown munge:munge "$dir/munge"
  chmod 755 "$dir/munge"  # the socket dir: every user needs to reach the socket
  mungekey -c -k "$dir/munge/munge.key" 2>/dev/null || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chown munge:munge "$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  local sock="$dir/munge/munge.sock"
  runuser -u munge -- munged --socket="$sock" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" \
    || die "munged did not start (log $dir/munge/munged.log)"
  wait_for 10 munged test -s "$dir/munge/munged.pid" || die "munged wrote no pid file"
  echo "munged $(pid_of "$dir/munge/munged.pid")" >> "$dir/pids"
  # a killed munged can linger as a zombie: test it by use, not with pgrep
  wait_for 10 munge sh -c "munge -n -S '$sock' | unmunge -S '$sock'" || die "munge does not answer on $sock"

  # fake GPUs: one character device per node (a plain file would get no *_VISIBLE_DEVICES)
  for n in 1 2; do
    [ -c "$dir/dev/gpu$n" ] || mknod -m 666 "$dir/dev/gpu$n" c 1 3
  done

  read -r ctl_port n1_port n2_port <<<"$(free_ports 3)"
  local cpus=1
  cat > "$dir/etc/slurm.conf" <<EOF
# written by scripts/slurm-cluster.sh: two nodes on 127.0.0.1, one fake GPU each, no accounting daemon
ClusterName=toolkit
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=30
SlurmdTimeout=60
SlurmdParameters=config_overrides
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n1_port CPUs=$cpus RealMemory=1000 Gres=gpu:fake:1 Feature=fakegpu,n1 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n2_port CPUs=$cpus RealMemory=1000 Gres=gpu:fake:1 Feature=fakegpu,n2 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
  cat > "$dir/etc/gres.conf" <<EOF
NodeName=n1 Name=gpu Type=fake File=$dir/dev/gpu1
NodeName=n2 Name=gpu Type=fake File=$dir/dev/gpu2
EOF
  export SLURM_CONF="$dir/etc/slurm.conf"

  slurmctld -c || die "slurmctld did not start (log $dir/log/slurmctld.log)"
  wait_for 10 slurmctld test -s "$dir/run/slurmctld.pid" || die "slurmctld wrote no pid file (log $dir/log/slurmctld.log)"
  echo "slurmctld $(pid_of "$dir/run/slurmctld.pid")" >> "$dir/pids"
  for n in n1 n2; do
    mkdir -p "$dir/spool/$n"
    slurmd -N "$n" || die "slurmd $n did not start (log $dir/log/slurmd-$n.log)"
    wait_for 10 "slurmd $n" test -s "$dir/run/slurmd-$n.pid" || die "slurmd $n wrote no pid file"
    echo "slurmd-$n $(pid_of "$dir/run/slurmd-$n.pid")" >> "$dir/pids"
  done
  idle() { [ "$(sinfo -h -N -o '%N %t' | grep -c ' idle$')" -ge 2 ]; }
  wait_for 30 "two idle nodes" idle || { sinfo -N >&2 || true; die "nodes not idle after 30 s (logs in $dir/log)"; }

  echo "SLURM_CONF=$SLURM_CONF"
  echo "DIR=$dir"
  echo "PIDS $(tr '\n' ' ' < "$dir/pids")"
}

stop() {
  local dir=${1:?usage: $0 stop DIR}
  [ -f "$dir/pids" ] || die "$dir/pids not found: nothing this script started there"
  local pids=()
  # slurmd first, then slurmctld, then munged (reverse start order)
  while read -r name pid; do
    [ -n "${pid:-}" ] || continue
    pids=("$pid" "${pids[@]}")
    echo "stopping $name ($pid)" >&2
  done < "$dir/pids"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  local end=$((SECONDS + 15))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do
      # a zombie (exited, not yet reaped by its parent) counts as stopped
      [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = "Z" ] && break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != "Z" ]; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  mv "$dir/pids" "$dir/pids.stopped"
  echo "stopped: ${pids[*]}"
}

status() {
  local dir=${1:?usage: $0 status DIR}
  SLURM_CONF="$dir/etc/slurm.conf" sinfo -N -o '%N %t %G %f'
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  status) shift; status "$@" ;;
  *) echo "usage: $0 start [DIR] | stop DIR | status DIR" >&2; exit 2 ;;
esac
