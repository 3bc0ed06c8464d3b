#!/usr/bin/env bash
# The README's main command: set up the venv if needed, then run an arena (default: classify).
# Usage: bash scripts/run.sh [hydra overrides]   e.g. bash scripts/run.sh arena=classify
# GPU: create .venv and install paddlepaddle-gpu into it first (docs/install.md); it is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# (re)install when never done or when pyproject.toml changed since (new dependencies)
if [ ! -f .venv/.paddlecraft-installed ] || [ pyproject.toml -nt .venv/.paddlecraft-installed ]; then
  # -qq: pip's errors only (no build-backend notices, no progress; a failure still shows)
  echo "installing paddlecraft into .venv (first time: a few minutes)" >&2
  .venv/bin/python -m pip install -qq --upgrade pip
  # the CPU build of Paddle only where no build (CPU or GPU) is installed yet
  if .venv/bin/python -I -c "import importlib.util as u, sys; sys.exit(u.find_spec('paddle') is not None)"; then
    .venv/bin/python -m pip install -qq -e ".[cpu]"
  else
    .venv/bin/python -m pip install -qq -e .
  fi
  touch .venv/.paddlecraft-installed
fi
exec .venv/bin/python run.py "$@"
