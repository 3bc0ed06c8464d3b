"""The moves-left head (``agents.policy.moves_left``, Leela Chess Zero's): its targets from
self-play records, training toward them, the settings' checks, the saved policy searching
as trained, and a bit-identical resume with it on."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from selfplay_kit import replay_arena as _arena
from selfplay_kit import ttt_boards, ttt_policy

from paddlecraft.agents import Agent
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay import SearchPlayer
from paddlecraft.arenas.selfplay.alphazero import alphazero_step, search_controller
from paddlecraft.arenas.selfplay.config import UpdateConfig
from paddlecraft.arenas.selfplay.targets import moves_left_targets


def _records(moves: dict[int, list[int]]) -> list[dict[str, np.ndarray]]:
    """Records as play_games writes them, one per ply: ``{game: [recorded plies]}``."""
    out = []
    for ply in range(10):
        games = [g for g, plies in moves.items() if ply in plies]
        if games:
            out.append({"ply": np.full(len(games), ply), "game": np.array(games)})
    return out


def test_targets_count_the_plies_to_the_end_of_each_game():
    recs = _records({
        0: [0, 1, 2, 3, 4],  # self-play: the first player wins with ply 4
        1: [1, 3],  # the learner sits second; the opponent wins with ply 4, not recorded
        2: [0, 2, 4, 6, 8],  # a draw: the board fills with ply 8
        3: [0, 2, 4, 6],  # the learner sits first and wins with ply 6
    })  # fmt: skip
    got = moves_left_targets(recs, np.array([0, 0, -1, 0]), max_moves=9)
    game = np.concatenate([r["game"] for r in recs])
    ply = np.concatenate([r["ply"] for r in recs])
    end = {0: 4, 1: 4, 2: 8, 3: 6}  # the last ply of each game
    want = np.array([end[int(g)] - p + 1 for g, p in zip(game, ply)], np.float32)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert got[(game == 0) & (ply == 4)] == 1  # the winning move: one ply left


def test_the_head_trains_toward_the_plies_left(make_scope):
    policy = ttt_policy(make_scope("ml"), moves_left=True, lr=0.01)
    obs = ttt_boards(6)  # six boards with i stones each
    batch = {
        "obs": obs,
        "mask": np.ones((6, 9), bool),
        "pi": np.full((6, 9), 1 / 9, np.float32),
        "z": np.zeros(6, np.float32),
        "moves_left": np.array([9, 8, 6, 5, 2, 1], np.float32),
    }
    u = UpdateConfig()
    first = alphazero_step(policy, batch, u)
    for _ in range(300):
        last = alphazero_step(policy, batch, u)
    assert last["moves_left_loss"] < first["moves_left_loss"] / 20
    _, _, plies = policy.priors_values_and_moves_left(obs, batch["mask"])
    assert np.abs(plies - batch["moves_left"]).max() < 0.5  # within half a ply
    assert ((plies >= 0) & (plies <= 9)).all()  # the head's range: a full board at most


def test_off_leaves_the_policy_as_it_was(make_scope):
    name = make_scope("off")
    head = ttt_policy(name, moves_left=True)
    with_head = {k: v.numpy() for k, v in head.state_dict().items()}
    del head
    gc.collect()
    plain = ttt_policy(name)  # the same name and seed: the same initial weights
    assert not hasattr(plain, "moves_left_head")
    without = {k: v.numpy() for k, v in plain.state_dict().items()}
    assert set(with_head) - set(without) == {"moves_left_head.weight", "moves_left_head.bias"}
    assert all(np.array_equal(v, with_head[k]) for k, v in without.items())
    s = plain.search_settings()
    assert s["moves_left_weight"] == 0.0 and s["evaluate"] == plain.priors_and_values
    u = UpdateConfig()
    batch = {"obs": np.zeros((2, 3, 3, 2), np.float32), "mask": np.ones((2, 9), bool),
             "pi": np.full((2, 9), 1 / 9, np.float32), "z": np.zeros(2, np.float32)}  # fmt: skip
    assert "moves_left_loss" not in alphazero_step(plain, batch, u)


def test_settings_are_checked(make_scope):
    with pytest.raises(
        ConfigError, match=r"moves_left_weight=0.05: .* set agents\..*moves_left=true"
    ):
        ttt_policy(make_scope("w"), moves_left_weight=0.05)
    with pytest.raises(ConfigError, match=r"moves_left_weight=-1.0: must be >= 0"):
        ttt_policy(make_scope("n"), moves_left=True, moves_left_weight=-1.0)


def test_saved_policy_searches_as_trained(make_scope, tmp_path):
    policy = ttt_policy(make_scope("sv"), moves_left=True, moves_left_weight=0.05)
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("sv2"))
    assert loaded.moves_left and loaded.moves_left_weight == 0.05
    obs, mask = np.zeros((1, 3, 3, 2), np.float32), np.ones((1, 9), bool)
    want = policy.priors_values_and_moves_left(obs, mask)
    got = loaded.priors_values_and_moves_left(obs, mask)
    assert all(np.array_equal(x, y) for x, y in zip(want, got))
    assert SearchPlayer(loaded, "tictactoe", 8).search.moves_left_weight == 0.05
    arena = _arena(policy)
    act = search_controller(policy, arena.spec.rules, arena.cfg.search, np.random.default_rng(0))
    assert act.search.moves_left_weight == 0.05  # the training search uses it too
    res = act.search.search(*arena.spec.rules.from_planes(obs.astype(np.int8)))
    assert res.moves_left is not None and (res.moves_left[0][res.visits[0] > 0] > 0).all()


def test_search_updates_train_the_head_and_resume_bit_identically():
    seed_everything(0)
    policy = ttt_policy("policy", moves_left=True, moves_left_weight=0.05)
    arena = _arena(policy)
    m = arena.train_step(0)
    assert m["moves_left_loss"] > 0
    plies = arena.replay.arrays["moves_left"][: len(arena.replay)]
    assert plies.min() >= 1 and plies.max() <= 9
    passed = check_arena(_arena(policy), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed
