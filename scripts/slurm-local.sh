#!/usr/bin/env bash
# A real two-node Slurm cluster on this one machine, for primus-tune's Slurm tests and for a
# user who wants to try `--slurm` without a cluster: munged (with the package's key), one
# slurmctld and two slurmd (nodes n1 and n2, one CPU each), everything under one folder.
#
#   scripts/slurm-local.sh start [DIR]   # prints `export SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm-local.sh stop [DIR]    # stops the daemons it started (by pid) and keeps DIR
#
# Needs root (the daemons run as SlurmUser=root) and Debian's slurm-wlm and munge packages:
# installed with apt-get when missing unless PT_SLURM_INSTALL=0. PT_SLURM_PORT (default 17700)
# is the first of three TCP ports used (slurmctld, n1, n2). Verified with slurm-wlm 22.05.
set -eu
cmd=${1:-}
D=$(realpath -m "${2:-/tmp/pt-slurm}")
PORT=${PT_SLURM_PORT:-17700}

die() { echo "slurm-local: $*" >&2; exit 1; }

stop() {
  # Jobs first, so no job step outlives the cluster; then the daemons, by pid.
  if [ -f "$D/pids/slurmctld.pid" ] && kill -0 "$(cat "$D/pids/slurmctld.pid")" 2>/dev/null; then
    SLURM_CONF="$D/slurm.conf" scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 100); do
      [ -z "$(SLURM_CONF="$D/slurm.conf" squeue -h 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for p in "$D"/pids/slurmd-*.pid "$D"/pids/slurmctld.pid "$D"/pids/munged.pid; do
    [ -f "$p" ] || continue
    pid=$(cat "$p")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$p"
  done
}

start() {
  [ "$(id -u)" = 0 ] || die "needs root (SlurmUser=root)"
  if ! command -v slurmctld > /dev/null || ! command -v munged > /dev/null; then
    [ "${PT_SLURM_INSTALL:-1}" = 1 ] || die "slurm-wlm and munge are not installed"
    # One install at a time (several clusters may start at once).
    log="${TMPDIR:-/tmp}/slurm-local-apt.log"
    flock "${TMPDIR:-/tmp}/slurm-local-apt.lock" sh -c \
      'command -v slurmctld >/dev/null && command -v munged >/dev/null ||
       DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge' > "$log" 2>&1 \
      || die "apt-get install slurm-wlm munge failed (see $log)"
  fi
  [ -r /etc/munge/munge.key ] || die "no /etc/munge/munge.key (the munge package creates it)"
  stop
  # A fresh cluster: no job or node state from an earlier start.
  rm -rf "$D"/state "$D"/spool
  mkdir -p "$D"/state "$D"/spool/n1 "$D"/spool/n2 "$D"/log "$D"/munge "$D"/pids
  chmod 700 "$D"/munge
  host=$(hostname)
  cat > "$D/slurm.conf" <<CONF
ClusterName=ptlocal
SlurmctldHost=$host
SlurmctldPort=$PORT
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/pids/slurmctld.pid
SlurmdPidFile=$D/pids/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmdTimeout=30
NodeName=n1 NodeHostname=$host Port=$((PORT + 1)) CPUs=1 State=UNKNOWN
NodeName=n2 NodeHostname=$host Port=$((PORT + 2)) CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
  munged --force --socket="$D/munge/munge.socket" --pid-file="$D/pids/munged.pid" \
    --key-file=/etc/munge/munge.key --log-file="$D/log/munged.log" --seed-file="$D/munge/seed" \
    || die "munged did not start (see $D/log/munged.log)"
  slurmctld -c -f "$D/slurm.conf" || die "slurmctld did not start (see $D/log/slurmctld.log)"
  slurmd -f "$D/slurm.conf" -N n1 || die "slurmd n1 did not start (see $D/log/slurmd-n1.log)"
  slurmd -f "$D/slurm.conf" -N n2 || die "slurmd n2 did not start (see $D/log/slurmd-n2.log)"
  export SLURM_CONF="$D/slurm.conf"
  for _ in $(seq 100); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" = 2 ] && break
    sleep 0.2
  done
  [ "$idle" = 2 ] || { sinfo -N >&2 || true; die "the nodes did not come up idle (logs in $D/log)"; }
  echo "export SLURM_CONF=$D/slurm.conf"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) die "usage: slurm-local.sh start|stop [DIR]" ;;
esac
