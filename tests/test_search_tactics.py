"""The search's exact values where the rules decide (`MCTS` ``tactics`` and ``proofs``):
winning moves found by the rules, decided leaves scored exactly, MCTS-Solver proofs that
match a plain negamax's discounted values on tic-tac-toe, the proved best move played,
and a training run with both that resumes bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import replay_arena

from paddlecraft.agents import Agent, Policy
from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour, TicTacToe, random_legal
from paddlecraft.arenas.games.evaluators import uniform_evaluator
from paddlecraft.arenas.games.search import MCTS, choose_moves, decided_visits

GAMMA = 0.95


def _positions(game, n: int, plies: tuple[int, int], seed: int):
    """``n`` unfinished positions ``(cur, mask)`` from random play, ``plies`` stones."""
    rng = np.random.default_rng(seed)
    g = game(16 * n)
    stop = rng.integers(plies[0], plies[1] + 1, g.num_envs)
    for ply in range(plies[1]):
        live = np.flatnonzero(~g.done & (stop > ply))
        if not len(live):
            break
        g.step(random_legal(g.legal_mask(live), rng), live)
    keep = np.flatnonzero(~g.done)[:n]
    assert len(keep) == n
    return g.cur[keep], g.mask[keep]


def _negamax(game, cur: int, mask: int, memo: dict) -> float:
    """The exact discounted value of a position for its mover (a win now: 1)."""
    key = (cur, mask)
    if key not in memo:
        memo[key] = max(_move_values(game, cur, mask, memo)[1])
    return memo[key]


def _move_values(game, cur: int, mask: int, memo: dict) -> tuple[list[int], list[float]]:
    """Each legal move and its exact discounted value for the mover."""
    moves = np.flatnonzero(game.legal(np.array([mask], np.uint64))[0])
    values = []
    for a in moves:
        c2, m2, won, full = game.play(
            np.array([cur], np.uint64), np.array([mask], np.uint64), np.array([a])
        )
        if won[0]:
            values.append(1.0)
        elif full[0]:
            values.append(0.0)
        else:
            values.append(-GAMMA * _negamax(game, int(c2[0]), int(m2[0]), memo))
    return list(moves), values


@pytest.mark.parametrize("game", [TicTacToe, ConnectFour])
def test_winning_moves_are_the_moves_that_complete_a_line(game):
    cur, mask = _positions(game, 64, (3, 20), seed=1)
    for stones in (cur, cur ^ mask):  # the mover's and the opponent's
        got = game.winning_moves(stones, mask)
        legal = game.legal(mask)
        for a in range(game.num_actions):
            ok = legal[:, a]
            want = np.zeros(len(mask), bool)
            want[ok] = game.wins(stones[ok] | game.new_stone(mask[ok], np.full(ok.sum(), a)))
            assert np.array_equal(got[:, a], want)
        assert got.any() and not got.all()  # the sample has both kinds
        count = game.winning_move_count(stones, mask)  # the bitboard count for Connect Four
        assert np.array_equal(count, np.minimum(got.sum(axis=1), 2))
        assert game is TicTacToe or 2 in count  # Connect Four's sample has double threats
    # both players' threats at once: the mover can win; the opponent has two winning moves
    mover, forks = game.two_ply_threats(cur, mask)
    assert np.array_equal(mover, game.winning_moves(cur, mask).any(axis=1))
    assert np.array_equal(forks, game.winning_moves(cur ^ mask, mask).sum(axis=1) >= 2)
    assert mover.any() and forks.any()


def _misled(game):
    """An evaluator whose priors favour the first legal move and whose values are 0."""

    def evaluate(planes, masks):
        masks = np.asarray(masks, bool)
        p = np.where(masks, 1e-3, 0.0)
        p[np.arange(len(p)), np.argmax(masks, axis=1)] = 1.0
        return p / p.sum(axis=1, keepdims=True), np.zeros(len(p))

    return evaluate


def test_tactics_search_only_a_winning_root_move():
    # the mover completes a line in column 6 at once (and could win in 3 from column 2)
    g = ConnectFour(1)
    for a in [5, 4, 3, 1, 2, 0, 0, 0, 1, 5, 4, 6, 3, 4, 6, 5, 4, 3, 3]:
        g.step(np.array([a]))
    cur, mask = g.cur[:1], g.mask[:1]
    wins = ConnectFour.winning_moves(cur, mask)[0]
    assert list(np.flatnonzero(wins)) == [6]
    misled = _misled(ConnectFour)
    for tactics in (False, True):
        res = MCTS(ConnectFour, misled, simulations=12, discount=GAMMA, tactics=tactics).search(
            cur, mask
        )
        if tactics:  # every visit on the win
            assert res.visits[0, 6] == 12 and res.q[0, 6] == 1.0
        else:  # the plain search follows the misleading prior elsewhere
            assert res.visits[0].argmax() == 0 and res.visits[0, 6] < 6


@pytest.mark.parametrize("game", [TicTacToe, ConnectFour])
def test_tactics_score_a_decided_position_exactly_and_never_expand_it(game):
    """A root move into a position whose mover wins at once is worth exactly -discount;
    one into a position whose mover faces two winning moves, exactly discount ** 2."""
    cur, mask = _positions(game, 150, (2, 14) if game is TicTacToe else (10, 26), seed=2)
    none_now = ~game.winning_moves(cur, mask).any(axis=1)  # else only the wins are searched
    cur, mask = cur[none_now], mask[none_now]
    calls = []

    def counted(planes, masks):
        calls.append(len(planes))
        return uniform_evaluator(planes, masks)

    res = MCTS(game, counted, simulations=200, discount=GAMMA, tactics=True).search(cur, mask)
    seen = {"won": 0, "lost": 0}
    for i in range(len(cur)):
        for a in np.flatnonzero(res.legal[i]):
            c2, m2, won, full = game.play(cur[i : i + 1], mask[i : i + 1], np.array([a]))
            if won[0] or full[0]:
                continue
            if game.winning_moves(c2, m2).any():  # the opponent wins at once
                assert res.q[i, a] == pytest.approx(-GAMMA, abs=1e-12), (i, a)
                seen["won"] += 1
            elif game.winning_moves(c2 ^ m2, m2).sum() >= 2:  # it cannot block both
                assert res.q[i, a] == pytest.approx(GAMMA**2, abs=1e-12), (i, a)
                seen["lost"] += 1
    assert seen["won"] > 5 and seen["lost"] > 0
    plain = []
    MCTS(game, lambda p, m: (plain.append(len(p)), uniform_evaluator(p, m))[1], simulations=200,
         discount=GAMMA).search(cur, mask)  # fmt: skip
    assert sum(calls) < sum(plain)  # decided positions cost no network call


def test_proofs_find_every_exact_value_and_play_the_best_move():
    """Tic-tac-toe from 1-5 stones: with proofs the search proves many roots (a root stays
    open where an unproven move could be better than the best proven one), each proven value is the negamax's exact discounted value, and the player's move is
    a best one (the soonest win, the longest defence)."""
    cur, mask = _positions(TicTacToe, 64, (1, 5), seed=3)
    memo: dict = {}
    res = MCTS(TicTacToe, uniform_evaluator, simulations=1500, discount=GAMMA, tactics=True,
               proofs=True).search(cur, mask)  # fmt: skip
    assert res.decided.mean() > 0.4  # one or two stones: too open to prove in 1,500
    spread = compared = 0
    for i in range(len(cur)):
        moves, values = _move_values(TicTacToe, int(cur[i]), int(mask[i]), memo)
        proven = res.proven[i, moves]
        known = ~np.isnan(proven)
        np.testing.assert_allclose(proven[known], np.array(values)[known], atol=1e-12)
        compared += int(known.sum())
        best = max(values)
        if res.decided[i]:  # the root's value is the exact one
            assert res.value[i] == pytest.approx(best, abs=1e-12)
        visits = decided_visits(res)[i]
        pick = int(choose_moves(visits[None], 0.0, np.random.default_rng(0))[0])
        assert values[moves.index(pick)] == pytest.approx(best)
        spread += len(set(np.round(values, 9))) > 1
    assert spread > 20 and compared > 150  # moves of different values, many proven
    # the Q of a proven move is its exact value, not an average of the search's samples
    np.testing.assert_allclose(res.q[~np.isnan(res.proven)], res.proven[~np.isnan(res.proven)])


def test_proofs_without_tactics_and_the_plain_search_unchanged():
    cur, mask = _positions(TicTacToe, 12, (4, 6), seed=4)
    memo: dict = {}
    res = MCTS(TicTacToe, uniform_evaluator, simulations=1500, discount=GAMMA, proofs=True).search(
        cur, mask
    )
    assert res.decided.mean() > 0.8
    for i in range(len(cur)):
        moves, values = _move_values(TicTacToe, int(cur[i]), int(mask[i]), memo)
        proven = res.proven[i, moves]
        known = ~np.isnan(proven)
        np.testing.assert_allclose(proven[known], np.array(values)[known], atol=1e-12)
    plain = MCTS(TicTacToe, uniform_evaluator, simulations=50, discount=GAMMA).search(cur, mask)
    assert plain.proven is None and plain.decided is None
    assert decided_visits(plain) is plain.visits


def test_a_run_with_tactics_and_proofs_resumes_bit_identically_and_saves_them(tmp_path):
    seed_everything(0)
    enc = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 18,
           "hidden_size": 32, "num_classes": 32}  # fmt: skip
    policy = Policy("policy", encoder=enc, obs_shape=[3, 3, 2], num_actions=9, seed=0,
                    search_tactics=True, search_proofs=True)  # fmt: skip
    assert policy.search_settings()["tactics"] and policy.search_settings()["proofs"]
    arena = replay_arena(policy, search={"simulations": 24})
    assert "resume from a checkpoint is bit-identical" in check_arena(arena, steps=2)
    policy.save(tmp_path / "policy")
    loaded = Agent.load(tmp_path / "policy", name="loaded")
    assert loaded.search_settings()["tactics"] and loaded.search_settings()["proofs"]


def test_a_slow_proven_win_does_not_decide_a_root_where_a_quicker_one_may_be():
    """The cutoff is sound: with the priors on a move that wins in 5 plies (proven soon),
    the root stays open while a win in 3 is unproven; a bound looser than ``discount ** 2``
    would call it decided and play the slow win."""
    cur, mask = _positions(TicTacToe, 300, (2, 6), seed=5)
    memo: dict = {}
    favour = {}
    for i in range(len(cur)):
        moves, values = _move_values(TicTacToe, int(cur[i]), int(mask[i]), memo)
        v = np.array(values)
        slow = np.flatnonzero(np.isclose(v, GAMMA**4))
        if not np.isclose(v, 1.0).any() and len(slow) and np.isclose(v, GAMMA**2).any():
            favour[TicTacToe.planes(cur[i : i + 1], mask[i : i + 1]).tobytes()] = moves[slow[0]]
    assert favour

    def misled(planes, masks):
        masks = np.asarray(masks, bool)
        p = masks.astype(np.float64)
        for k in range(len(planes)):
            a = favour.get(planes[k : k + 1].tobytes())
            if a is not None:
                p[k] = np.where(masks[k], 1e-3, 0.0)
                p[k, a] = 1.0
        return p / p.sum(axis=1, keepdims=True), np.zeros(len(p))

    roots = [TicTacToe.from_planes(np.frombuffer(k, np.int8).reshape(1, 3, 3, 2)) for k in favour]
    c, m = np.concatenate([r[0] for r in roots]), np.concatenate([r[1] for r in roots])
    res = MCTS(
        TicTacToe, misled, simulations=400, discount=GAMMA, tactics=True, proofs=True
    ).search(c, m)
    slow_proven = np.isclose(res.proven, GAMMA**4).any(axis=1)
    assert slow_proven.all() and not res.decided.any()
