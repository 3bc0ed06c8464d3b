"""Leela Chess Zero's draw score (a chess engine's contempt): ``agents.<name>.draw_score``,
what a draw is worth to the first player (its opponent: the negative). The search scores a
drawn board so (MCTS-Solver's proofs match a negamax that does, on both parities of
``max_moves``), the value targets of drawn games carry it (discounted from the last
square's move), a run with it resumes bit for bit and a saved policy keeps it; 0 leaves
everything as it was."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import replay_arena, ttt_policy

from paddlecraft.agents import Agent
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour, TicTacToe
from paddlecraft.arenas.games.evaluators import uniform_evaluator
from paddlecraft.arenas.games.search import MCTS
from paddlecraft.arenas.selfplay.targets import outcome_samples

GAMMA = 0.95


def _drawn(values: np.ndarray) -> np.ndarray:
    """Which discounted values are not a result's ``+-GAMMA ** k`` (with a draw score of
    magnitude 0.5 or 0.3: a draw's, ``+-score * GAMMA ** k``)."""
    k = np.log(np.abs(values)) / np.log(GAMMA)
    return ~np.isclose(k, np.round(k), atol=1e-6)


def _board(game, moves: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The position ``(cur [1], mask [1])`` after ``moves`` from the empty board."""
    g = game(1)
    for a in moves:
        g.step(np.array([a]))
    assert not g.done[0]
    return g.cur[:1].copy(), g.mask[:1].copy()


def _values(cur: int, mask: int, score: float, memo: dict) -> dict[int, float]:
    """Tic-tac-toe: each legal move's exact discounted value for the mover, a draw worth
    ``score`` to the first player and ``-score`` to the second."""
    first = bin(mask).count("1") % 2 == 0  # the mover is the first player
    out = {}
    for a in np.flatnonzero(TicTacToe.legal(np.array([mask], np.uint64))[0]):
        c2, m2, won, full = TicTacToe.play(
            np.array([cur], np.uint64), np.array([mask], np.uint64), np.array([a])
        )
        if won[0]:
            out[int(a)] = 1.0
        elif full[0]:
            out[int(a)] = score if first else -score
        else:
            key = (int(c2[0]), int(m2[0]))
            if key not in memo:
                memo[key] = max(_values(*key, score, memo).values())
            out[int(a)] = -GAMMA * memo[key]
    return out


@pytest.mark.parametrize("score", [-0.5, 0.3])
def test_proofs_on_tictactoe_match_a_negamax_that_scores_draws_so(score):
    """Tic-tac-toe ends on the first player's move (9 squares): the proven values of the
    roots' moves are the negamax's with the draw worth ``score`` to the first player."""
    rng = np.random.default_rng(1)
    roots = []
    while len(roots) < 60:  # unfinished positions of 4-7 stones from random play
        g = TicTacToe(1)
        for _ in range(int(rng.integers(4, 8))):
            legal = np.flatnonzero(g.legal_mask()[0])
            g.step(np.array([rng.choice(legal)]))
            if g.done[0]:
                break
        if not g.done[0]:
            roots.append((int(g.cur[0]), int(g.mask[0])))
    cur = np.array([r[0] for r in roots], np.uint64)
    mask = np.array([r[1] for r in roots], np.uint64)
    res = MCTS(TicTacToe, uniform_evaluator, 800, discount=GAMMA, tactics=True, proofs=True,
               draw_score=score).search(cur, mask)  # fmt: skip
    memo: dict = {}
    proven = []
    for i, (c, m) in enumerate(roots):
        for a, v in _values(c, m, score, memo).items():
            if not np.isnan(res.proven[i, a]):
                assert res.proven[i, a] == pytest.approx(v, abs=1e-12), (i, a)
                proven.append(v)
    assert len(proven) > 100 and _drawn(np.array(proven)).sum() > 10  # draws among them


def test_connect_four_scores_its_full_board_for_the_first_player():
    """Connect Four ends on the second player's move (42 squares), so the full board's
    mover is the first player: a second player whose only move fills the board sees
    ``-draw_score``; 0 leaves the draw at 0."""
    # columns filled in pairs of three that never make four (a known drawn filling)
    order = [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5,
             1, 0, 1, 0, 1, 0, 3, 2, 3, 2, 3, 2, 5, 4, 5, 4, 5, 4,
             6, 6, 6, 6, 6]  # fmt: skip
    cur, mask = _board(ConnectFour, order)  # 41 stones: the second player fills column 6
    for score, want in ((-0.5, 0.5), (0.25, -0.25), (0.0, 0.0)):
        res = MCTS(ConnectFour, uniform_evaluator, 4, discount=GAMMA, draw_score=score).search(
            cur, mask
        )
        assert res.q[0, 6] == pytest.approx(want, abs=1e-12)
    cur, mask = _board(ConnectFour, order[:-1])  # the first player, two plies from the end
    res = MCTS(ConnectFour, uniform_evaluator, 8, discount=GAMMA, proofs=True,
               draw_score=-0.5).search(cur, mask)  # fmt: skip
    assert res.proven[0, 6] == pytest.approx(-0.5 * GAMMA, abs=1e-12)  # the reply draws


def test_drawn_games_train_toward_the_draw_score_from_the_last_square():
    """`outcome_samples`: a drawn game's positions take ``draw_score`` (even plies) or its
    negative (odd), discounted by the plies to the board's last square (``max_moves -
    1``, also where the records stop short of it); won games are unchanged and 0 gives
    the draws 0."""
    obs, msk, pi = np.zeros((1, 3, 3, 2), np.int8), np.ones((1, 9), bool), np.ones((1, 9)) / 9
    plies = {0: [0, 1, 2, 3, 4, 5, 6, 7, 8], 1: [0, 2, 4, 6], 2: [0, 1, 2, 3, 4]}  # 1: a seat
    records = [
        {"ply": np.array([p]), "game": np.array([g]), "obs": obs, "mask": msk, "pi": pi,
         "root_value": np.zeros(1)}
        for g, ps in plies.items() for p in ps
    ]  # fmt: skip
    winner = np.array([-1, -1, 0])  # two draws; game 2 the first player won with ply 4
    z = outcome_samples(records, winner, GAMMA, draw_score=-0.5, max_moves=9)["z"]
    want = [(-0.5 if p % 2 == 0 else 0.5) * GAMMA ** (8 - p) for p in plies[0]]
    want += [-0.5 * GAMMA ** (8 - p) for p in plies[1]]
    want += [(1.0 if p % 2 == 0 else -1.0) * GAMMA ** (4 - p) for p in plies[2]]
    np.testing.assert_allclose(z, want, rtol=1e-6)
    plain = outcome_samples(records, winner, GAMMA, max_moves=9)["z"]
    assert not plain[:13].any()  # draws: 0 without a draw score
    np.testing.assert_allclose(plain[13:], want[13:], rtol=1e-6)


def test_a_run_with_a_draw_score_resumes_bit_identically_and_the_policy_keeps_it(
    make_scope, tmp_path
):
    seed_everything(0)
    policy = ttt_policy("policy", draw_score=-0.5, value_discount=GAMMA)
    assert policy.search_settings()["draw_score"] == -0.5
    arena = replay_arena(policy, search={"simulations": 12})
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)
    z = arena.replay.arrays["z"]  # drawn games' positions: +-0.5 discounted, never 0
    assert (z != 0).all() and _drawn(z).any()
    policy.save(tmp_path / "policy")
    loaded = Agent.load(tmp_path / "policy", name=make_scope("ds_loaded"))
    assert loaded.search_settings()["draw_score"] == -0.5


def test_a_draw_score_out_of_range_is_refused_naming_the_setting(make_scope):
    with pytest.raises(ConfigError, match=r"agents\.\S+\.draw_score=1\.5: must be in \[-1, 1\]"):
        ttt_policy(make_scope("bad"), draw_score=1.5)
