#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for development and CI.
#
#   scripts/devcluster.sh install   apt-get the Debian packages (munge, slurm-wlm) if missing
#   scripts/devcluster.sh start     munged + slurmctld + 4 slurmd (n1..n4), wait until they are up
#   scripts/devcluster.sh stop      stop the daemons by their PID files (state dir is kept)
#   scripts/devcluster.sh status    exit 0 when the controller answers and every node's slurmd responds
#                                   (nodes drained/down on purpose are listed, with how to resume them)
#   scripts/devcluster.sh env       print `export SLURM_CONF=...` (use: eval "$(scripts/devcluster.sh env)")
#
# Everything lives under ${FLOWTRAIN_DEVCLUSTER_DIR:-/tmp/flowtrain-devcluster}. Nodes n[1-4] all
# run on this host (Debian's Slurm is built with MULTIPLE_SLURMD), each claims 8 CPUs, 16000 MB
# and 4 fake GPUs (symlinks to /dev/null). Partitions: cpu (n1-n2, default) and gpu (n1-n4).
# Why each setting is there: see docs/devcluster.md. Must run as root (slurmd does).
set -euo pipefail

STATE_DIR="${FLOWTRAIN_DEVCLUSTER_DIR:-/tmp/flowtrain-devcluster}"
ETC="$STATE_DIR/etc"
RUN="$STATE_DIR/run"
LOG="$STATE_DIR/log"
SPOOL="$STATE_DIR/spool"
MUNGE_DIR="$STATE_DIR/munge"
GPU_DIR="$STATE_DIR/gpu"
SLURM_CONF_PATH="$ETC/slurm.conf"
MUNGE_SOCKET="$MUNGE_DIR/munge.socket"
MUNGE_PID="$MUNGE_DIR/munged.pid"
CTLD_PID="$RUN/slurmctld.pid"
NODES=(n1 n2 n3 n4)
CTLD_PORT="${FLOWTRAIN_DEVCLUSTER_CTLD_PORT:-16817}"
START_TIMEOUT_S="${FLOWTRAIN_DEVCLUSTER_START_TIMEOUT:-60}"
STOP_TIMEOUT_S=15
PACKAGES=(munge slurm-wlm slurm-client slurmctld slurmd)

export SLURM_CONF="$SLURM_CONF_PATH"

log() { printf 'devcluster: %s\n' "$*" >&2; }
die() { printf 'devcluster: error: %s\n' "$*" >&2; exit 1; }

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (slurmd and munged need it); you are uid $(id -u)"
}

# --- processes -----------------------------------------------------------------------------

# proc_running PID: the process exists and is not a zombie (a killed daemon whose parent never
# reaps it, e.g. when PID 1 of a container is not an init, would otherwise look alive forever).
proc_running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z ]]
}

# pid_alive PIDFILE COMM [ARG]: the pid file names a live process whose command is COMM (and whose
# command line contains ARG). Guards against stale pid files whose PID was reused by another process.
pid_alive() {
    local pidfile=$1 comm=$2 arg=${3:-} pid
    [[ -s $pidfile ]] || return 1
    pid=$(tr -dc '0-9' <"$pidfile")
    [[ -n $pid ]] && proc_running "$pid" || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]] || return 1
    if [[ -n $arg ]]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qw -- "$arg" || return 1
    fi
    return 0
}

# stop_pids PIDFILE:COMM[:ARG] ...: SIGTERM all, wait up to STOP_TIMEOUT_S, then SIGKILL.
stop_pids() {
    local spec pidfile comm arg pid pids=() deadline
    for spec in "$@"; do
        IFS=: read -r pidfile comm arg <<<"$spec"
        if pid_alive "$pidfile" "$comm" "$arg"; then
            pid=$(tr -dc '0-9' <"$pidfile")
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    deadline=$((SECONDS + STOP_TIMEOUT_S))
    while ((SECONDS < deadline)); do
        local alive=()
        for pid in "${pids[@]}"; do
            proc_running "$pid" && alive+=("$pid")
        done
        pids=("${alive[@]}")
        ((${#pids[@]} == 0)) && break
        sleep 0.2
    done
    for pid in "${pids[@]}"; do
        log "pid $pid did not exit within ${STOP_TIMEOUT_S}s of SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    done
    for spec in "$@"; do
        IFS=: read -r pidfile _ _ <<<"$spec"
        rm -f "$pidfile"
    done
}

# --- install -------------------------------------------------------------------------------

cmd_install() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then
        log "packages already installed: ${PACKAGES[*]}"
        return 0
    fi
    need_root
    log "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    log "installed: $(dpkg-query -W -f='${Package} ${Version}\n' slurmctld munge | tr '\n' ' ')"
}

# --- start ---------------------------------------------------------------------------------

check_binaries() {
    local b
    for b in munged munge unmunge slurmctld slurmd sinfo scontrol sbatch; do
        command -v "$b" >/dev/null ||
            die "'$b' not found; install the packages first: scripts/devcluster.sh install"
    done
}

write_config() {
    local host
    host=$(hostname -s)
    mkdir -p "$ETC" "$RUN" "$LOG" "$SPOOL/ctld" "$GPU_DIR"
    local i
    for i in 0 1 2 3; do
        ln -sfn /dev/null "$GPU_DIR/nvidia$i"
    done
    # Written to a temp file and moved, so a running cluster never reads half a file.
    cat >"$SLURM_CONF_PATH.tmp" <<EOF
# Generated by scripts/devcluster.sh; edits are overwritten on the next start.
ClusterName=flowtrain
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/slurmd-%n
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
SchedulerType=sched/backfill
MailProg=/bin/true
ReturnToService=1
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG/jobcomp.txt
GresTypes=gpu
SlurmdParameters=config_overrides
NodeName=n[1-4] NodeHostname=$host NodeAddr=127.0.0.1 Port=[17001-17004] CPUs=8 RealMemory=16000 Gres=gpu:4 State=UNKNOWN
PartitionName=cpu Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=n[1-4] MaxTime=INFINITE State=UP
EOF
    cat >"$ETC/gres.conf.tmp" <<EOF
AutoDetect=off
NodeName=n[1-4] Name=gpu File=$GPU_DIR/nvidia[0-3]
EOF
    mv "$SLURM_CONF_PATH.tmp" "$SLURM_CONF_PATH"
    mv "$ETC/gres.conf.tmp" "$ETC/gres.conf"
}

munge_ok() {
    munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1
}

start_munge() {
    if pid_alive "$MUNGE_PID" munged && munge_ok; then
        return 0
    fi
    install -d -o munge -g munge -m 0700 "$MUNGE_DIR"
    if [[ ! -s $MUNGE_DIR/munge.key ]]; then
        dd if=/dev/urandom bs=1 count=1024 of="$MUNGE_DIR/munge.key" status=none
    fi
    chown munge:munge "$MUNGE_DIR/munge.key"
    chmod 0400 "$MUNGE_DIR/munge.key"
    rm -f "$MUNGE_PID"
    # --force: take over a socket left behind by a munged that died without cleaning up.
    (close_fds; exec runuser -u munge -- munged --force \
        --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
        --pid-file="$MUNGE_PID" --log-file="$MUNGE_DIR/munged.log" \
        --seed-file="$MUNGE_DIR/munged.seed") </dev/null >/dev/null 2>&1 ||
        die "munged failed to start; see $MUNGE_DIR/munged.log"
    local deadline=$((SECONDS + 10))
    until munge_ok; do
        ((SECONDS < deadline)) || die "munged does not answer on $MUNGE_SOCKET; see $MUNGE_DIR/munged.log"
        sleep 0.1
    done
}

# close_fds: close every descriptor above 2 in this (sub)shell, so that a daemon started from it
# keeps none of the caller's files open (e.g. a lock taken with flock(1) around this script, which
# a long-lived daemon would otherwise hold for ever).
close_fds() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        ((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
    done
    return 0
}

# spawn PIDFILE LOGFILE CMD...: run CMD in the foreground mode of the daemon, detached from our
# stdin/stdout (so callers capturing our output are not held open), and record its PID.
spawn() {
    local pidfile=$1 out=$2
    shift 2
    (close_fds; exec setsid "$@") </dev/null >>"$out" 2>&1 &
    echo $! >"$pidfile"
}

# Nodes whose slurmd this run started; start waits until each has registered with slurmctld again
# (a restarted slurmctld reports the recovered, old node states before any slurmd has spoken).
SPAWNED_NODES=()
SPAWN_EPOCH=0

start_slurm() {
    SPAWN_EPOCH=$(date +%s)
    if ! pid_alive "$CTLD_PID" slurmctld; then
        rm -f "$CTLD_PID"
        spawn "$CTLD_PID" "$LOG/slurmctld.out" slurmctld -D -f "$SLURM_CONF_PATH"
    fi
    local n
    for n in "${NODES[@]}"; do
        mkdir -p "$SPOOL/slurmd-$n"
        if ! pid_alive "$RUN/slurmd-$n.pid" slurmd "$n"; then
            rm -f "$RUN/slurmd-$n.pid"
            spawn "$RUN/slurmd-$n.pid" "$LOG/slurmd-$n.out" slurmd -D -N "$n" -f "$SLURM_CONF_PATH"
            SPAWNED_NODES+=("$n")
        fi
    done
}

# Node states as "name state" lines, one per node (sinfo -N lists a node once per partition).
node_states() {
    timeout 10 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u
}

# Every node's slurmd is registered and responding: no '*' (not responding) suffix, not unknown.
# A node drained or set down on purpose counts as responding (its daemon is fine); see warn_nodes.
nodes_responding() {
    local states n
    states=$(node_states) || return 1
    n=$(awk '$2 !~ /[*~#%!]$/ && $2 !~ /^(unk|inval|fail|boot|npc)/' <<<"$states" | wc -l)
    [[ $n -eq ${#NODES[@]} ]]
}

# Warn (stderr) about nodes that respond but take no work, with the command that brings them back.
warn_nodes() {
    local bad
    bad=$(timeout 10 sinfo -h -N -o '%N %t %E' 2>/dev/null | sort -u | awk '$2 !~ /^(idle|mix|alloc|comp)$/')
    if [[ -n $bad ]]; then
        log "nodes taking no work (name state reason):"
        printf '  %s\n' "$bad" >&2
        log "bring one back with: scontrol update nodename=NODE state=resume"
    fi
}

# Every slurmd started by this run has registered: its SlurmdStartTime is not older than the spawn.
spawned_registered() {
    local n line started
    for n in "${SPAWNED_NODES[@]}"; do
        line=$(timeout 10 scontrol -o show node "$n" 2>/dev/null) || return 1
        started=$(grep -o 'SlurmdStartTime=[^ ]*' <<<"$line" | cut -d= -f2)
        [[ -n $started && $started != None ]] || return 1
        (($(date -d "$started" +%s) >= SPAWN_EPOCH)) || return 1
    done
}

daemons_alive() {
    local n
    pid_alive "$CTLD_PID" slurmctld || return 1
    for n in "${NODES[@]}"; do
        pid_alive "$RUN/slurmd-$n.pid" slurmd "$n" || return 1
    done
}

cmd_start() {
    need_root
    check_binaries
    local t0=$SECONDS
    write_config
    start_munge
    start_slurm
    local deadline=$((SECONDS + START_TIMEOUT_S))
    until spawned_registered && nodes_responding; do
        if ! pid_alive "$CTLD_PID" slurmctld; then
            tail -n 20 "$LOG/slurmctld.log" "$LOG/slurmctld.out" >&2 2>/dev/null || true
            die "slurmctld exited during start; see $LOG/slurmctld.log"
        fi
        if ((SECONDS >= deadline)); then
            log "nodes not all up after ${START_TIMEOUT_S}s:"
            node_states >&2 || true
            die "see $LOG/slurmd-n*.log and $LOG/slurmctld.log"
        fi
        sleep 0.3
    done
    log "cluster up in $((SECONDS - t0))s; nodes: $(node_states | tr '\n' ' ')"
    warn_nodes
    echo "export SLURM_CONF=$SLURM_CONF_PATH"
    log "use it from your shell with: eval \"\$($0 env)\""
}

cmd_stop() {
    local specs=() n
    for n in "${NODES[@]}"; do
        specs+=("$RUN/slurmd-$n.pid:slurmd:$n")
    done
    stop_pids "${specs[@]}"
    stop_pids "$CTLD_PID:slurmctld"
    stop_pids "$MUNGE_PID:munged"
    log "stopped (state kept in $STATE_DIR)"
}

cmd_status() {
    if [[ ! -f $SLURM_CONF_PATH ]]; then
        log "not configured ($SLURM_CONF_PATH missing); run: scripts/devcluster.sh start"
        return 1
    fi
    if ! daemons_alive; then
        log "some daemons are not running; run: scripts/devcluster.sh start"
        return 1
    fi
    if ! timeout 10 scontrol ping >/dev/null 2>&1; then
        log "controller does not answer (SLURM_CONF=$SLURM_CONF_PATH); run: scripts/devcluster.sh start"
        return 1
    fi
    if ! nodes_responding; then
        log "not every node is responding:"
        node_states >&2 || true
        return 1
    fi
    warn_nodes
    node_states
}

cmd_env() {
    echo "export SLURM_CONF=$SLURM_CONF_PATH"
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
*)
    echo "usage: $0 install|start|stop|status|env" >&2
    exit 2
    ;;
esac
