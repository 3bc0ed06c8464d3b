#!/usr/bin/env bash
# The README's test command: set up a venv with everything the tests need, then run pytest.
# Usage: bash scripts/test.sh [pytest args]   (default: everything but the `slow` marker)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
.venv/bin/python -m ruff check .
if [ "$#" -eq 0 ]; then set -- -m "not slow"; fi
exec .venv/bin/python -m pytest -q "$@"
