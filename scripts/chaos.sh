#!/usr/bin/env bash
# Chaos on the dev cluster, measured (docs/reliability.md holds the table it printed):
#
#   scripts/chaos.sh                          # kill rank 1 of a 2-node run once per framework (minutes)
#   scripts/chaos.sh --kills 5                # five times per framework, each against an uninterrupted run
#   scripts/chaos.sh --parts node             # set a node of a running 2-node run down, resume it after
#   scripts/chaos.sh --parts ctld --runs 30   # kill -9 slurmctld under 30 runs and start it again
#
# `node` and `ctld` disturb every job on that cluster: run them only on a cluster of your own
# (FLOWTRAIN_DEVCLUSTER_DIR and FLOWTRAIN_DEVCLUSTER_CTLD_PORT, docs/devcluster.md) or when its other
# users expect it. The exit status is 0 only when every run completed (and every killed one restarted).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/devcluster.sh status >/dev/null || bash scripts/devcluster.sh start
eval "$(bash scripts/devcluster.sh env)"
exec .venv/bin/python scripts/chaos.py "$@"
