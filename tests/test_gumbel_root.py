"""Gumbel AlphaZero's root (`GumbelRoot`, ``arena.search.gumbel_considered``): the
sequential-halving schedule, rounds that keep the better half, Gumbel-top-k sampling from
the prior, a root that looks at every considered move (where PUCT follows a misleading
prior), kept subtrees, the training controller's moves and targets, proven roots, the
setting's check and a bit-identical resume."""

from __future__ import annotations

import numpy as np
import pytest
from selfplay_kit import replay_arena, ttt_policy
from test_search_tactics import _misled

from paddlecraft.arenas import check_arena
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.games import ConnectFour, TicTacToe, random_legal
from paddlecraft.arenas.games.evaluators import uniform_evaluator
from paddlecraft.arenas.games.gumbel import GumbelRoot, halving_visits
from paddlecraft.arenas.games.search import (
    MCTS,
    PUCTSearch,
    SearchResult,
    TreeReuse,
    completed_q_policy,
)
from paddlecraft.arenas.selfplay.alphazero import gumbel_moves, search_controller


def test_halving_visits_follow_the_phases():
    # 4 moves, 8 simulations: 2 phases; 4 moves once each, then the better 2 twice each
    assert halving_visits(4, 8).tolist() == [0, 0, 0, 0, 1, 1, 2, 2]
    # 7 moves, 30: ceil(log2 7) = 3 phases; 7 x 1 visit, 3 x 3 visits, then 2 x 5 and on
    assert halving_visits(7, 30).tolist() == (
        [0] * 7 + [1, 1, 1, 2, 2, 2, 3, 3, 3] + [4, 4, 5, 5, 6, 6, 7, 7, 8, 8] + [9, 9, 10, 10]
    )
    assert halving_visits(2, 5).tolist() == [0, 0, 1, 1, 2]
    assert halving_visits(1, 4).tolist() == [0, 1, 2, 3]  # one move: all on it


def _run_rounds(root: GumbelRoot, q_true: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Drive ``root`` for ``n`` simulations where move ``a`` always backs up ``q_true[a]``."""
    visits, total = root.start.copy(), root.start * q_true
    rows = np.arange(len(visits))
    for s in range(n):
        a = root.select(s, visits, total)
        visits[rows, a] += 1
        total[rows, a] += q_true[rows, a]
    return visits, total


def test_rounds_visit_the_survivors_equally_and_keep_the_better_half():
    prior = (10.0 - np.arange(9))[None] / 54.0  # [1, 9] decreasing: moves 0-3 are the top 4
    q_true = np.arange(9)[None] / 10.0  # the later the move, the better
    root = GumbelRoot(prior, np.zeros(1), np.zeros((1, 9)), 4, 24, None, scale=0.0)
    visits, total = _run_rounds(root, q_true, 24)
    # 4 considered x 3 visits, then the better two (by Q, over their lower prior) 6 more each
    assert visits[0].tolist() == [3, 3, 9, 9, 0, 0, 0, 0, 0]
    assert root.chosen(visits, total).tolist() == [3]


def test_gumbel_top_k_samples_the_prior():
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.3, 0.15, 0.05])
    B = 20000
    root = GumbelRoot(np.tile(p, (B, 1)), np.zeros(B), np.zeros((B, 4)), 1, 1, rng, scale=1.0)
    first = root.select(0, np.zeros((B, 4)), np.zeros((B, 4)))
    freq = np.bincount(first, minlength=4) / B
    assert np.abs(freq - p).max() < 0.015  # the Gumbel-max trick: a draw from the prior
    still = GumbelRoot(np.tile(p, (3, 1)), np.zeros(3), np.zeros((3, 4)), 1, 1, None, 0.0)
    assert still.select(0, np.zeros((3, 4)), np.zeros((3, 4))).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="pass an rng"):
        GumbelRoot(p[None], np.zeros(1), np.zeros((1, 4)), 2, 4, None, scale=1.0)


def _winning_position():
    """Connect Four, the mover completes a line in column 6 at once."""
    g = ConnectFour(1)
    for a in [5, 4, 3, 1, 2, 0, 0, 0, 1, 5, 4, 6, 3, 4, 6, 5, 4, 3, 3]:
        g.step(np.array([a]))
    return g.cur[:1], g.mask[:1]


def _leaning(odds: float):
    """An evaluator whose priors favour the first legal move ``odds`` to 1 over each other
    legal move and whose values are 0."""

    def evaluate(planes, masks):
        masks = np.asarray(masks, bool)
        p = np.where(masks, 1.0, 0.0)
        p[np.arange(len(p)), np.argmax(masks, axis=1)] = odds
        return p / p.sum(axis=1, keepdims=True), np.zeros(len(p))

    return evaluate


def test_the_root_looks_at_every_considered_move_where_puct_follows_its_prior():
    cur, mask = _winning_position()
    misled = _misled(ConnectFour)  # priors on column 0, 1000 to 1
    puct = MCTS(ConnectFour, misled, 30).search(cur, mask)
    assert puct.visits[0].argmax() == 0 and puct.visits[0, 6] < 3
    res = MCTS(ConnectFour, misled, 30, gumbel_considered=16).search(cur, mask)
    legal = res.legal[0]
    assert res.visits[0].sum() == 30 and (res.visits[0][legal] >= 1).all()
    assert res.q[0, 6] == 1.0  # the win was looked at
    # the improved policy raises it by exp(sigma), (50 + max N) x 0.1 at most: not past a
    # prior 1000 to 1, which stays the choice (the paper's bounded improvement)
    target = completed_q_policy(res, prior=res.priors)[0]
    assert target[6] > 100 * res.priors[0, 6] and res.gumbel_move.tolist() == [0]
    # 50 to 1 (log 50 = 3.9, under sigma's ~5.5): the win is the choice
    mild = MCTS(ConnectFour, _leaning(50.0), 30, gumbel_considered=16).search(cur, mask)
    assert mild.gumbel_move.tolist() == [6] and mild.visits[0, 6] == mild.visits[0].max()
    # two considered moves: only the prior's top two are searched
    two = MCTS(ConnectFour, misled, 30, gumbel_considered=2).search(cur, mask)
    assert (two.visits[0] > 0).sum() == 2 and two.visits[0, 0] > 0


def test_a_kept_subtree_counts_its_visits_in_q_and_only_the_new_ones_in_the_rounds():
    rng = np.random.default_rng(3)
    g = TicTacToe(4)
    g.step(random_legal(g.legal_mask(), rng))
    search = PUCTSearch(TicTacToe, uniform_evaluator, simulations=16, gumbel_considered=16)
    reuse = TreeReuse()
    first = search.search(g.cur, g.mask, rng, noise=True, reuse=reuse)
    reuse.played(first.gumbel_move)
    g.step(first.gumbel_move)
    second = search.search(g.cur, g.mask, rng, noise=True, reuse=reuse)
    kept = second.visits.sum(axis=1) - 16  # what the kept subtrees brought
    assert (kept > 0).all()  # every game reused the subtree below its move
    legal = second.legal
    # each root still looked at every move it may play in this search's first round
    below = first.visits[np.arange(4), first.gumbel_move]  # the subtree's visits, minus its root's
    assert (kept == below - 1).all()
    assert ((second.visits >= 1) | ~legal).all()


def test_the_controller_plays_the_chosen_move_and_learns_the_completed_q_policy():
    seed_everything(0)
    policy = ttt_policy("gumbel_ctl")
    arena = replay_arena(policy, search={"gumbel_considered": 16, "simulations": 8})
    g = TicTacToe(6)
    g.step(random_legal(g.legal_mask(), np.random.default_rng(1)))
    planes, masks = g.observe()
    act = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(5))
    actions, info = act(planes, masks)
    # the same search, from the same generator state (the policy's NumPy copy: rounding)
    search = PUCTSearch(TicTacToe, policy.priors_and_values, simulations=8, gumbel_considered=16)
    res = search.search(g.cur, g.mask, np.random.default_rng(5), noise=True)
    assert np.array_equal(actions, res.gumbel_move)
    assert np.allclose(info["pi"], completed_q_policy(res, prior=res.priors), atol=1e-5)
    assert (info["pi"][~masks] == 0).all() and np.allclose(info["pi"].sum(axis=1), 1)
    # the Gumbel variables make games differ
    other = search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(6))
    assert not np.array_equal(other(planes, masks)[0], actions)


def test_every_training_ply_samples_and_a_fast_search_plays_the_mode():
    """The Gumbel variables are drawn at every training ply (the paper's self-play), not
    only in the sampled opening; KataGo's fast searches (no root noise) draw none."""
    seed_everything(0)
    policy = ttt_policy("gumbel_late")
    search = {"gumbel_considered": 16, "simulations": 8, "temperature_moves": 1}
    arena = replay_arena(policy, search=search)
    g = TicTacToe(24)
    rng = np.random.default_rng(1)
    for _ in range(2):  # ply 2: past the sampled opening
        g.step(random_legal(g.legal_mask(), rng))
    planes, masks = g.observe()
    moves = [
        search_controller(policy, TicTacToe, arena.cfg.search, np.random.default_rng(k))(
            planes, masks
        )
        for k in (5, 6)
    ]
    assert not np.array_equal(moves[0][0], moves[1][0])
    assert moves[0][1]["explored"].any()  # some moves sampled away from the target's mode
    fast = replay_arena(policy, search={**search, "full_fraction": 0.5, "fast_simulations": 4})
    act = search_controller(policy, TicTacToe, fast.cfg.search, np.random.default_rng(5))
    act2 = search_controller(policy, TicTacToe, fast.cfg.search, np.random.default_rng(6))
    (a, info), (b, info2) = act(planes, masks), act2(planes, masks)
    both_fast = ~info["full_search"] & ~info2["full_search"]
    assert both_fast.any() and np.array_equal(a[both_fast], b[both_fast])


def test_a_proven_root_keeps_to_its_best_moves():
    legal = np.ones((2, 3), bool)
    res = SearchResult(
        visits=np.array([[4.0, 3.0, 1.0], [4.0, 3.0, 1.0]]),
        value=np.zeros(2),
        priors=np.full((2, 3), 1 / 3),
        q=np.array([[0.9, 0.95, -1.0], [0.9, 0.95, -1.0]]),
        net_priors=np.full((2, 3), 1 / 3),
        net_value=np.zeros(2),
        legal=legal,
        proven=np.array([[np.nan, 0.95, -1.0], [np.nan, np.nan, np.nan]]),
        decided=np.array([True, False]),
        gumbel_move=np.array([0, 0]),
    )
    actions, pi, explored = gumbel_moves(res)
    assert actions.tolist() == [1, 0]  # row 0 proved move 1 best; row 1 keeps its choice
    assert pi[0].tolist() == [0.0, 1.0, 0.0]
    assert np.allclose(pi[1], completed_q_policy(res, prior=res.priors)[1])
    assert explored.tolist() == [False, True]  # row 1 played 0, its target's mode is 1


def test_a_run_with_the_gumbel_root_resumes_bit_identically():
    seed_everything(0)
    policy = ttt_policy("policy")
    arena = replay_arena(policy, search={"gumbel_considered": 4, "simulations": 8, "reuse": True})
    m = arena.train_step(0)
    assert np.isfinite(m["loss"]) and m["policy_loss"] > 0
    assert "resume from a checkpoint is bit-identical" in check_arena(
        replay_arena(policy, search={"gumbel_considered": 4, "simulations": 8, "reuse": True}),
        steps=2,
    )


def _schedule_visits(m: int, n: int) -> list[int]:
    """The visits sequential halving gives its ``m`` moves over ``n`` simulations, most
    first: the move ranked ``r`` in each round gets one visit per round of more than ``r``
    moves."""
    per_round = np.bincount(halving_visits(m, n))  # [rounds] moves in each round
    return [int((per_round > r).sum()) for r in range(m)]


def test_every_root_follows_the_schedule_with_tactics_proofs_and_kept_subtrees():
    """Over many Connect Four positions (forced wins, proofs), each root's visits are the
    schedule's; searches that start from kept subtrees, move after move, play legal
    choices and add exactly their simulations."""
    from test_search_tactics import _positions

    rng = np.random.default_rng(4)
    cur, mask = _positions(ConnectFour, 48, (4, 20), seed=2)
    n = 30
    search = PUCTSearch(ConnectFour, uniform_evaluator, simulations=n, discount=0.95,
                        tactics=True, proofs=True, gumbel_considered=16)  # fmt: skip
    res = search.search(cur, mask, rng, noise=True)
    ok = res.priors > 0  # with tactics: only the winning moves where there are any
    for row in range(len(cur)):
        got = sorted(res.visits[row][ok[row]].astype(int).tolist(), reverse=True)
        assert got == _schedule_visits(int(ok[row].sum()), n), row
        assert ok[row, res.gumbel_move[row]]
    reuse = TreeReuse()
    for move in range(3):
        res = search.search(cur, mask, rng, noise=True, reuse=reuse)
        assert res.legal[np.arange(len(cur)), res.gumbel_move].all()
        total = res.visits.sum(axis=1)
        assert (total >= n).all()
        if move:  # the positions after a move: the subtrees below it kept
            assert (total > n).any()
        reuse.played(res.gumbel_move)
        c2, m2, won, full = ConnectFour.play(cur, mask, res.gumbel_move)
        live = ~(won | full)
        cur, mask = c2[live], m2[live]
