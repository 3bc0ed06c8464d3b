"""Mirror-averaged evaluation (``agents.policy.search_mirror``, `SearchPlayer(mirror=)`):
the network's results for a position averaged with its left-right mirror image's."""

from __future__ import annotations

import numpy as np
from selfplay_kit import targets_script

from paddlecraft.agents import Agent, Policy
from paddlecraft.arenas.games import ConnectFour, TicTacToe
from paddlecraft.arenas.games.evaluators import mirror_actions, mirror_averaged
from paddlecraft.arenas.selfplay import SearchPlayer

C4_MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 32}


def lopsided(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, ...]:
    """A network that favours the left: priors falling with the column, the value the
    share of the mover's stones left of the centre, plies left 10 x that."""
    n, _, cols = planes.shape[:3]
    p = np.where(masks, np.linspace(2.0, 0.5, masks.shape[1]), 0.0)
    mine = planes[..., 0].astype(np.float64)  # [n, rows, cols]
    left = mine[:, :, : cols // 2].sum(axis=(1, 2)) / np.maximum(mine.sum(axis=(1, 2)), 1)
    return p / p.sum(axis=1, keepdims=True), left, 10 * left


def test_mirror_actions_map_each_move_to_its_mirror_image():
    assert mirror_actions(6, 7, 7).tolist() == [6, 5, 4, 3, 2, 1, 0]  # Connect Four: columns
    ttt = mirror_actions(3, 3, 9)  # tic-tac-toe: squares r * 3 + c -> r * 3 + 2 - c
    assert ttt.tolist() == [2, 1, 0, 5, 4, 3, 8, 7, 6]
    assert (ttt[ttt] == np.arange(9)).all()


def test_the_results_are_the_mean_of_a_position_and_its_mirror_image():
    planes, masks = ConnectFour(2).observe()  # [2, 6, 7, 2], [2, 7]
    planes = planes.copy()
    planes[0, 5, 0, 0] = planes[0, 5, 1, 0] = 1  # the mover's two stones in columns 0, 1
    planes[1, 5, 6, 0] = 1  # and one in column 6
    masks = masks.copy()
    masks[1, 2] = False  # a full column, to see the mask mirrored too
    p, v, m = mirror_averaged(lopsided)(planes, masks)
    own, flipped = lopsided(planes, masks), lopsided(planes[:, :, ::-1], masks[:, ::-1])
    assert np.allclose(p, (own[0] + flipped[0][:, ::-1]) / 2)
    assert np.allclose(v, [0.5, 0.5]) and np.allclose(m, [5.0, 5.0])  # (1 + 0) / 2 each
    assert np.allclose(p.sum(axis=1), 1) and p[1, 2] == 0  # still a distribution, legal only
    assert np.allclose(p[0], p[0][::-1])  # the priors' lean to the left is averaged away
    # a position and its mirror image get each other's mirrored results
    q, w, _ = mirror_averaged(lopsided)(planes[:, :, ::-1], masks[:, ::-1])
    assert np.allclose(q, p[:, ::-1]) and np.allclose(w, v)


def test_the_player_searches_with_it_and_a_saved_policy_keeps_the_setting(make_scope, tmp_path):
    policy = Policy(make_scope("mirror"), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7,
                    seed=0, search_mirror=True)  # fmt: skip
    with_it = SearchPlayer(policy, "connect_four", 16)
    without = SearchPlayer(policy, "connect_four", 16, mirror=False)
    assert with_it.mirror and not without.mirror
    planes, masks = ConnectFour(1).observe()
    planes = planes.copy()
    planes[0, 5, 1, 1] = 1  # an opponent's stone in column 1: an asymmetric position
    cur, mask = ConnectFour.from_planes(planes)
    res, plain = with_it.search.search(cur, mask), without.search.search(cur, mask)
    p, v = policy.priors_and_values(planes, masks)
    pm, vm = policy.priors_and_values(planes[:, :, ::-1], masks[:, ::-1])
    assert np.allclose(res.priors, (p + pm[:, ::-1]) / 2, atol=1e-7)
    assert np.allclose(plain.priors, p, atol=1e-7)
    assert np.abs(res.priors - p).max() > 1e-5  # a fresh policy's priors are near-uniform
    assert res.visits.sum() == plain.visits.sum() == 16
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("loaded"))
    assert loaded.cfg.search_mirror and SearchPlayer(loaded, "connect_four", 8).mirror
    # tic-tac-toe's moves are squares: the player maps them too
    ttt = Policy(make_scope("ttt"), encoder=C4_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    assert not SearchPlayer(ttt, TicTacToe, 8).mirror  # off by default
    tp, tm = TicTacToe(1).observe()
    got = SearchPlayer(ttt, TicTacToe, 8, mirror=True).search.search(*TicTacToe.from_planes(tp))
    a, _ = ttt.priors_and_values(tp, tm)
    b, _ = ttt.priors_and_values(tp[:, :, ::-1], tm[:, mirror_actions(3, 3, 9)])
    assert np.allclose(got.priors, (a + b[:, mirror_actions(3, 3, 9)]) / 2, atol=1e-6)


def test_the_solver_judge_scores_the_mirror_averaged_player(make_scope):
    """``scripts/selfplay_targets.py --mirror``: the searching player judged both ways, on
    the same positions and solver games."""
    script = targets_script()
    policy = Policy(make_scope("judged"), encoder=C4_MLP, obs_shape=[6, 7, 2], num_actions=7,
                    seed=0)  # fmt: skip
    out = script.judge_policy(policy, positions=12, simulations=8, games=2, reuse=True, mirror=True)
    for label in ("search8", "search8mirror"):
        assert 0 <= out[f"{label}_perfect_move_rate"] <= out[f"{label}_good_move_rate"] <= 1
    for label in ("search8", "search8mirror", "search8reuse", "search8mirrorreuse"):
        assert out[f"{label}_first_vs_solver_win_rate"] in (0.0, 0.5, 1.0)
    plain = script.judge_policy(policy, positions=12, simulations=8, games=2)
    assert not any("mirror" in k for k in plain)
    assert plain["search8_perfect_move_rate"] == out["search8_perfect_move_rate"]
