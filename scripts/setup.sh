#!/usr/bin/env bash
# Installs what FlowTrain needs on a fresh Debian 12 machine with Python 3.11.
#   scripts/setup.sh           Python packages (portal, core, the three frameworks) into .venv
#   scripts/setup.sh --test    also test tools, Debian's chromium (browser tests), ruby and nginx (the
#                              Open OnDemand app's test) and Slurm with every extra of the dev
#                              cluster (slurmdbd + MariaDB, slurmrestd, Lmod), and an MLflow server
#                              in .venv-mlflow (requirements-mlflow.txt)
# Idempotent: a second run with unchanged requirements installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

PYTHON=${PYTHON:-python3}
req=requirements.txt
[[ $want_test == 1 ]] && req=requirements-dev.txt

if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.flowtrain-$(basename "$req" .txt).sha256
digest=$(cat requirements.txt "$req" | sha256sum | cut -d' ' -f1)
if [[ ! -f $stamp || "$(cat "$stamp")" != "$digest" ]]; then
  echo "setup: installing $req into .venv (torch, tensorflow-cpu and paddlepaddle take a few minutes)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req"
  .venv/bin/python -m pip check
  echo "$digest" > "$stamp"
fi

if [[ $want_test == 1 ]]; then
  missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  # The Open OnDemand app's test renders its ERB files with ruby and proxies the portal with nginx.
  command -v ruby >/dev/null || missing+=(ruby)
  [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
  if (( ${#missing[@]} )); then
    echo "setup: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    export FLOWTRAIN_APT_UPDATED=1  # the package lists are fresh: devcluster.sh install skips its update
  fi
  bash scripts/devcluster.sh install --with all
  # The tests' MLflow server, in a venv of its own (its pins are not the frameworks'; docs/tracking.md).
  mlflow_stamp=.venv-mlflow/.flowtrain-mlflow.sha256
  mlflow_digest=$(sha256sum requirements-mlflow.txt | cut -d' ' -f1)
  if [[ ! -f $mlflow_stamp || "$(cat "$mlflow_stamp")" != "$mlflow_digest" ]]; then
    echo "setup: installing requirements-mlflow.txt into .venv-mlflow"
    [[ -x .venv-mlflow/bin/python ]] || "$PYTHON" -m venv .venv-mlflow
    .venv-mlflow/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-mlflow.txt
    .venv-mlflow/bin/python -m pip check
    echo "$mlflow_digest" > "$mlflow_stamp"
  fi
fi
