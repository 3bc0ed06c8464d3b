"""arena=marl's rollouts on Ray workers (``arena.workers``): the slicing and merging in this
process (the workers' own code, no Ray), the settings' errors, and the Ray cases of
``tests/marl_ray_cases.py`` inside a loopback-only network namespace."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.marl import GroupPolicy, MarlArena
from paddlecraft.arenas.marl.arena import ACT_STREAM, ENV_STREAM
from paddlecraft.arenas.marl.rollout import collect, copy_streams, merge_rollouts
from paddlecraft.arenas.marl.workers import RolloutWorker, rollout_task, slice_bounds
from tests.ray_namespace import run_namespace_cases

MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 16, "hidden_layers": 1}
TAG = {"name": "simple_tag_v3", "kwargs": {"max_cycles": 5}}
TINY = {"num_envs": 5, "rollout_steps": 12, "ppo_epochs": 1, "minibatches": 1,
        "eval_episodes": 2, "steps_per_epoch": 2, "animation": False}  # fmt: skip
#: what a batch's size may change in Paddle's CPU forward, relative to the values' scale
#: (measured: up to ~3e-7 of it)
ROUNDING = 1e-5


def _arena(**settings) -> MarlArena:
    groups = ("adversary", "agent")
    agents = {g: GroupPolicy(g, encoder=MLP, lr=1e-3) for g in groups}
    return MarlArena(agents, seed=3, env=TAG, **{**TINY, **settings})


def _sliced(arena: MarlArena, workers: int) -> dict:
    """This update's rollout as ``workers`` workers roll it: each `RolloutWorker` built
    here (as a Ray actor would be) on its slice, the slices merged."""
    bounds = slice_bounds(arena.cfg.num_envs, workers)
    configs = {g: (dict(p.config), tuple(p.allow_targets)) for g, p in arena.policies.items()}
    task = rollout_task(
        arena.policies, arena.norms, arena.cfg.rollout_steps,
        [arena.seed, ACT_STREAM, arena.updates], [arena.seed, ENV_STREAM, arena.updates],
    )  # fmt: skip
    parts = []
    for w in range(workers):
        env = (TAG["name"], TAG["kwargs"], None)
        worker = RolloutWorker(env, arena.groups, configs, arena.central,
                               (bounds[w], bounds[w + 1]), f"slice{workers}_{w}")  # fmt: skip
        parts.append(worker.rollout(task, check=lambda: None))
        worker.close()
    return merge_rollouts(parts, bounds[:-1])


def assert_same_rollout(a: dict, b: dict) -> float:
    """Everything the environment and the draws decide is equal; the critic's values agree
    to float rounding (Paddle's batched forward depends on the batch size). Returns the
    largest difference seen, relative to the values' scale."""
    assert a.keys() == b.keys() and a["episodes"] == b["episodes"] > 0
    assert np.array_equal(a["ended"], b["ended"])
    assert np.array_equal(a["episode_ends"], b["episode_ends"])
    worst = 0.0
    for g in a["episode_returns"]:
        assert a["episode_returns"][g] == b["episode_returns"][g]
        for k in ("obs", "critic", "actions", "logp", "rewards", "alive"):
            assert np.array_equal(a[g][k], b[g][k]), (g, k)
        for k in ("values", "next_values"):
            scale = max(1.0, float(np.abs(a[g][k]).max()))
            worst = max(worst, float(np.abs(a[g][k] - b[g][k]).max()) / scale)
    assert worst <= ROUNDING
    return worst


def test_slices_on_workers_roll_what_this_process_rolls():
    """The promise of per-copy streams: 1, 2 and 3 workers' slices, merged, are the
    in-process rollout (two teams, episodes ending and restarting inside the rollout)."""
    arena = _arena()
    arena.train_step(0)  # weights and value norms that are not the initial ones
    here = arena.rollout()
    assert here["episodes"] == 10  # two 5-step episodes of each copy
    for workers in (1, 2, 3):
        assert_same_rollout(here, _sliced(arena, workers))
    again = arena.rollout()
    assert all(np.array_equal(here[g]["actions"], again[g]["actions"]) for g in arena.groups)


def test_a_copy_draws_from_its_own_streams():
    """Copy i's rollout depends on copy i's streams alone: rolling copies 2..4 by
    themselves gives the full rollout's columns 2..4."""
    arena = _arena()
    full = arena.rollout()
    venv = type(arena.venv)(arena.make, 3, arena.groups)
    copies = range(2, 5)
    part = collect(
        venv, arena.policies, arena.norms, arena.cfg.rollout_steps,
        copy_streams([arena.seed, ACT_STREAM, 0], copies),
        copy_streams([arena.seed, ENV_STREAM, 0], copies),
        arena.central,
    )  # fmt: skip
    for g in arena.groups:
        assert np.array_equal(full[g]["actions"][:, 2:], part[g]["actions"])
        assert np.array_equal(full[g]["rewards"][:, 2:], part[g]["rewards"])


def test_merging_orders_episodes_by_step_then_copy():
    def part(ends, returns):
        arr = np.zeros((2, len(returns) and 1, 1), np.float32)
        return {"g": {"rewards": arr}, "ended": np.zeros((2, 1)),
                "episode_ends": np.array(ends, np.int64).reshape(-1, 2),
                "episode_returns": {"g": returns}}  # fmt: skip

    merged = merge_rollouts([part([(0, 0), (1, 0)], [1.0, 2.0]), part([(0, 0)], [3.0])], [0, 1])
    assert merged["episode_returns"]["g"] == [1.0, 3.0, 2.0]
    assert merged["episode_ends"].tolist() == [[0, 0], [0, 1], [1, 0]]
    assert merged["episodes"] == 3 and merged["ended"].shape == (2, 2)


def test_missing_ray_is_one_error_line_naming_the_extra(monkeypatch, tmp_path):
    from tests.mistake_driver import run_case

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ConfigError) as e:  # in the constructor: before any step
        _arena(workers={"count": 2})
    assert "pip install paddlecraft[ray]" in str(e.value) and "\n" not in str(e.value)
    assert _arena().cfg.workers.count == 0  # in this process, Ray or not
    run = tmp_path / "run"
    r = run_case(["arena=marl", "debug=smoke", "arena.workers.count=2", f"hydra.run.dir={run}"],
                 str(tmp_path))  # fmt: skip
    lines = [ln for ln in r["stderr"].splitlines() if ln.startswith("error:")]
    assert r["rc"] == 2 and len(lines) == 1 and "paddlecraft[ray]" in lines[0], r["stderr"]
    assert r["left"] == []  # no run folder made


@pytest.mark.parametrize(
    "workers,words",
    [({"count": -1}, ["arena.workers.count must be >= 0"]),
     ({"threads": 0}, ["arena.workers.threads"]),
     ({"count": 6}, ["arena.workers.count=6", "arena.num_envs=5"])],
)  # fmt: skip
def test_bad_worker_settings_are_one_line(workers, words):
    with pytest.raises(ConfigError) as e:
        _arena(workers=workers)
    assert all(w in str(e.value) for w in words) and "\n" not in str(e.value)


@pytest.mark.slow
def test_ray_rollout_cases_in_a_loopback_only_namespace():
    """Slow: starting Ray and two workers (each imports Paddle) takes ~20 s here; the
    in-process tests above run the workers' code. Two local Ray workers: the in-process rollout, a reproducible run, a resume, a stop
    while they roll, and close() (``tests/marl_ray_cases.py``)."""
    run_namespace_cases("marl_ray_cases.py", "not slow")
