"""Run a file of Ray cases inside a fresh network namespace (``unshare -rn``), where the
loopback interface is all there is, so that every packet Ray sends stays on it (Ray binds
to the machine's non-loopback address otherwise). Used by tests/test_selfplay_ray.py and
tests/test_marl_workers.py; the case files have no ``test_`` prefix, so pytest does not
collect them on their own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_namespace_cases(cases: str, marker: str) -> None:
    """Run the cases of ``tests/<cases>`` selected by ``-m marker`` in a fresh network
    namespace; fail with the end of their output when any fails."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("these tests need unshare(1) and ip(8) (util-linux, iproute2)")
    inner = (
        f"ip link set lo up && {sys.executable} -m pytest -q -x -p no:cacheprovider "
        f"-m '{marker}' {ROOT / 'tests' / cases}"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run(
        ["unshare", "-rn", "sh", "-c", inner], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
