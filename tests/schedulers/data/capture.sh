#!/usr/bin/env bash
# Recaptures the Slurm output fixtures in this folder from the running dev cluster
# (scripts/devcluster.sh start). Leaves every node resumed. Takes ~15 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
eval "$("$here/../../../scripts/devcluster.sh" env)"
work=$(mktemp -d)
cd "$work"
wait_state() { # JOBID STATE...
    local id=$1; shift
    for _ in $(seq 1 100); do
        s=$(scontrol -o show job "$id" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
        for want in "$@"; do [[ $s == "$want" ]] && return 0; done
        sleep 0.1
    done
    echo "job $id never reached $* (is $s)" >&2; return 1
}
ok=$(sbatch --parsable -J ok --wrap 'true')
fail=$(sbatch --parsable -J fail3 --wrap 'exit 3')
killed=$(sbatch --parsable -J killed --wrap 'kill -9 $$')
cancel=$(sbatch --parsable -J cancelme --wrap 'sleep 300')
gpus=$(sbatch --parsable -J gpus -p gpu -N 2 --ntasks-per-node=2 --gres=gpu:3 --wrap 'sleep 300')
wait_state "$cancel" RUNNING
scancel "$cancel"
wait_state "$gpus" RUNNING
req=$(sbatch --parsable -J requeue --requeue -p gpu -w n4 --wrap 'sleep 300')
wait_state "$req" RUNNING
blocker=$(sbatch --parsable -J big -p cpu -N 2 --exclusive --wrap 'sleep 300')
pend=$(sbatch --parsable -J pending -p cpu -N 2 --exclusive --wrap 'true')
scontrol update nodename=n3 state=drain reason=fixture
scontrol update nodename=n4 state=down reason=fixture
wait_state "$ok" COMPLETED; wait_state "$fail" FAILED; wait_state "$killed" FAILED; wait_state "$cancel" CANCELLED
wait_state "$req" PENDING
sinfo --json >"$here/sinfo.json"
squeue --json >"$here/squeue.json"
scontrol -d -o show node >"$here/scontrol_nodes.txt"
scontrol -o show partition >"$here/scontrol_partitions.txt"
for j in ok:$ok fail3:$fail killed:$killed cancelled:$cancel running:$gpus requeued:$req pending:$pend; do
    scontrol -o show job "${j#*:}" >"$here/scontrol_job_${j%%:*}.txt"
done
scancel "$gpus" "$req" "$blocker" "$pend"
scontrol update nodename=n3,n4 state=resume
sacct -c -P -o JobID,JobName,State,ExitCode,NodeList,Partition,Start,End >"$here/sacct_jobcomp.txt"
echo "job ids: ok=$ok fail=$fail killed=$killed cancel=$cancel gpus=$gpus requeue=$req pending=$pend"
rm -rf "$work"
