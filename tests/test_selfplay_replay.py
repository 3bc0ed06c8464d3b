"""Search updates that learn how far away a result is (``agents.policy.value_discount``)
and train again on earlier updates' samples (``arena.update.replay``)."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import replay_arena as _arena

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.selfplay import SearchPlayer
from paddlecraft.arenas.selfplay.alphazero import search_controller
from paddlecraft.arenas.selfplay.replay import ReplayBuffer, average_duplicates, position_ids
from paddlecraft.arenas.selfplay.targets import outcome_samples

TTT_MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 32}


def _records(moves: dict[int, list[int]]) -> list[dict[str, np.ndarray]]:
    """Records as play_games writes them, one per ply: ``{game: [recorded plies]}``."""
    out = []
    for ply in range(10):
        games = [g for g, plies in moves.items() if ply in plies]
        if games:
            n = len(games)
            out.append({"ply": np.full(n, ply), "game": np.array(games),
                        "obs": np.zeros((n, 3, 3, 2), np.int8), "mask": np.ones((n, 9), bool),
                        "pi": np.full((n, 9), 1 / 9, np.float32)})  # fmt: skip
    return out


def test_discounted_outcomes_count_the_plies_to_the_deciding_move():
    g = 0.9
    recs = _records({
        0: [0, 1, 2, 3, 4],  # self-play: the first player (seat 0) wins with ply 4
        1: [1, 3],  # the learner sits second; the opponent wins with ply 4, not recorded
        2: [0, 2, 4, 6, 8],  # a draw
        3: [0, 2, 4, 6],  # the learner sits first and wins with ply 6
    })  # fmt: skip
    winner = np.array([0, 0, -1, 0])
    data = outcome_samples(recs, winner, discount=g)
    ply = np.concatenate([r["ply"] for r in recs])
    game = np.concatenate([r["game"] for r in recs])
    z = {(int(a), int(b)): float(v) for a, b, v in zip(game, ply, data["z"])}
    expect = {
        (0, 4): 1.0, (0, 3): -g, (0, 2): g**2, (0, 1): -(g**3), (0, 0): g**4,
        (1, 3): -g, (1, 1): -(g**3),
        **{(2, p): 0.0 for p in (0, 2, 4, 6, 8)},
        (3, 6): 1.0, (3, 4): g**2, (3, 2): g**4, (3, 0): g**6,
    }  # fmt: skip
    assert z.keys() == expect.keys()
    for k, v in expect.items():
        assert z[k] == pytest.approx(v, abs=1e-6), k
    plain = outcome_samples(recs, winner)  # undiscounted: the outcome alone
    assert np.array_equal(plain["z"], np.sign(data["z"]))


def test_replay_buffer_keeps_the_newest_rows_and_round_trips():
    buf = ReplayBuffer(5)
    buf.add({"x": np.arange(3), "y": np.arange(3) * 10.0})
    buf.add({"x": np.arange(3, 7), "y": np.arange(3, 7) * 10.0})
    assert len(buf) == 5 and sorted(buf.arrays["x"]) == [2, 3, 4, 5, 6]
    assert np.array_equal(buf.arrays["y"], buf.arrays["x"] * 10.0)  # rows stay together
    again = ReplayBuffer(5)
    again.load_state(buf.state())
    a = list(buf.minibatches(3, 4, np.random.default_rng(1)))
    b = list(again.minibatches(3, 4, np.random.default_rng(1)))
    assert all(np.array_equal(x["x"], y["x"]) for x, y in zip(a, b))
    assert all(len(set(m["x"].tolist())) == 4 for m in a)  # no row twice in a minibatch
    buf.add({"x": np.arange(10, 20), "y": np.zeros(10)})  # more than fit: the newest 5
    assert sorted(buf.arrays["x"]) == [15, 16, 17, 18, 19]
    with pytest.raises(ValueError, match="samples hold"):
        buf.add({"x": np.arange(2)})
    with pytest.raises(ValueError, match="arena.update.replay=5"):
        ReplayBuffer(6).load_state(buf.state())


def test_duplicate_positions_train_toward_their_mean_targets():
    rng = np.random.default_rng(0)
    obs = (rng.random((6, 3, 3, 2)) < 0.4).astype(np.float32)
    obs[3] = obs[0]
    obs[5] = obs[0]  # rows 0, 3, 5: one position; 1, 2, 4 each alone
    obs[4, 0, 0, 0] = 0.5  # not binary: compared byte for byte
    ids, count = position_ids(obs)
    assert count == 4 and ids[0] == ids[3] == ids[5] and len({ids[1], ids[2], ids[4], ids[0]}) == 4
    pi = np.eye(9, dtype=np.float32)[[0, 1, 2, 3, 4, 6]]
    data = {"obs": obs, "mask": obs[..., 0].reshape(6, 9) == 0, "pi": pi,
            "z": np.array([1, 0.5, -1, -1, 0, 0.5], np.float32)}  # fmt: skip
    out = average_duplicates(data)
    assert np.allclose(out["z"], [1 / 6, 0.5, -1, 1 / 6, 0, 1 / 6])
    expect = np.zeros(9)
    expect[[0, 3, 6]] = 1 / 3  # the three visit distributions, averaged
    assert np.allclose(out["pi"][[0, 3, 5]], expect) and np.array_equal(out["pi"][1], pi[1])
    assert out["obs"] is obs and out["mask"] is data["mask"] and out["z"].dtype == np.float32
    buf = ReplayBuffer(10)
    buf.add(data)
    (batch,) = buf.minibatches(1, 6, np.random.default_rng(0), average=True)
    order = position_ids(np.concatenate([obs, batch["obs"]]))[0]  # each drawn row's source
    src = [int(np.flatnonzero(order[:6] == i)[0]) for i in order[6:]]
    assert np.allclose(batch["z"], out["z"][src]) and np.array_equal(buf.arrays["z"][:6], data["z"])


def test_position_averaging_needs_search_updates(make_scope):
    policy = Policy(make_scope("pa"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    with pytest.raises(ConfigError, match="average_duplicates=true .* arena.algo=ppo"):
        _arena(policy, algo="ppo", update={"replay": 0, "average_duplicates": True})


def test_search_updates_fill_the_buffer_and_draw_from_it(make_scope):
    seed_everything(0)
    policy = Policy(make_scope("rb"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _arena(policy)
    total = 0
    for i in range(4):
        m = arena.train_step(i)
        total += 2 * int(m["positions"])  # each position and its mirror image
        assert m["replay_size"] == len(arena.replay) == min(300, total)
    assert total > 300  # the ring wrapped: the oldest samples were dropped
    # the buffer holds search targets: every pi sums to 1 on the legal moves
    pi, mask = arena.replay.arrays["pi"], arena.replay.arrays["mask"]
    assert np.allclose(pi.sum(1), 1) and (pi[~mask] == 0).all()


def test_replay_discount_and_position_averaging_resume_bit_identically():
    seed_everything(0)
    policy = Policy(
        "policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0, value_discount=0.9
    )
    passed = check_arena(_arena(policy, update={"average_duplicates": True}), steps=2)
    assert "resume from a checkpoint is bit-identical" in passed


def test_a_resume_with_another_buffer_size_is_refused_naming_the_saved_one(make_scope):
    seed_everything(0)
    policy = Policy(make_scope("rs"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    arena = _arena(policy)
    arena.train_step(0)
    state = arena.arena_state()
    for other in (0, 500):
        with pytest.raises(ConfigError, match="resume with arena.update.replay=300"):
            _arena(policy, update={"replay": other}).load_arena_state(state)
    again = _arena(policy)
    again.load_arena_state(state)
    assert len(again.replay) == len(arena.replay) and again.replay.head == arena.replay.head


def test_replay_needs_search_updates(make_scope):
    policy = Policy(make_scope("ppo"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9)
    with pytest.raises(ConfigError, match="arena.update.replay=100: .* set arena.algo=alphazero"):
        _arena(policy, algo="ppo", update={"replay": 100})
    _arena(policy, algo="ppo", update={"replay": 100}, search={"updates": 2})  # a search phase


def test_value_discount_is_checked_saved_and_searched_with(make_scope, tmp_path):
    with pytest.raises(ConfigError, match=r"value_discount=1.5: must be in \(0, 1\]"):
        Policy(make_scope("bad"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9,
               value_discount=1.5)  # fmt: skip
    policy = Policy(make_scope("vd"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9,
                    value_discount=0.95)  # fmt: skip
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("vd2"))
    assert loaded.value_discount == 0.95
    assert SearchPlayer(loaded, "tictactoe", 8).search.discount == 0.95
    arena = _arena(policy)
    act = search_controller(policy, arena.spec.rules, arena.cfg.search, np.random.default_rng(0))
    assert act.search.discount == 0.95  # the training search is discounted the same way
