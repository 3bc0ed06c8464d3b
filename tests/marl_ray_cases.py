"""arena=marl's rollouts on two local Ray workers, run by tests/test_marl_workers.py inside
``unshare -n`` (only the loopback interface exists there). Not collected on its own (no
``test_`` prefix). One pool of two workers serves every case (each worker is a process
importing Paddle: starting them is most of the time); the last case closes it."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import ray

from paddlecraft.arenas import run_arena, standard_callbacks
from paddlecraft.arenas.engine.interrupt import StepInterrupted
from paddlecraft.arenas.engine.loop import Callback
from paddlecraft.arenas.engine.ray_pool import weights_of
from paddlecraft.arenas.marl import GroupPolicy, MarlArena
from paddlecraft.arenas.marl.arena import ACT_STREAM, ENV_STREAM
from paddlecraft.arenas.marl.workers import rollout_task
from tests.test_marl_workers import assert_same_rollout

MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 16, "hidden_layers": 1}
TAG = {"name": "simple_tag_v3", "kwargs": {"max_cycles": 5}}
TINY = {"num_envs": 4, "rollout_steps": 8, "ppo_epochs": 2, "minibatches": 2,
        "eval_episodes": 2, "steps_per_epoch": 2, "epochs": 2, "animation": False}  # fmt: skip


def _arena(workers: int) -> MarlArena:
    agents = {g: GroupPolicy(g, encoder=MLP, lr=1e-3, seed=0) for g in ("adversary", "agent")}
    return MarlArena(agents, seed=5, env=TAG, workers={"count": workers}, **TINY)


@pytest.fixture(scope="module")
def pool():
    """Two workers on a local Ray of two CPUs, started by the first arena's first rollout
    (as a run starts them), then lent to every case's arena."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        arena = _arena(2)
        arena.rollout()
        workers, arena.rollout_workers = arena.rollout_workers, None
        arena.close()
        yield workers
        workers.close()
    finally:
        ray.shutdown()


@contextlib.contextmanager
def _on(arena: MarlArena, pool):
    """``arena`` rolls on the module's ``pool``, which outlives it."""
    arena.rollout_workers = pool
    try:
        yield arena
    finally:
        arena.rollout_workers = None
        arena.close()


def test_only_loopback_exists(pool):
    assert set(psutil.net_if_addrs()) == {"lo"} and pool.workers == 2
    assert ray.util.get_node_ip_address() == "127.0.0.1"


def test_two_workers_roll_what_this_process_rolls(pool):
    """workers.count=2 and 0: the same rollout (to float rounding in the critic's values),
    after an update has changed the weights and the value norms."""
    here = _arena(0)
    with _on(_arena(2), pool) as there:
        for a in (here, there):
            a.train_step(0)
        for g in here.groups:  # one update apart from rounding: reload the lead's weights
            there.policies[g].set_state_dict(here.policies[g].state_dict())
            there.norms[g].load(here.norms[g].state())
        assert_same_rollout(here.rollout(), there.rollout())
    here.close()


class _StopAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, loop, metrics) -> None:
        if loop.step == self.step:
            loop.request_stop("the test")


class _SigtermInRollout(Callback):
    """At the end of step ``step``: the next rollout sends this process a SIGTERM as it
    hands the workers their slices (the engine then abandons the step mid-rollout)."""

    def __init__(self, pool, step: int) -> None:
        self.pool, self.step, self.sent = pool, step, False

    def on_step_end(self, loop, metrics) -> None:
        if loop.step != self.step:
            return
        real = self.pool.collect

        def collect(task, check=None):
            del self.pool.collect  # the class's method again
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
            return real(task, check)

        self.pool.collect = collect


def _run(pool, run_dir: Path, *extra, resume: bool = False) -> tuple[dict, dict]:
    with _on(_arena(2), pool) as arena:
        cbs = [*standard_callbacks(checkpoint_every=1, progress=False), *extra]
        out = run_arena(arena, run_dir, cbs, resume=resume)
        weights = {
            f"{g}.{k}": v for g, p in arena.policies.items() for k, v in weights_of(p).items()
        }
    return out, weights


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and bool(a) and all(np.array_equal(a[k], b[k]) for k in a)


def test_a_run_on_workers_repeats_itself_and_resumes_bit_identically(pool, tmp_path):
    first, weights = _run(pool, tmp_path / "first")
    second, again = _run(pool, tmp_path / "second")
    assert first["status"] == second["status"] == "finished" and first["step"] == 4
    assert _same(weights, again) and first["metrics"] == second["metrics"]
    stopped, _ = _run(pool, tmp_path / "stopped", _StopAt(2))
    assert stopped["status"] == "stopped" and stopped["step"] == 2
    resumed, after = _run(pool, tmp_path / "stopped", resume=True)
    assert resumed["status"] == "finished" and resumed["step"] == 4
    assert _same(weights, after) and resumed["metrics"] == first["metrics"]
    term = _SigtermInRollout(pool, 1)
    cut, _ = _run(pool, tmp_path / "sigterm", term)
    assert term.sent and cut["status"] != "finished" and cut["step"] == 1, cut
    resumed, after = _run(pool, tmp_path / "sigterm", resume=True)
    assert resumed["step"] == 4 and _same(weights, after)


def test_a_stop_while_the_workers_roll_cancels_their_slices_and_keeps_them(pool):
    """The arena's check_interrupt raising mid-rollout ends the wait within a second (the
    slices cancelled: a worker polls Ray's flag before every step); the same workers roll
    the next update."""
    arena = _arena(0)
    long = rollout_task(
        arena.policies, arena.norms, 100_000, [5, ACT_STREAM, 0], [5, ENV_STREAM, 0]
    )
    end = time.monotonic() + 1.0

    def stop_after_a_second() -> None:
        if time.monotonic() > end:
            raise StepInterrupted("a stop")

    with pytest.raises(StepInterrupted):
        pool.collect(long, check=stop_after_a_second)
    assert time.monotonic() - end < 1.5
    short = rollout_task(arena.policies, arena.norms, 3, [5, ACT_STREAM, 0], [5, ENV_STREAM, 0])
    t0 = time.monotonic()
    data = pool.collect(short, check=lambda: None)
    assert data["ended"].shape == (3, 4) and pool.restarts == 0
    assert time.monotonic() - t0 < 10  # the cancelled 100k-step slices are not still running
    arena.close()


def test_close_ends_the_workers(pool):
    """The last case: an arena's close() kills its workers' processes."""
    pids = [pid for _, pid in pool.nodes]
    arena = _arena(2)
    arena.rollout_workers = pool
    arena.rollout()
    arena.close()
    assert pool.actors == [] and arena.rollout_workers is None

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    end = time.monotonic() + 10
    while not all(gone(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert all(gone(p) for p in pids), pids
