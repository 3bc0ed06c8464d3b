"""Self-play collection on Ray actors, run inside a fresh network namespace so that every
packet stays on the loopback interface (Ray binds to the machine's non-loopback address
otherwise). The cases live in ``tests/ray_netns_cases.py``; two tests re-launch pytest on
them under ``unshare -n``, one on the fast cases and one (marked slow) on the slow ones."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ray_namespace import run_namespace_cases

ROOT = Path(__file__).resolve().parents[1]


def _namespace_cases(marker: str) -> None:
    """The cases of ``tests/ray_netns_cases.py`` selected by ``-m marker`` (one Ray start
    for them, plus one for the two-node cluster)."""
    run_namespace_cases("ray_netns_cases.py", marker)


@pytest.mark.slow
def test_ray_collection_cases_in_a_loopback_only_namespace():
    _namespace_cases("not slow")


@pytest.mark.slow
def test_slow_ray_collection_cases_in_a_loopback_only_namespace():
    """Exactness of a Ray step abandoned mid-collection (a pause, a stop), against an
    uninterrupted run's weights."""
    _namespace_cases("slow")


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


#: the guide's "What listens" table: which process listens, and where
GUIDE = ROOT / "docs" / "guide" / "selfplay-ray.md"
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def _guide_listeners() -> dict[str, str]:
    """``{process: address}`` from the guide's table under "What listens"."""
    import re

    text = GUIDE.read_text().split("### What listens", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", text, re.M)
    return dict(rows)


def _listening(pids: set[int], driver: int) -> set[tuple[str, str]]:
    """(process, address) of every TCP listening or bound UDP socket of ``pids``; the
    driver is named ``driver``, a Ray worker (``ray::IDLE``, ``ray::_Collector``...)
    ``worker``, and Ray's agents keep their process names."""
    import psutil

    out = set()
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            for c in proc.net_connections("inet"):
                if c.status == psutil.CONN_LISTEN or (c.type == socket.SOCK_DGRAM and not c.raddr):
                    name = proc.name()
                    if pid == driver:
                        name = "driver"
                    elif name.startswith("ray::") and not name.endswith("Agent"):
                        name = "worker"
                    out.add((name, c.laddr.ip))
    return out


@pytest.mark.slow
def test_a_local_ray_listens_on_loopback_only_as_the_guide_says(make_scope):
    """The issue's ``arena.workers.count=2`` on one machine, outside any network namespace:
    the Ray the collectors start listens on loopback only, and only the processes the
    guide names listen; Ray is shut down after."""
    import psutil
    import ray

    from paddlecraft.arenas.games import TicTacToe, make_baseline
    from paddlecraft.arenas.selfplay.workers import RayCollectors

    documented = _guide_listeners()
    assert set(documented.values()) == {"127.0.0.1"}
    assert {"gcs_server", "raylet", "driver", "worker"} <= set(documented)
    assert not ray.is_initialized()
    config = {"encoder": {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 18,
              "hidden_size": 8, "num_classes": 8}, "obs_shape": [3, 3, 2], "num_actions": 9}  # fmt: skip
    pool = RayCollectors(2, config, "tictactoe", {"random": make_baseline("random", TicTacToe)},
                         name=make_scope("loopback"))  # fmt: skip
    try:
        me = psutil.Process()
        found = _listening({me.pid} | {p.pid for p in me.children(recursive=True)}, me.pid)
        assert pool.started_ray and ray.util.get_node_ip_address() == "127.0.0.1"
    finally:
        pool.close()
    assert not ray.is_initialized()
    if "RAY_AUTH_MODE" not in os.environ and "RAY_AUTH_TOKEN" not in os.environ:
        token = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
        assert _mode(token) == 0o600  # as Ray left it after reading it
    names = {name for name, _ in found}
    assert {"gcs_server", "raylet", "driver", "worker"} <= names, found
    assert names <= set(documented), found
    assert {ip for _, ip in found} <= LOOPBACK, found


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_ray_token_file_is_the_owners_only(tmp_path, monkeypatch):
    """Ray writes ``~/.ray/auth_token`` 0644; a local Ray started here finds it 0600."""
    from paddlecraft.arenas.engine.local_ray import private_token_file, start_local_ray

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    token = home / ".ray" / "auth_token"
    seen = {}

    def init(**kwargs):  # what Ray's ray.init finds when it reads the token
        seen.update(mode=_mode(token), token=token.read_text(), address=kwargs.get("address"))

    ray = SimpleNamespace(init=init, util=SimpleNamespace(get_node_ip_address=lambda: "127.0.0.1"))
    assert start_local_ray(ray, num_cpus=1) == "127.0.0.1"
    assert seen["mode"] == 0o600 and re.fullmatch("[0-9a-f]{64}", seen["token"])
    assert seen["address"] == "local"  # a node of its own, not a cluster `ray start` left
    assert _mode(token.parent) == 0o700
    os.chmod(token, 0o644)  # as an earlier run, or Ray itself, left it
    assert private_token_file() == token
    assert _mode(token) == 0o600 and token.read_text() == seen["token"]  # tightened, kept
    own = tmp_path / "keys" / "ray.token"
    assert private_token_file({"RAY_AUTH_TOKEN_PATH": str(own)}) == own and _mode(own) == 0o600
    assert private_token_file({"RAY_AUTH_MODE": "disabled"}) is None  # Ray reads no file
    assert private_token_file({"RAY_AUTH_TOKEN": "in-the-environment"}) is None
