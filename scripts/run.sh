#!/usr/bin/env bash
# The README's main command: set up the venv if needed, then run an arena (default: classify).
# Usage: bash scripts/run.sh [hydra overrides]   e.g. bash scripts/run.sh arena=classify
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e .
fi
exec .venv/bin/python run.py "$@"
