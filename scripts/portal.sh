#!/usr/bin/env bash
# Starts the FlowTrain portal on a fresh machine: installs what it needs, then serves
# http://127.0.0.1:${PORT:-8501}. Settings: FLOWTRAIN_CONFIG (see README), FLOWTRAIN_HOME (default ./var).
# It listens on the settings file's [portal] address (default 127.0.0.1, this machine only);
# FLOWTRAIN_ADDRESS overrides it. Behind a reverse proxy, see README "Deployment".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
umask 077  # run directories, the registry and logs are private to the portal's account
# The client address is the connection's own: Streamlit's server (uvicorn) would otherwise take it
# from X-Forwarded-For on loopback connections, which any local user can send (README "Deployment").
export FORWARDED_ALLOW_IPS=""
ADDRESS=${FLOWTRAIN_ADDRESS:-$(.venv/bin/python -c 'import settings; print(settings.load_settings().portal_address)')}
# serve.py: app.py's pages plus the portal's upload route, which writes an ONNX model to disk in pieces
# up to the site's [portal] max_onnx_upload_mb; Streamlit's own uploaders keep .streamlit/config.toml's
# maxUploadSize (the largest of them, "Try the model", 50 MB)
exec .venv/bin/python -m streamlit run serve.py --server.address "$ADDRESS" --server.port "${PORT:-8501}" \
  --server.headless true \
  --browser.gatherUsageStats false --server.fileWatcherType none --client.toolbarMode minimal \
  --client.showErrorDetails none "$@"
