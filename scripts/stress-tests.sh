#!/usr/bin/env bash
# Runs one marker's tests N times with CPU hogs beside them and prints how many runs passed: a test
# that only passes on an idle machine will one day stop a good submission on a busy CI machine.
#
#   scripts/stress-tests.sh MARKER [RUNS] [HOGS] [-- PYTEST ARGS...]
#   scripts/stress-tests.sh browser          # 5 runs of -m browser, 2 busy loops beside them
#   scripts/stress-tests.sh slurm 3 4        # 3 runs, 4 busy loops
#
# Needs what scripts/test.sh installs (.venv, chromium, the dev cluster for slurm/resume). Each
# run's output goes to test-artifacts/stress/MARKER-RUN.log; the exit status is 0 only when every
# run passed.
set -euo pipefail
cd "$(dirname "$0")/.."

marker=${1:?usage: scripts/stress-tests.sh MARKER [RUNS] [HOGS] [-- PYTEST ARGS...]}
shift
runs=5 hogs=2
[[ $# -gt 0 && $1 != -- ]] && { runs=$1; shift; }
[[ $# -gt 0 && $1 != -- ]] && { hogs=$1; shift; }
[[ ${1:-} == -- ]] && shift

if [[ $marker == slurm || $marker == resume || $marker == ddp ]]; then
  bash scripts/devcluster.sh status >/dev/null || bash scripts/devcluster.sh start
  eval "$(bash scripts/devcluster.sh env)"
fi

hog_pids=()
stop_hogs() { for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do
  sh -c 'while :; do :; done' &
  hog_pids+=($!)
done

out=test-artifacts/stress
mkdir -p "$out"
passed=0
for run in $(seq "$runs"); do
  log="$out/$marker-$run.log"
  start=$SECONDS
  if .venv/bin/python -m pytest -p no:cacheprovider --timeout=900 -q -m "$marker" "$@" >"$log" 2>&1; then
    passed=$((passed + 1)) verdict=passed
  else
    verdict="FAILED (see $log)"
  fi
  printf 'stress: %s run %d/%d with %d busy loops: %s in %d s — %s\n' \
    "$marker" "$run" "$runs" "$hogs" "$verdict" $((SECONDS - start)) "$(tail -n 1 "$log")"
done
printf 'stress: %s: %d of %d runs passed with %d busy loops beside them\n' "$marker" "$passed" "$runs" "$hogs"
[[ $passed == "$runs" ]]
