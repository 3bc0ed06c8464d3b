"""The move a searching player plays (`played_moves`, ``agents.policy.search_move``): the
most visited move, or the best lower confidence bound ``Q - 1 / sqrt(N)``; the policy
setting checked, saved and read by `SearchPlayer`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from paddlecraft.agents import Agent, Policy
from paddlecraft.agents.policy import SEARCH_MOVES
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.games import TicTacToe
from paddlecraft.arenas.games.search import (
    MOVE_RULES,
    PUCTSearch,
    SearchResult,
    choose_moves,
    decided_visits,
    played_moves,
)
from paddlecraft.arenas.selfplay import SearchPlayer

TTT_MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 32}


def _result(visits, q, legal=None, proven=None, decided=None) -> SearchResult:
    visits, q = np.asarray(visits, float), np.asarray(q, float)
    legal = np.ones(visits.shape, bool) if legal is None else np.asarray(legal, bool)
    flat = np.full(visits.shape, 1.0 / visits.shape[1])
    res = SearchResult(visits, (visits * q).sum(1) / visits.sum(1), flat, q, flat,
                       np.zeros(len(visits)), legal)  # fmt: skip
    res.proven, res.decided = proven, decided
    return res


def test_lcb_plays_a_less_visited_move_only_when_its_bound_is_higher():
    res = _result(
        [[100, 60, 0], [100, 4, 0], [100, 1, 0], [10, 30, 0], [5, 0, 0]],
        [[0.1, 0.5, 0.0], [0.1, 0.5, 0.0], [0.1, 0.9, 0.0], [0.9, 0.2, 0.0], [-0.9, 0, 0]],
    )
    # bounds: 0.0 vs 0.37; 0.0 vs 0.0 (a tie: the lower move); 0.0 vs -0.1; 0.58 vs 0.02;
    # the last row's one visited move, though an unvisited one has the higher Q
    assert played_moves(res, "lcb").tolist() == [1, 0, 0, 0, 0]
    assert played_moves(res, "visits").tolist() == [0, 0, 0, 1, 0]


def test_no_rule_plays_an_illegal_or_unvisited_move():
    rng = np.random.default_rng(3)
    visits = rng.integers(0, 20, (200, 7)).astype(float)
    q = rng.uniform(-1, 1, (200, 7))
    legal = rng.random((200, 7)) < 0.7
    legal[np.arange(200), visits.argmax(1)] = True  # a visited legal move in every row
    res = _result(visits, q, legal)
    for rule in MOVE_RULES:
        moves = played_moves(res, rule, rng=np.random.default_rng(0))
        assert legal[np.arange(200), moves].all() and (visits[np.arange(200), moves] > 0).all()
    # "visits" is the player's rule as it was: the most visited, ties from the rng
    want = choose_moves(np.where(legal, visits, -1.0), 0.0, np.random.default_rng(0))
    assert np.array_equal(played_moves(res, "visits", rng=np.random.default_rng(0)), want)
    # the action mask a player passes narrows the search's legal moves
    mask = legal & (np.arange(7) != visits.argmax(1)[:, None])
    mask[~mask.any(1), 0] = True
    for rule in MOVE_RULES:
        assert mask[np.arange(200), played_moves(res, rule, mask)].all()
    with pytest.raises(ValueError, match="unknown move rule 'max_q'"):
        played_moves(res, "max_q")


def test_lcb_keeps_a_proven_root_to_its_moves_proven_best():
    # move 0 proven a win in 3 plies, move 1 proven a win in 5 (more visits), move 2 open
    proven = np.array([[0.95**2, 0.95**4, np.nan]])
    res = _result([[3, 50, 20]], [[0.95**2, 0.95**4, 0.95]], proven=proven,
                  decided=np.array([True]))  # fmt: skip
    assert decided_visits(res)[0].tolist() == [3, 0, 0]
    assert played_moves(res, "lcb").tolist() == [0]  # not the open move's higher bound


def test_search_move_is_checked_saved_and_played(make_scope, tmp_path):
    assert SEARCH_MOVES == MOVE_RULES  # the policy's check knows the search's rules
    with pytest.raises(ConfigError, match=r"search_move='best': expected one of visits, lcb"):
        Policy(make_scope("b"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9,
               search_move="best")  # fmt: skip
    policy = Policy(make_scope("m"), encoder=TTT_MLP, obs_shape=[3, 3, 2], num_actions=9,
                    seed=0, search_move="lcb")  # fmt: skip
    policy.save(tmp_path / "p")
    loaded = Agent.load(tmp_path / "p", name=make_scope("l"))
    assert loaded.cfg.search_move == "lcb"
    player = SearchPlayer(loaded, "tictactoe", 16)
    assert (
        player.move == "lcb"
        and SearchPlayer(loaded, "tictactoe", 16, move="visits").move == "visits"
    )
    # the player plays what played_moves picks from the same search
    cur, mask = TicTacToe.from_planes(np.zeros((1, 3, 3, 2), np.int8))
    settings = loaded.search_settings()
    res = PUCTSearch(TicTacToe, simulations=16, **settings).search(cur, mask)
    obs = TicTacToe.planes(cur, mask)
    assert player.act(obs, TicTacToe.legal(mask)).tolist() == played_moves(res, "lcb").tolist()
    # a policy saved before the setting existed plays the most visited move, as it did
    meta = json.loads((tmp_path / "p" / "agent.json").read_text())
    del meta["config"]["search_move"]
    (tmp_path / "p" / "agent.json").write_text(json.dumps(meta))
    old = Agent.load(tmp_path / "p", name=make_scope("o"))
    assert old.cfg.search_move == "visits" and SearchPlayer(old, "tictactoe", 16).move == "visits"
