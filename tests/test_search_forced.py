"""KataGo's forced playouts and policy target pruning (``arena.search.forced_playouts``):
the root moves a noisy search visits get at least ``sqrt(k P N)`` visits, the target
takes them back out, and a run with them resumes bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import keeping, replay_arena
from test_selfplay_search import TTT_MLP

from paddlecraft.agents import Policy
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour, TicTacToe
from paddlecraft.arenas.games.search import PUCTSearch, SearchResult, pruned_visits

PRIORS = np.array([0.02, 0.03, 0.10, 0.70, 0.10, 0.03, 0.02])


def lopsided(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Priors that favour the centre; a position with no stone in the centre column scores
    +0.8 for its mover, one with a stone there -0.6: every first move but the centre looks
    bad, so a plain search leaves the others at about the visits their priors buy."""
    p = np.where(masks, PRIORS, 0.0)
    centre = planes.reshape(len(planes), 6, 7, 2)[:, :, 3, :].sum(axis=(1, 2)) > 0  # [n]
    return p / p.sum(axis=1, keepdims=True), np.where(centre, -0.6, 0.8)


def _search(k: float, noise: bool = True) -> SearchResult:
    search = PUCTSearch(ConnectFour, lopsided, simulations=300, forced_playouts=k)
    zeros = np.zeros(8, np.uint64)  # 8 empty boards, each its own noise
    return search.search(zeros, zeros, np.random.default_rng(3), noise=noise)


def test_forced_playouts_give_each_visited_root_move_its_share():
    plain, forced = _search(0.0), _search(2.0)
    assert np.array_equal(plain.priors, forced.priors)  # the same noise: one draw each
    for res in (plain, forced):
        assert (res.visits.sum(axis=1) == 300).all()
    need = np.sqrt(2.0 * forced.priors * 300)  # [8, 7] the share at the end
    seen = forced.visits > 0
    # the share grows with the root's visits, so a move forced at the last top-up may
    # trail it by under one visit
    assert (forced.visits[seen] >= need[seen] - 1.0).all()
    short = (plain.visits > 0) & (plain.visits < need - 1.0)
    assert short.sum() >= 8  # without them the lightly noised moves stay far below
    assert (forced.visits[short] > plain.visits[short]).all()
    # the favourite gives up what the others gain
    assert (forced.visits[:, 3] < plain.visits[:, 3]).all()


def test_searches_without_noise_are_not_forced():
    """Only training searches (root noise) force: the evaluation's player is unchanged."""
    plain, forced = _search(0.0, noise=False), _search(2.0, noise=False)
    assert np.array_equal(plain.visits, forced.visits)
    assert np.array_equal(plain.q, forced.q)
    with pytest.raises(ValueError, match="forced_playouts >= 0"):
        PUCTSearch(ConnectFour, lopsided, forced_playouts=-1.0)


def test_pruning_removes_the_visits_the_puct_rule_would_not_have_given():
    visits = np.array([[20.0, 6.0, 2.0, 1.0, 0.0, 0.0, 1.0]])
    q = np.array([[0.3, 0.1, 0.2, -0.5, 0.0, 0.0, 0.9]])
    p = np.array([[0.5, 0.2, 0.1, 0.05, 0.05, 0.05, 0.05]])
    res = SearchResult(visits, np.zeros(1), p, q, p, np.zeros(1), np.ones((1, 7), bool))
    # c* = move 0: PUCT 0.3 + 1.5 sqrt(31) 0.5 / 21 = 0.4988 (1.5 sqrt(31) = 8.352).
    # move 1 stays at or below it from 8.352 * 0.2 / (0.4988 - 0.1) - 1 = 3.19, so 4
    # visits: 2 removed (its share sqrt(2 * 0.2 * 30) = 3.5 allows 3);
    # move 2 needs 8.352 * 0.1 / 0.2988 - 1 = 1.8, so 2: nothing removed;
    # move 3 (Q -0.5) could drop to 0, its share allows 1: down to 0 visits;
    # move 6's Q (0.9) alone beats c*'s PUCT: untouched, as c* itself
    expect = [[20.0, 4.0, 2.0, 0.0, 0.0, 0.0, 1.0]]
    assert pruned_visits(visits, res, 1.5, 2.0).tolist() == expect
    # k = 0.5: move 3's share, sqrt(0.5 * 0.05 * 30) = 0.87, is no whole visit
    assert pruned_visits(visits, res, 1.5, 0.5)[0, 3] == 1.0
    # a move pruned down to one visit loses that one too: 3 visits at Q -0.5 beside
    # c* (20, Q 0.3), share sqrt(2 * 0.1 * 23) = 2.1, so 2 removed, then the last
    two = np.array([[20.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    res.q = np.array([[0.3, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0]])
    res.priors = np.array([[0.5, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05]])
    assert pruned_visits(two, res, 1.5, 2.0).tolist() == [[20.0] + [0.0] * 6]
    assert pruned_visits(visits, res, 1.5, 0.0).tolist() == visits.tolist()


def test_the_targets_are_the_pruned_visits_and_a_run_resumes_bit_identically():
    from paddlecraft.arenas.selfplay.alphazero import search_controller

    seed_everything(0)
    policy = Policy("policy", encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9, seed=0)
    search = {"simulations": 12, "reuse": True, "forced_playouts": 2.0}
    arena = replay_arena(policy, search=search)
    planes, masks = TicTacToe(16).observe()
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
    kept = []
    act.search.search = keeping(act.search.search, kept)
    _, info = act(planes, masks)
    res = kept[-1]
    assert (res.visits.sum(axis=1) == 12).all()
    pruned = pruned_visits(res.visits, res, 1.5, 2.0)
    assert np.allclose(info["pi"], pruned / pruned.sum(axis=1, keepdims=True), atol=1e-6)
    assert (pruned.sum(axis=1) < 12).any()  # the forced visits did come out
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)
    with pytest.raises(ConfigError, match=r"arena.search.forced_playouts=-2"):
        replay_arena(policy, search={**search, "forced_playouts": -2.0})
