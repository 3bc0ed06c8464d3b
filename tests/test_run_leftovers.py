"""What a run leaves in its folder when it ends, however it ends: no ``live.json`` (the
live endpoint is gone) and no lock files (``.paddlecraft.lock``, the owner record)."""

from __future__ import annotations

import pytest
from live_kit import make_arena
from toy_arenas import ToyArena

from paddlecraft.arenas.engine import Callback, run_arena, standard_callbacks
from paddlecraft.arenas.engine.runlock import LOCK_NAME, OWNER_NAME, RunLock

QUIET = {"progress": False}


class Boom(RuntimeError):
    """A bug in user code."""


class BadResults(ToyArena):
    """An arena whose end-of-run extras raise (a bug in a user's arena)."""

    def extra_results(self):
        raise Boom("extra_results failed")


class FailsAtStart(Callback):
    """A callback inside the live one that raises when the run starts."""

    def on_run_start(self, loop):
        raise Boom("on_run_start failed")


def _left(run_dir):
    return sorted(p.name for p in run_dir.iterdir() if p.name in ("live.json", LOCK_NAME,
                                                                 OWNER_NAME))  # fmt: skip


def test_a_finished_run_leaves_no_lock_files(tmp_path):
    res = run_arena(make_arena(epochs=1), tmp_path, standard_callbacks(**QUIET))
    assert res["status"] == "finished" and (tmp_path / "results.json").is_file()
    assert _left(tmp_path) == []
    with RunLock(tmp_path, resume=True):  # the next one takes the folder as before
        assert (tmp_path / LOCK_NAME).exists()
    assert _left(tmp_path) == []


def test_a_live_run_whose_end_crashes_removes_live_json(tmp_path):
    arena = make_arena(BadResults, epochs=1)
    with pytest.raises(Boom):
        run_arena(arena, tmp_path, standard_callbacks(live=True, **QUIET))
    assert _left(tmp_path) == []


def test_a_live_run_whose_start_crashes_removes_live_json(tmp_path):
    cbs = [*standard_callbacks(live=True, **QUIET), FailsAtStart()]
    with pytest.raises(Boom):
        run_arena(make_arena(epochs=1), tmp_path, cbs)
    assert _left(tmp_path) == []
