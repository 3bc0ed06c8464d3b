"""The search's moves-left utility (``agents.policy.moves_left_weight``, Leela Chess Zero's):
on hand-made tic-tac-toe and Connect Four positions where two moves have the same value,
a perfect evaluator's search ties them, and with the utility it prefers the quicker win
and the longer defence."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from paddlecraft.arenas.games import GAMES
from paddlecraft.arenas.games.core import BoardGame
from paddlecraft.arenas.games.search import MOVES_LEFT_MAX_EFFECT, PUCTSearch

#: (game, moves from the start, the two moves compared, their exact (value, plies left))
POSITIONS = {
    # X (to move) wins at once on 8, or in 3 plies with the fork on 4
    "ttt-win": ("tictactoe", [0, 1, 2, 3, 5, 7], (8, 4), ((1, 1), (1, 3))),
    # O (to move) loses whatever it does: in 4 plies by blocking on 6, else in 2
    "ttt-loss": ("tictactoe", [0, 1, 3], (6, 2), ((-1, 4), (-1, 2))),
    # the mover completes a line in column 6 at once, or wins in 3 plies from column 2
    "c4-win": (
        "connect_four",
        [5, 4, 3, 1, 2, 0, 0, 0, 1, 5, 4, 6, 3, 4, 6, 5, 4, 3, 3],
        (6, 2),
        ((1, 1), (1, 3)),
    ),
    # every move loses; blocking in column 1 puts the loss off to 4 plies
    "c4-loss": (
        "connect_four",
        [2, 6, 4, 6, 1, 5, 6, 0, 2, 4, 0, 3, 4, 5, 6, 2, 3],
        (1, 0),
        ((-1, 4), (-1, 2)),
    ),
}
#: plies a perfect-play look-ahead searches (every position above is decided within it)
HORIZON = 4


def _play(game: type[BoardGame], cur: int, mask: int, a: int) -> tuple[int, int, bool, bool]:
    c2, m2, won, full = game.play(
        np.array([cur], np.uint64), np.array([mask], np.uint64), np.array([a])
    )
    return int(c2[0]), int(m2[0]), bool(won[0]), bool(full[0])


def _position(game: type[BoardGame], moves: list[int]) -> tuple[int, int]:
    cur = mask = 0
    for a in moves:
        cur, mask, won, full = _play(game, cur, mask, a)
        assert not (won or full)
    return cur, mask


class Lookahead:
    """A perfect evaluator within ``HORIZON`` plies: a position's exact ``(value, plies
    left)`` (the winner ends the game soonest, the loser latest; beyond the horizon: 0 and
    as many plies as the board has empty squares) and priors spread evenly over the moves
    of the best value, whatever their distance (so the search keeps to perfect lines and
    its values are exact)."""

    def __init__(self, game: type[BoardGame]) -> None:
        self.game = game
        self.moves = functools.lru_cache(None)(self._moves)

    def _moves(self, cur: int, mask: int, depth: int) -> dict[int, tuple[float, float]]:
        out = {}
        for a in np.flatnonzero(self.game.legal(np.array([mask], np.uint64))[0]):
            c2, m2, won, full = _play(self.game, cur, mask, int(a))
            if won or full:
                out[int(a)] = (1.0 if won else 0.0, 1.0)
            else:
                v, p = self.best(c2, m2, depth - 1)
                out[int(a)] = (-v, p + 1.0)
        return out

    def best(self, cur: int, mask: int, depth: int) -> tuple[float, float]:
        if depth == 0:
            empty = self.game.max_moves - bin(mask).count("1")
            return 0.0, float(empty)
        vals = self.moves(cur, mask, depth).values()
        return max(vals, key=lambda vp: (vp[0], -vp[1] if vp[0] > 0 else vp[1]))

    def __call__(self, planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, ...]:
        cur, mask = self.game.from_planes(planes)
        priors = np.zeros(np.shape(masks))  # uniform over the moves of the best value
        vp = np.zeros((len(cur), 2))
        for i, (c, m) in enumerate(zip(cur, mask)):
            vp[i] = self.best(int(c), int(m), HORIZON)
            for a, (v, _) in self.moves(int(c), int(m), HORIZON).items():
                priors[i, a] = float(v == vp[i, 0])
        return priors / priors.sum(1, keepdims=True), vp[:, 0], vp[:, 1]


def _search(name: str, weight: float, simulations: int = 80):
    game_name, moves, pair, _ = POSITIONS[name]
    game = GAMES[game_name]
    cur, mask = _position(game, moves)
    net = Lookahead(game)
    search = PUCTSearch(game, net, simulations, moves_left_weight=weight)
    res = search.search(np.array([cur], np.uint64), np.array([mask], np.uint64))
    return res, pair, net.moves(cur, mask, HORIZON)


@pytest.mark.parametrize("name", list(POSITIONS))
def test_positions_are_what_they_claim(name):
    _, _, pair, truth = POSITIONS[name]
    *_, exact = _search(name, 0.0, simulations=1)
    assert (exact[pair[0]], exact[pair[1]]) == truth
    value = truth[0][0]  # the pair holds the best moves: nothing does better than them
    assert max(v for v, _ in exact.values()) == value


@pytest.mark.parametrize("name", list(POSITIONS))
def test_the_utility_prefers_the_quicker_win_and_the_longer_defence(name):
    _, _, (better, worse), truth = POSITIONS[name]
    plain, _, _ = _search(name, 0.0)
    # without it the two moves are worth the same and searched alike: a tie
    assert plain.q[0, better] == plain.q[0, worse] == truth[0][0]
    assert plain.moves_left is None
    assert abs(plain.visits[0, better] - plain.visits[0, worse]) <= 1
    res, _, _ = _search(name, 0.1)
    assert res.q[0, better] == res.q[0, worse] == truth[0][0]  # values are not changed
    # each move's mean plies to the end: sooner for the quicker win, later for the
    # longer defence (exact where the move ends the game; else a mean over its subtree)
    m = res.moves_left[0]
    assert truth[0][0] * (m[worse] - m[better]) > 0
    if truth[0][1] == 1:
        assert m[better] == 1.0
    # the better move is the most searched one, the one a search player plays
    others = np.delete(res.visits[0], better)
    assert res.visits[0, better] > others.max()
    assert res.visits[0, better] >= res.visits[0, worse] + 6


def test_off_is_the_plain_search_and_a_negative_weight_is_refused():
    game = GAMES["tictactoe"]
    cur, mask = _position(game, [0, 1, 2, 3, 5, 7])
    args = np.array([cur], np.uint64), np.array([mask], np.uint64)
    net = Lookahead(game)
    two = lambda p, m: net(p, m)[:2]  # noqa: E731  (an evaluator without plies left)
    a = PUCTSearch(game, net, 40).search(*args)
    b = PUCTSearch(game, two, 40).search(*args)
    assert np.array_equal(a.visits, b.visits) and np.array_equal(a.q, b.q)
    assert MOVES_LEFT_MAX_EFFECT > 0
    with pytest.raises(ValueError, match="moves_left_weight >= 0"):
        PUCTSearch(game, net, 40, moves_left_weight=-0.1)
