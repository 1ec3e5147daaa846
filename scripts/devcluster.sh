#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for development and CI.
#
#   scripts/devcluster.sh install [--with LIST]  apt-get the Debian packages (munge, slurm-wlm, and
#                                   those of the extras in LIST) if missing
#   scripts/devcluster.sh start [--with LIST]    munged + slurmctld + 4 slurmd (n1..n4), plus the
#                                   extras in LIST; wait until they are up
#   scripts/devcluster.sh stop      stop the daemons by their PID files (state dir is kept)
#   scripts/devcluster.sh status    exit 0 when the controller answers, every node's slurmd responds
#                                   and the extras it was started with answer (nodes drained/down on
#                                   purpose are listed, with how to resume them)
#   scripts/devcluster.sh env       print `export SLURM_CONF=...` and the extras' addresses
#                                   (use: eval "$(scripts/devcluster.sh env)")
#
# Extras (LIST is comma-separated, "all" means all, "none" none; without --with: the
# FLOWTRAIN_DEVCLUSTER_WITH variable, else those the cluster was last started with):
#   dbd    slurmdbd on its own MariaDB: accounting, accounts ml and physics, QoS normal and short
#   rest   slurmrestd with JWT authentication (auth/jwt beside munge; tokens from `scontrol token`)
#   lmod   Lmod module files for one environment per framework (see devcluster_lmod.sh)
#
# Everything lives under ${FLOWTRAIN_DEVCLUSTER_DIR:-/tmp/flowtrain-devcluster}. Nodes n[1-4] all
# run on this host (Debian's Slurm is built with MULTIPLE_SLURMD), each claims 8 CPUs, 16000 MB
# and 4 fake GPUs (symlinks to /dev/null). Partitions: cpu (n1-n2, default) and gpu (n1-n4).
# Ports derive from FLOWTRAIN_DEVCLUSTER_CTLD_PORT (default 16817): slurmdbd +2, slurmrestd +3,
# MariaDB +4, the slurmd of n1..n4 +184..+187 (17001..17004), so two clusters with controller
# ports 100 apart never collide. Why each setting is there: see docs/devcluster.md. Must run as
# root (slurmd does).
set -euo pipefail
# Configuration and module files are world-readable, as on a site: slurmrestd runs as another user and
# Lmod's spider skips what others cannot read. The caller's umask may be the portal's or the CLI's 077
# (a test session restarting the cluster); the secrets (munge and JWT keys, the database password)
# are written under their own umask 077.
umask 022

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
[[ $CTLD_PORT =~ ^[0-9]+$ ]] && ((CTLD_PORT >= 1024 && CTLD_PORT <= 65000)) ||
    { echo "devcluster: error: FLOWTRAIN_DEVCLUSTER_CTLD_PORT=$CTLD_PORT is not a port in 1024..65000" >&2; exit 2; }
SLURMD_PORT=$((CTLD_PORT + 184))
DBD_PORT=$((CTLD_PORT + 2))
REST_PORT=$((CTLD_PORT + 3))
MYSQL_PORT=$((CTLD_PORT + 4))
FEATURES_FILE="$STATE_DIR/features"
KNOWN_EXTRAS=(dbd rest lmod)
START_TIMEOUT_S="${FLOWTRAIN_DEVCLUSTER_START_TIMEOUT:-60}"
STOP_TIMEOUT_S=15
PACKAGES=(munge slurm-wlm slurm-client slurmctld slurmd)
# What each extra needs beyond PACKAGES (Debian 12): auth/jwt is its own package.
declare -A EXTRA_PACKAGES=(
    [dbd]="slurmdbd slurm-wlm-mysql-plugin mariadb-server"
    [rest]="slurmrestd slurm-wlm-jwt-plugin"
    [lmod]="lmod"
)

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
    local missing=() p e extra=() wanted=("${PACKAGES[@]}")
    for e in "${EXTRAS[@]}"; do
        read -r -a extra <<<"${EXTRA_PACKAGES[$e]}"
        wanted+=("${extra[@]}")
    done
    for p in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then
        log "packages already installed: ${wanted[*]}"
        return 0
    fi
    need_root
    log "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    # scripts/setup.sh --test has just updated the lists when it installed its own packages
    [[ ${FLOWTRAIN_APT_UPDATED:-} == 1 ]] || apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    log "installed: $(dpkg-query -W -f='${Package} ${Version}\n' slurmctld munge | tr '\n' ' ')"
}

# --- start ---------------------------------------------------------------------------------

check_binaries() {
    local b wanted=(munged munge unmunge slurmctld slurmd sinfo scontrol sbatch)
    extra_on dbd && wanted+=(slurmdbd sacctmgr mariadbd mariadb-install-db mariadb)
    extra_on rest && wanted+=(slurmrestd setpriv)
    for b in "${wanted[@]}"; do
        command -v "$b" >/dev/null ||
            die "'$b' not found; install the packages first: scripts/devcluster.sh install${EXTRAS[*]:+ --with $(IFS=,; echo "${EXTRAS[*]}")}"
    done
    if extra_on rest && [[ ! -f /usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so && -d /usr/lib/x86_64-linux-gnu/slurm-wlm ]]; then
        die "Slurm's auth/jwt plugin is missing; install it: scripts/devcluster.sh install --with rest (slurm-wlm-jwt-plugin)"
    fi
    if extra_on lmod && [[ ! -x ${LMOD_PKG:-/usr/share/lmod/lmod}/libexec/spider ]]; then
        die "Lmod is not installed; install it: scripts/devcluster.sh install --with lmod"
    fi
}

# The slurm.conf lines that depend on the extras: accounting through slurmdbd (with per-task
# accounting, for sacct's MaxRSS and CPU time) and JWT as a second authentication type.
extra_config() {
    if extra_on dbd; then
        cat <<EOF
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
EOF
    else
        printf '%s\n' JobAcctGatherType=jobacct_gather/none AccountingStorageType=accounting_storage/none
    fi
    if extra_on rest; then
        printf '%s\n' AuthAltTypes=auth/jwt "AuthAltParameters=jwt_key=$JWT_KEY"
    fi
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
$(extra_config)
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG/jobcomp.txt
GresTypes=gpu
SlurmdParameters=config_overrides
NodeName=n[1-4] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$SLURMD_PORT-$((SLURMD_PORT + 3))] CPUs=8 RealMemory=16000 Gres=gpu:4 State=UNKNOWN
PartitionName=cpu Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=n[1-4] MaxTime=INFINITE State=UP
EOF
    cat >"$ETC/gres.conf.tmp" <<EOF
AutoDetect=off
NodeName=n[1-4] Name=gpu File=$GPU_DIR/nvidia[0-3]
EOF
    # A running cluster started with another configuration (other extras, other ports) is
    # restarted: slurmctld reads its authentication and accounting types only when it starts.
    CONFIG_CHANGED=0
    if ! cmp -s "$SLURM_CONF_PATH.tmp" "$SLURM_CONF_PATH" || ! cmp -s "$ETC/gres.conf.tmp" "$ETC/gres.conf"; then
        CONFIG_CHANGED=1
    fi
    mv "$SLURM_CONF_PATH.tmp" "$SLURM_CONF_PATH"
    mv "$ETC/gres.conf.tmp" "$ETC/gres.conf"
}

munge_ok() {
    munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1
}

start_munge() {
    [[ -d $MUNGE_DIR ]] && chmod 0755 "$MUNGE_DIR"
    if pid_alive "$MUNGE_PID" munged && munge_ok; then
        return 0
    fi
    # 0755: slurmrestd runs as the slurm user and must reach the socket (munged refuses a
    # directory others may write to, not one they may read).
    install -d -o munge -g munge -m 0755 "$MUNGE_DIR"
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
    [[ -z ${EXTRAS[*]} ]] || log "extras: ${EXTRAS[*]}"
    write_config
    extras_config
    if ((CONFIG_CHANGED)) && { pid_alive "$CTLD_PID" slurmctld || pid_alive "$DBD_PID" slurmdbd; }; then
        log "configuration changed: restarting the Slurm daemons"
        stop_slurm_daemons
    fi
    extras_stop_unwanted
    start_munge
    extras_before_ctld
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
    extras_after_nodes
    log "cluster up in $((SECONDS - t0))s; nodes: $(node_states | tr '\n' ' ')"
    warn_nodes
    cmd_env
    log "use it from your shell with: eval \"\$($0 env)\""
}

# The daemons that read slurm.conf or slurmdbd.conf (munged and MariaDB keep running).
stop_slurm_daemons() {
    local specs=() n
    for n in "${NODES[@]}"; do
        specs+=("$RUN/slurmd-$n.pid:slurmd:$n")
    done
    stop_pids "$REST_PID:slurmrestd"
    stop_pids "${specs[@]}"
    stop_pids "$CTLD_PID:slurmctld"
    stop_pids "$DBD_PID:slurmdbd"
}

cmd_stop() {
    stop_slurm_daemons
    extras_stop
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
    extras_status || return 1
    warn_nodes
    node_states
}

cmd_env() {
    echo "export SLURM_CONF=$SLURM_CONF_PATH"
    extras_env
}

usage() {
    echo "usage: $0 install|start|stop|status|env [--with dbd,rest,lmod|all|none]" >&2
    exit 2
}

# shellcheck source=scripts/devcluster-extras.sh
source "$(dirname "${BASH_SOURCE[0]}")/devcluster-extras.sh"

command=${1:-}
(($#)) && shift
with_list=${FLOWTRAIN_DEVCLUSTER_WITH:-}
while (($#)); do
    case $1 in
    --with) (($# >= 2)) || usage; with_list=$2; shift 2 ;;
    --with=*) with_list=${1#--with=}; shift ;;
    *) usage ;;
    esac
done
# Without --with (or FLOWTRAIN_DEVCLUSTER_WITH), the extras the cluster was last started with: a
# plain `start` after `stop`, or a test fixture's restart, brings back the same cluster.
[[ -n $with_list ]] || with_list=$(recorded_extras | paste -sd, -)
set_extras "$with_list"

case "$command" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
*) usage ;;
esac
