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
set +e
.venv/bin/python -m pytest -p no:cacheprovider --timeout=900 "$@"
rc=$?
set -e
if [[ $rc == 5 ]]; then
  echo "test: pytest collected no tests for these arguments ($*): nothing was checked" >&2
  exit 1
fi
exit $rc
