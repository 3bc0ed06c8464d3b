"""Self-play collection on Ray actors, run inside a fresh network namespace so that every
packet stays on the loopback interface (Ray binds to the machine's non-loopback address
otherwise). The cases live in ``tests/ray_netns_cases.py``; this test re-launches pytest
on them under ``unshare -n`` (one Ray start for all of them, plus one for the simulated
two-node cluster)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ray_collection_cases_in_a_loopback_only_namespace():
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("these tests need unshare(1) and ip(8) (util-linux, iproute2)")
    inner = (
        f"ip link set lo up && {sys.executable} -m pytest -q -x -p no:cacheprovider "
        f"{ROOT / 'tests' / 'ray_netns_cases.py'}"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run(
        ["unshare", "-rn", "sh", "-c", inner], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_missing_ray_is_one_error_line_naming_the_extra(monkeypatch, make_scope):
    from paddlecraft.agents import Policy
    from paddlecraft.agents.settings import ConfigError
    from paddlecraft.arenas import SelfPlayArena

    monkeypatch.setitem(sys.modules, "ray", None)
    mlp = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 18,
           "hidden_size": 8, "num_classes": 8}  # fmt: skip
    policy = Policy(make_scope("pol"), encoder=mlp, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    with pytest.raises(ConfigError) as e:  # before any game is played
        SelfPlayArena({"policy": policy}, data="tictactoe", workers={"count": 2})
    assert "pip install paddlecraft[ray]" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="arena.workers.count must be >= 0"):
        SelfPlayArena({"policy": policy}, data="tictactoe", workers={"count": -1})
