"""The search tree: known best moves found by the rules alone, batched == one-at-a-time,
root noise, move choice, the evaluators and selection rules mixed freely (one tree, as
OpenSpiel's MCTSBot), and random rollouts against exact outcomes."""

from __future__ import annotations

import numpy as np
import pytest

from paddlecraft.arenas.games import ConnectFour, TicTacToe, random_legal
from paddlecraft.arenas.games.search import (
    MCTS,
    CachedEvaluator,
    Children,
    NetworkEvaluator,
    PUCTSearch,
    RandomRolloutEvaluator,
    choose_moves,
    search_one,
    uniform_evaluator,
)


def _position(game, moves):
    g = game(1)
    for a in moves:
        won, done = g.step([a])
        assert not done[0]
    return g.cur, g.mask


# (game, moves played so far, the one right move, why)
KNOWN = [
    (TicTacToe, [0, 3, 1, 4], 2, "X completes the top row"),
    (TicTacToe, [0, 4, 8, 3], 5, "X must block O's middle row"),
    (ConnectFour, [0, 1, 0, 1, 0, 1], 0, "X drops the fourth stone in column 0"),
    (ConnectFour, [3, 0, 3, 0, 3], 3, "O must block X's column 3"),
    (
        ConnectFour,
        [6, 2, 6, 3, 5, 4],
        1,
        "X must block O's bottom row at column 1 (column 5 is X's)",
    ),
]


@pytest.mark.parametrize("game, moves, best, why", KNOWN, ids=[k[3] for k in KNOWN])
def test_search_finds_the_known_move_with_a_uniform_network(game, moves, best, why):
    best_set = {best}
    cur, mask = _position(game, moves)
    search = PUCTSearch(game, uniform_evaluator, simulations=200)
    res = search.search(np.repeat(cur, 3), np.repeat(mask, 3))  # three copies in one batch
    v = res.visits[0]
    top = int(v.argmax())
    assert top in best_set, (why, v)
    # the visit counts favour it over every other move, by a wide margin
    others = np.delete(v, sorted(best_set))
    assert v[top] > 2 * others.max(), (why, v)
    assert v.sum() == 200 and np.array_equal(res.visits[0], res.visits[2])
    if why.startswith("X completes") or why.startswith("X drops"):
        assert res.value[0] > 0.5  # a won position is seen as won


def _linear_evaluator(game, seed=0):
    """A fixed float64 'network' (deterministic per position, whatever the batch)."""
    rng = np.random.default_rng(seed)
    d = int(np.prod(game.obs_shape()))
    w, u = rng.normal(size=(d, game.num_actions)), rng.normal(size=d) / d

    def evaluate(planes, masks):
        x = planes.reshape(len(planes), -1).astype(np.float64)
        logits = x @ w
        p = np.where(masks, np.exp(logits - logits.max(1, keepdims=True)), 0)
        return p / p.sum(1, keepdims=True), np.tanh(x @ u)

    return evaluate


@pytest.mark.parametrize("game", [TicTacToe, ConnectFour])
def test_batched_search_equals_the_plain_one_position_loop(game):
    rng = np.random.default_rng(3)
    g = game(12)
    for _ in range(4):
        g.step(random_legal(g.legal_mask(), rng))
    live = ~g.done
    ev = _linear_evaluator(game)
    res = PUCTSearch(game, ev, simulations=60).search(g.cur[live], g.mask[live])
    for i, (c, m) in enumerate(zip(g.cur[live], g.mask[live])):
        ref = search_one(game, ev, int(c), int(m), 60)
        assert np.array_equal(res.visits[i], ref), i


def random_positions(game, plies: int, seed: int):
    """``(cur, mask)`` of the games still going after ``plies`` random moves in 12 games."""
    rng = np.random.default_rng(seed)
    g = game(12)
    for _ in range(plies):
        live = np.flatnonzero(~g.done)
        g.step(random_legal(g.legal_mask(live), rng), live)
    live = ~g.done
    return g.cur[live], g.mask[live]


@pytest.mark.parametrize("game", [TicTacToe, ConnectFour])
def test_discounted_batched_search_equals_the_plain_recursion(game):
    """discount < 1: each sampled move value is the result where the move ends the game,
    else -discount x the value below it (search_one writes that recursion plainly)."""
    cur, mask = random_positions(game, 5 if game is TicTacToe else 14, seed=4)
    ev = _linear_evaluator(game, seed=1)
    res = PUCTSearch(game, ev, simulations=80, discount=0.9).search(cur, mask)
    undiscounted = PUCTSearch(game, ev, simulations=80).search(cur, mask)
    assert not np.array_equal(res.visits, undiscounted.visits)  # the discount changes the tree
    for i, (c, m) in enumerate(zip(cur, mask)):
        ref = search_one(game, ev, int(c), int(m), 80, discount=0.9)
        assert np.array_equal(res.visits[i], ref), i


def test_discounted_search_values_results_by_their_distance():
    """X (to move) wins at once in column 0. With discount 0.9 that move is worth exactly 1;
    any other move's value lies in [-0.9, 0.81]: the opponent wins one ply later at the
    soonest (-0.9), X two plies later (0.9^2)."""
    cur, mask = _position(ConnectFour, [0, 6, 0, 6, 0, 5, 2, 5, 3, 1])
    res = PUCTSearch(ConnectFour, uniform_evaluator, simulations=400, discount=0.9).search(
        cur, mask
    )
    assert res.visits[0].argmax() == 0 and res.q[0, 0] == 1.0
    seen = [a for a in range(1, 7) if res.visits[0, a] > 0]
    assert seen and all(-0.9 - 1e-12 <= res.q[0, a] <= 0.81 + 1e-12 for a in seen)


def test_search_refuses_a_discount_outside_0_1():
    with pytest.raises(ValueError, match="discount in \\(0, 1\\]"):
        PUCTSearch(ConnectFour, uniform_evaluator, discount=0.0)
    with pytest.raises(ValueError, match="discount in \\(0, 1\\]"):
        PUCTSearch(ConnectFour, uniform_evaluator, discount=1.5)


def test_root_noise_is_seeded_and_stays_on_legal_moves():
    cur, mask = _position(ConnectFour, [0] * 6)  # column 0 is full
    s = PUCTSearch(ConnectFour, uniform_evaluator, simulations=20, dirichlet_alpha=0.3)
    a = s.search(np.repeat(cur, 4), np.repeat(mask, 4), np.random.default_rng(1), noise=True)
    b = s.search(np.repeat(cur, 4), np.repeat(mask, 4), np.random.default_rng(1), noise=True)
    assert np.array_equal(a.priors, b.priors) and np.array_equal(a.visits, b.visits)
    assert np.allclose(a.priors.sum(1), 1) and (a.priors[:, 0] == 0).all()
    assert (a.visits[:, 0] == 0).all()
    assert not np.allclose(a.priors[0], a.priors[1])  # each game its own noise
    clean = s.search(cur, mask)
    assert np.allclose(clean.priors[0, 1:], 1 / 6)
    with pytest.raises(ValueError, match="rng"):
        s.search(cur, mask, noise=True)


def test_choose_moves_temperature():
    rng = np.random.default_rng(0)
    visits = np.tile([[0.0, 10, 30, 60]], (20000, 1))
    greedy = choose_moves(visits, 0.0, rng)
    assert (greedy == 3).all()
    hot = choose_moves(visits, 1.0, rng)
    freq = np.bincount(hot, minlength=4) / len(hot)
    assert freq[0] == 0 and np.allclose(freq[1:], [0.1, 0.3, 0.6], atol=0.02)
    mixed = choose_moves(visits[:4], np.array([0, 1, 0, 1.0]), rng)
    assert mixed[0] == 3 and mixed[2] == 3
    ties = choose_moves(np.tile([[5.0, 5, 0]], (2000, 1)), 0.0, rng)
    assert set(np.unique(ties)) == {0, 1}  # ties broken at random, never the unvisited move


# ---------------------------------------------------------------------- one tree, any mix


@pytest.mark.parametrize(
    "evaluator, selection",
    [(RandomRolloutEvaluator(), "puct"), (uniform_evaluator, "uct")],
    ids=["rollouts+puct", "uniform-network+uct"],
)
@pytest.mark.parametrize("game, moves, best, why", KNOWN[:3], ids=[k[3] for k in KNOWN[:3]])
def test_any_evaluator_with_any_selection_rule_finds_the_known_move(
    evaluator, selection, game, moves, best, why
):
    """The variation points are independent: the anchors' rollouts under AlphaZero's rule,
    a network under the anchors' rule. 8 copies, 200 simulations each."""
    cur, mask = _position(game, moves)
    search = MCTS(game, evaluator, simulations=200, selection=selection)
    res = search.search(np.repeat(cur, 8), np.repeat(mask, 8), np.random.default_rng(0))
    others = np.delete(res.visits, best, axis=1).max(axis=1)
    assert (res.visits.argmax(axis=1) == best).all(), (why, res.visits)
    assert (res.visits[:, best] > 2 * others).all(), (why, res.visits)
    assert (res.visits.sum(axis=1) == 200).all()


@pytest.mark.parametrize("game", [TicTacToe, ConnectFour])
def test_uct_tries_every_root_move_once_before_any_twice(game):
    rng = np.random.default_rng(4)
    g = game(16)
    for _ in range(3):
        g.step(random_legal(g.legal_mask(), rng))
    legal = g.legal(g.mask)
    sims = int(legal.sum(axis=1).min())  # every root has at least this many moves
    res = MCTS(game, RandomRolloutEvaluator(), simulations=sims, selection="uct").search(
        g.cur, g.mask, rng
    )
    assert res.visits.max() == 1 and (res.visits.sum(axis=1) == sims).all()
    assert (res.visits[~legal] == 0).all()
    assert (res.net_value == 0).all()  # the roots themselves are not rolled out


def test_random_rollouts_score_forced_endings_exactly():
    """Tic-tac-toe with one empty square: the playout is forced, its value is the rules'."""
    rng = np.random.default_rng(2)
    cur, mask, expected = [], [], []
    while len(expected) < 40:
        g = TicTacToe(1)
        for _ in range(8):
            g.step(random_legal(g.legal_mask(), rng))
            if g.done[0]:
                break
        if g.done[0]:
            continue
        cur.append(g.cur[0])
        mask.append(g.mask[0])
        won, _ = g.step(random_legal(g.legal_mask(), rng))  # the one move left
        expected.append(1.0 if won[0] else 0.0)  # else the board is full: a draw
    cur, mask = np.array(cur, np.uint64), np.array(mask, np.uint64)
    legal = TicTacToe.legal(mask)
    priors, values = RandomRolloutEvaluator().evaluate(TicTacToe, cur, mask, legal, rng)
    assert np.array_equal(values, expected) and 0 < sum(expected) < 40
    assert np.array_equal(priors, legal.astype(float))  # one legal move: all the mass


def test_a_selection_rule_is_any_function_and_names_are_checked():
    def lowest_legal(children: Children, c: float, rng) -> np.ndarray:
        return children.legal.argmax(axis=1)

    cur, mask = _position(ConnectFour, [0, 1])
    res = MCTS(ConnectFour, uniform_evaluator, simulations=12, selection=lowest_legal).search(
        cur, mask
    )
    assert res.visits[0, 0] == 12 and res.visits[0, 1:].sum() == 0
    with pytest.raises(ValueError, match="selection rule"):
        MCTS(ConnectFour, uniform_evaluator, selection="ucb2")
    with pytest.raises(ValueError, match="rng"):  # uct and rollouts draw random numbers
        MCTS(ConnectFour, uniform_evaluator, simulations=4, selection="uct").search(cur, mask)
    with pytest.raises(ValueError, match="rng"):
        MCTS(ConnectFour, RandomRolloutEvaluator(), simulations=4).search(cur, mask)


def _counting(game):
    """A fixed network whose results for a row are exact whatever rows are beside it
    (dyadic weights: every sum is exact), recording the positions it is asked for."""
    rng = np.random.default_rng(0)
    d = int(np.prod(game.obs_shape()))
    w = rng.integers(-64, 64, size=(d, game.num_actions)) / 64.0
    u = rng.integers(-64, 64, size=d) / 1024.0
    seen: list[bytes] = []

    def evaluate(planes, masks):
        seen.extend(p.tobytes() for p in planes)
        x = planes.reshape(len(planes), -1).astype(np.float64)
        logits = x @ w
        p = np.where(masks, np.exp(logits - logits.max(1, keepdims=True)), 0)
        return p / p.sum(1, keepdims=True), np.tanh(x @ u)

    evaluate.seen = seen
    return evaluate


def _play_searched_games(game, search, games: int, seed: int):
    """Play ``games`` games move by move with ``search`` (root noise, 4 sampled plies):
    each move's `SearchResult`."""
    rng = np.random.default_rng(seed)
    g = game(games)
    results = []
    while not g.done.all():
        live = np.flatnonzero(~g.done)
        res = search.search(g.cur[live], g.mask[live], rng, noise=True)
        results.append(res)
        temperature = np.where(g.moves[live] < 4, 1.0, 0.0)
        g.step(choose_moves(res.visits, temperature, rng), live)
    return results


@pytest.mark.parametrize("game", [TicTacToe, ConnectFour])
def test_a_cached_search_plays_as_the_uncached_one_with_each_position_evaluated_once(game):
    plain_net, cached_net = _counting(game), _counting(game)
    cache = CachedEvaluator(NetworkEvaluator(cached_net))
    settings = dict(simulations=30, discount=0.95, tactics=True, proofs=True)
    plain = _play_searched_games(game, PUCTSearch(game, plain_net, **settings), 24, seed=5)
    cached = _play_searched_games(game, PUCTSearch(game, cache, **settings), 24, seed=5)
    assert len(plain) == len(cached)
    for a, b in zip(plain, cached):  # the same games, move for move, the same statistics
        for name, value in vars(a).items():
            if value is not None:
                np.testing.assert_array_equal(getattr(b, name), value, err_msg=name)
    # the network saw each position once, and every position the plain search evaluated
    assert len(cached_net.seen) == len(set(cached_net.seen)) == cache._size
    assert set(cached_net.seen) == set(plain_net.seen)
    assert cache.lookups == len(plain_net.seen)
    # the next move's search starts inside the last one's tree: most lookups are hits
    assert cache.hits == cache.lookups - len(cached_net.seen)
    assert cache.hits / cache.lookups > 0.4


def test_the_cache_starts_afresh_when_full_and_refuses_a_random_evaluator():
    net = _counting(ConnectFour)
    cache = CachedEvaluator(NetworkEvaluator(net), max_entries=30)
    plain = PUCTSearch(ConnectFour, _counting(ConnectFour), simulations=40)
    cur, mask = _position(ConnectFour, [3, 3, 2])
    cur, mask = np.repeat(cur, 3), np.repeat(mask, 3)  # one position, three times a call
    want = plain.search(cur, mask)
    for _ in range(2):
        got = PUCTSearch(ConnectFour, cache, simulations=40).search(cur, mask)
        np.testing.assert_array_equal(got.visits, want.visits)
        np.testing.assert_array_equal(got.q, want.q)
        assert cache._size <= 30 + 3  # a call's new positions may pass the bound once
    assert len(net.seen) > 41  # it cleared and evaluated again; duplicates within a call once
    with pytest.raises(ValueError, match="RandomRolloutEvaluator is not deterministic"):
        CachedEvaluator(RandomRolloutEvaluator())
