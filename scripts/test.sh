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
# the Ray launcher plugin alone (15 kB), so a fast test composes conf/hydra/launcher/ray.yaml
# against its real schema; --no-deps: ray itself is only imported when jobs launch
.venv/bin/python -m pip install --quiet --no-deps "hydra-ray-launcher==1.2.2"
.venv/bin/python -m ruff check .
if [ "$#" -eq 0 ]; then set -- -m "not slow"; fi
exec .venv/bin/python -m pytest -q "$@"
