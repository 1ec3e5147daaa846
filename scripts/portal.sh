#!/usr/bin/env bash
# Starts the FlowTrain portal on a fresh machine: installs what it needs, then serves
# http://localhost:${PORT:-8501}. Settings: FLOWTRAIN_CONFIG (see README), FLOWTRAIN_HOME (default ./var).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m streamlit run app.py --server.port "${PORT:-8501}" --server.headless true \
  --browser.gatherUsageStats false --server.fileWatcherType none --client.toolbarMode minimal "$@"
