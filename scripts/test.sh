#!/usr/bin/env bash
# The README's test command: set up a venv with everything the tests need, then run pytest.
# Usage: bash scripts/test.sh [pytest args]   (default: everything but the `slow` marker)
# GPU: install paddlepaddle-gpu into .venv first (docs/install.md); it is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# -qq: pip's errors only (no build-backend notices, no progress; a failure still shows)
echo "setting up the test environment in .venv (the first time: several minutes)" >&2
.venv/bin/python -m pip install -qq --upgrade pip
# the CPU build of Paddle only where no build (CPU or GPU) is installed yet
EXTRAS=test
if .venv/bin/python -I -c "import importlib.util as u, sys; sys.exit(u.find_spec('paddle') is not None)"; then
  EXTRAS=cpu,test
fi
.venv/bin/python -m pip install -qq -e ".[$EXTRAS]"
# the Ray launcher plugin alone (15 kB), so a fast test composes conf/hydra/launcher/ray.yaml
# against its real schema; --no-deps: ray itself is only imported when jobs launch
.venv/bin/python -m pip install -qq --no-deps "hydra-ray-launcher==1.2.2"
# a Chromium for the live page's browser test (tests/test_live_page.py): Debian's package
# where none is present and we may install one (root with apt-get); elsewhere the test says
# how to get one (or point PADDLECRAFT_CHROMIUM at a Chromium/Chrome binary)
if [ -z "${PADDLECRAFT_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 \
  && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the live page test (apt-get)" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "warning: apt-get could not install chromium; tests/test_live_page.py will fail" >&2
fi
.venv/bin/python -m ruff check .
# one pytest worker per core (pytest-xdist); a test file stays on one worker, so its
# module fixtures are built once; files are handed out in collection order, the heavy
# ones first (tests/conftest.py HEAVY_FIRST; docs/testing.md). A worker that dies (a crash
# in native code) ends the session at once, naming its test: xdist cannot hand the rest of
# a crashed worker's file to a replacement under --dist loadfile and would wait forever
if [ "$#" -eq 0 ]; then
  set -- -m "not slow" -n auto --dist loadfile --no-loadscope-reorder --max-worker-restart=0
  # one thread per worker (and per run a test starts): the workers are the parallelism;
  # Paddle's default here, a thread per core in every process, oversubscribes the cores
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fi
exec .venv/bin/python -m pytest -q "$@"
