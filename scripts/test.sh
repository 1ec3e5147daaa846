#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the three frameworks, Debian's chromium and
# Slurm, starts the project's real 4-node dev cluster with every extra the tests need (slurmdbd on
# MariaDB, slurmrestd, Lmod module files), runs ruff and every test (none skipped in CI).
# Extra arguments go to pytest, e.g.  scripts/test.sh -m "slurm"  or  scripts/test.sh tests/core
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests' session fixture restarts the cluster with the same extras when it finds it down.
export FLOWTRAIN_DEVCLUSTER_WITH=${FLOWTRAIN_DEVCLUSTER_WITH:-all}
bash scripts/setup.sh --test
bash scripts/devcluster.sh start
eval "$(bash scripts/devcluster.sh env)"

echo "test: ruff check"
.venv/bin/ruff check --quiet .

mkdir -p test-artifacts
# Two phases (tests/conftest.py): every test but those marked `alone` on FLOWTRAIN_TEST_WORKERS pytest-xdist
# workers (default 2: the CI machine's cores), each test module whole on one worker and every test of the dev
# Slurm cluster in one group; then the `alone` tests (they measure time, speed or load) with nothing beside
# them. FLOWTRAIN_TEST_WORKERS=1: one serial pytest run, as before the split.
# --durations=30: every run prints its 30 slowest tests/fixtures, so a test that eats the CI budget is seen.
workers=${FLOWTRAIN_TEST_WORKERS:-2}
if ! [[ $workers =~ ^[1-9][0-9]*$ ]]; then
  echo "test: FLOWTRAIN_TEST_WORKERS=$workers: expected a whole number of workers, 1 or more" >&2
  exit 2
fi
pytest=(.venv/bin/python -m pytest -p no:cacheprovider --timeout=900 --durations=30)
set +e
if [[ $workers == 1 ]]; then
  echo "test: one serial run (FLOWTRAIN_TEST_WORKERS=1)"
  "${pytest[@]}" "$@"
  rc_parallel=$? rc_alone=5
else
  echo "test: phase 1 of 2: every test not marked 'alone', on $workers workers"
  "${pytest[@]}" -n "$workers" --dist loadgroup --flowtrain-phase parallel "$@"
  rc_parallel=$?
  echo "test: phase 2 of 2: the tests marked 'alone' (time, speed or load), one at a time with nothing beside them"
  "${pytest[@]}" --flowtrain-phase alone "$@"
  rc_alone=$?
fi
set -e
if [[ $rc_parallel == 5 && $rc_alone == 5 ]]; then
  echo "test: pytest collected no tests for these arguments ($*): nothing was checked" >&2
  exit 1
fi
# Exit 5 (no test for these arguments) in one phase is no failure when the other phase ran tests.
[[ $rc_parallel == 5 ]] && rc_parallel=0
[[ $rc_alone == 5 ]] && rc_alone=0
(( workers > 1 )) && echo "test: exit status: phase 1 (parallel) $rc_parallel, phase 2 (alone) $rc_alone"
(( rc_parallel != 0 )) && exit "$rc_parallel"
exit "$rc_alone"
