"""Self-play collection in worker processes: same games as in-process, reproducible,
errors reported with the worker's traceback, workers stopped when a run ends."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from paddlecraft.agents import Policy
from paddlecraft.arenas import SelfPlayArena, register_configs
from paddlecraft.arenas.engine.app import run_from_config
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import TicTacToe, make_baseline
from paddlecraft.arenas.selfplay.league import weights_of
from paddlecraft.arenas.selfplay.workers import CollectorPool

ROOT = Path(__file__).resolve().parents[1]
TTT_MLP = {
    "_target_": "paddlecraft.encoders.ImageMLPEncoder",
    "input_size": 18,
    "hidden_size": 32,
    "num_classes": 32,
}

GAMES = 36


def _policy(name: str) -> Policy:
    return Policy(name, encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)


def _arena(policy: Policy, workers: int) -> SelfPlayArena:
    return SelfPlayArena(
        {"policy": policy},
        data="tictactoe",
        games_per_step=GAMES,
        pool_opponents_per_step=2,
        latest_ratio=0.5,
        train_anchors={"random": 0.25},
        eval_games={"random": 4},
        collect_workers=workers,
    )


@pytest.fixture(scope="module")
def pool():
    """Two worker processes for the tic-tac-toe test policy (started once: ~5 s)."""
    p = CollectorPool(
        2,
        {"encoder": TTT_MLP, "obs_shape": [3, 3, 2], "num_actions": 9},
        "tictactoe",
        {"random": make_baseline("random", TicTacToe)},
        name="test_collector",
    )
    yield p
    p.close()


def _summary(rollout: dict) -> dict:
    recs = rollout["records"]
    return {
        "n": rollout["n"],
        "games": len(rollout["winner"]),
        "finished": int(np.isin(rollout["winner"], (-1, 0, 1)).sum()),
        "positions": rollout["metrics"]["positions"],
        "record_rows": sum(len(r["game"]) for r in recs),
        "games_with_learner_moves": len(np.unique(np.concatenate([r["game"] for r in recs]))),
        **{k: v for k, v in rollout["metrics"].items() if k.startswith("games_vs_")},
    }


def test_worker_collection_plays_as_many_games_as_in_process(make_scope):
    """The acceptance check of issue 8: two workers play the step's games, all of them,
    with the same opponent plan as single-process collection."""
    got = {}
    for workers in (0, 2):
        seed_everything(0)
        name = make_scope(f"pol{workers}_")
        policy = _policy(name)
        with _arena(policy, workers) as arena:
            arena._take_snapshot()
            arena._take_snapshot()
            rollout = arena._collect()
            got[workers] = _summary(rollout)
            for r in rollout["records"]:  # every recorded learner move was legal
                assert r["mask"][np.arange(len(r["action"])), r["action"]].all()
                assert np.isfinite(r["logp"]).all() and (r["logp"] <= 0).all()
        if workers:
            assert arena._pool_workers is None  # close() stopped them
            assert not [p for p in mp.active_children() if f"{name}_collector" in p.name]
    single, multi = got[0], got[2]
    assert single["games"] == multi["games"] == single["n"] == multi["n"] == GAMES
    assert multi["finished"] == GAMES
    # the learner sits in every game, and the records are exactly its moves
    assert multi["games_with_learner_moves"] == GAMES
    assert multi["record_rows"] == multi["positions"]
    # same plan: the same number of games against each opponent kind
    plan_keys = [k for k in single if k.startswith("games_vs_")]
    assert plan_keys and {k: single[k] for k in plan_keys} == {k: multi[k] for k in plan_keys}
    assert sum(single[k] for k in plan_keys) == GAMES


def test_worker_collection_is_reproducible_and_uses_the_sent_weights(pool, make_scope):
    policy = _policy(make_scope("pol"))
    n = 10
    seats = np.zeros((n, 2), np.int64)
    seats[np.arange(n) % 2 == 1, 1] = 1  # odd games: the random anchor plays second
    plan = [("learner", weights_of(policy)), ("anchor", "random")]
    a = pool.play(seats, plan, seed=[0, 1])
    b = pool.play(seats, plan, seed=[0, 1])
    c = pool.play(seats, plan, seed=[0, 2])

    def actions(run):
        return np.concatenate([r["action"] for r in run[1]])

    assert np.array_equal(a[0], b[0]) and a[2] == b[2]
    assert np.array_equal(actions(a), actions(b))
    assert not np.array_equal(actions(a), actions(c))  # another seed, other games
    # record indices are global (worker 1 played games 5..9) and every move is there:
    # tic-tac-toe games last 5-9 moves
    games = np.concatenate([r["game"] for r in a[1]])
    assert set(games.tolist()) == set(range(n))
    assert 5 * n <= a[2] <= 9 * n
    # the workers played the weights they were sent: their log-probabilities and
    # values are this process's policy's, on the same boards
    obs = np.concatenate([r["obs"] for r in a[1]])
    masks = np.concatenate([r["mask"] for r in a[1]])
    _, logp, value = policy.act(obs, masks, greedy=True, return_info=True)
    logits, ref_value = policy(obs)
    ref_logp = policy.masked_log_probs(logits, masks).numpy()
    rows = np.arange(len(obs))
    assert np.allclose(
        np.concatenate([r["logp"] for r in a[1]]), ref_logp[rows, actions(a)], atol=1e-5
    )
    assert np.allclose(
        np.concatenate([r["value"] for r in a[1]]), ref_value.numpy().reshape(-1), atol=1e-5
    )
    assert logp.shape == value.shape == (len(obs),)


def test_a_failing_task_reports_the_worker_traceback_and_the_pool_survives(pool, make_scope):
    policy = _policy(make_scope("pol"))
    seats = np.zeros((4, 2), np.int64)
    with pytest.raises(RuntimeError, match="unknown controller kind 'oracle'"):
        pool.play(seats, [("oracle", None)], seed=[0])
    winner, _, moves = pool.play(seats, [("learner", weights_of(policy))], seed=[0])
    assert len(winner) == 4 and moves >= 20


def test_workers_ignore_ctrl_c_so_the_learner_can_finish_its_step(pool, make_scope):
    """Ctrl-C reaches the whole process group; the learner checkpoints and stops the
    workers itself, so a worker must survive the signal."""
    policy = _policy(make_scope("pol"))
    for p in pool._procs:
        os.kill(p.pid, signal.SIGINT)
        os.kill(p.pid, signal.SIGTERM)
    time.sleep(0.5)
    assert all(p.is_alive() for p in pool._procs)
    winner, _, moves = pool.play(np.zeros((4, 2), np.int64), [("learner", weights_of(policy))], [1])
    assert len(winner) == 4 and moves >= 20


def test_bad_worker_settings_are_refused_before_work_starts(make_scope):
    policy = _policy(make_scope("pol"))
    with pytest.raises(ValueError, match="arena.collect_workers must be >= 0"):
        _arena(policy, -1)


def test_run_py_path_with_workers_finishes_and_stops_them(tmp_path):
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "arena=selfplay",
                "game=tictactoe",
                "arena.epochs=1",
                "arena.steps_per_epoch=2",
                "arena.games_per_step=32",
                "arena.collect_workers=2",
                "arena.eval_games.random=8",
                "arena.eval_games.minimax=8",
                "arena.final_eval_games.random=8",
                "arena.final_eval_games.minimax=8",
                "trainer.progress=false",
            ],
        )
    value = run_from_config(cfg, tmp_path)
    assert 0.0 <= value <= 1.0
    assert (tmp_path / "results.json").is_file()
    assert not [p for p in mp.active_children() if "policy_collector" in p.name]
