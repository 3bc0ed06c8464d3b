"""Leaf evaluators of the search tree (`MCTS`): what a new node
is worth and which of its moves to try first, as OpenSpiel's ``Evaluator``.

An evaluator gets a batch of positions as bitboards from the mover's side (``cur``,
``mask``: ``uint64 [n]``) with their legal moves (``bool [n, A]``) and returns
``(priors [n, A], values [n])``: a distribution over the legal moves and the value in
[-1, 1] for the player to move. The tree calls `Evaluator.evaluate` once per
simulation on the new leaves of all its games, and `Evaluator.root` once per search.

- `NetworkEvaluator`: a network (or any function of the observation planes), e.g.
  ``paddlecraft.agents.Policy.priors_and_values``: AlphaZero's evaluator.
- `RandomRolloutEvaluator`: uniform priors and the result of one random playout:
  the classic UCT baseline (the league's MCTS-k anchors).
- `CachedEvaluator`: a deterministic evaluator's results kept by position, so a position
  met again (in the next move's search, or in another game) costs no network call.

`ensemble_averaged` takes the mean of several networks' results (independently trained
policies searching as one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .core import BoardGame, random_legal

#: ``(planes int8 [n, rows, cols, 2], masks bool [n, A]) -> (priors [n, A], values [n])``,
#: optionally ``(..., plies left [n])``
NetworkFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, ...]]


def uniform_evaluator(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Uniform priors over legal moves and value 0: search by the rules alone."""
    m = np.asarray(masks, np.float64)
    return m / m.sum(axis=1, keepdims=True), np.zeros(len(m))


def _normalized(priors: Any, legal: np.ndarray) -> np.ndarray:
    """Priors ``[n, A]`` kept on the legal moves and summing to 1 (uniform where all are 0)."""
    p = np.where(legal, np.asarray(priors, np.float64), 0.0)
    s = p.sum(axis=1, keepdims=True)
    return np.where(s > 0, p / np.where(s > 0, s, 1), legal / legal.sum(1, keepdims=True))


def mirror_actions(rows: int, cols: int, actions: int) -> np.ndarray:
    """``int [actions]``: the move of a board's left-right mirror image that is move ``a``
    of the board (its own inverse): columns reversed where a move is a column (Connect
    Four), squares ``r * cols + c`` to ``r * cols + cols - 1 - c`` otherwise (tic-tac-toe)."""
    if actions == cols:
        return np.arange(cols)[::-1].copy()
    r, c = np.divmod(np.arange(rows * cols), cols)
    return r * cols + (cols - 1 - c)


def ensemble_averaged(networks: list[NetworkFn] | tuple[NetworkFn, ...]) -> NetworkFn:
    """The mean of ``networks``' results on the same positions: priors, values and any plies
    left, each averaged over the members (a deep ensemble: independently trained networks,
    one call each per batch). Every member must give the same outputs (all with plies left,
    or none); one member: that network itself."""
    members = tuple(networks)
    if not members:
        raise ValueError("ensemble_averaged: no networks given, expected one or more")
    if len(members) == 1:
        return members[0]

    def evaluate(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, ...]:
        outs = [m(planes, masks) for m in members]  # each (priors [n, A], values [n], ...)
        if len({len(o) for o in outs}) != 1:
            raise ValueError(
                "ensemble_averaged: the members give different outputs "
                f"({sorted({len(o) for o in outs})} arrays); every member needs the same "
                "heads (all with the moves-left head, or none)"
            )
        p = np.mean([np.asarray(o[0], np.float64) for o in outs], axis=0)  # [n, A]
        rest = [
            np.mean([np.asarray(o[k], np.float64).reshape(-1) for o in outs], axis=0)  # [n]
            for k in range(1, len(outs[0]))
        ]
        return (p, *rest)

    return evaluate


class Evaluator:
    """Priors and values for a batch of positions (see the module docstring)."""

    #: the same position always gets the same results (what `CachedEvaluator` needs)
    deterministic = False

    def evaluate(
        self, game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, legal: np.ndarray, rng: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(priors [n, A], values [n])`` of new leaves (none finished)."""
        raise NotImplementedError

    def root(
        self, game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, legal: np.ndarray, rng: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(priors [n, A], values [n])`` of the roots; by default as a leaf."""
        return self.evaluate(game, cur, mask, legal, rng)


class NetworkEvaluator(Evaluator):
    """A network's priors and value: ``network(planes, masks)`` (`NetworkFn`).

    The priors are renormalized over the legal moves (uniform where the network gives
    them no mass); a network's third output (plies left) is passed on. Deterministic:
    ``rng`` is not used.
    """

    deterministic = True

    def __init__(self, network: NetworkFn) -> None:
        self.network = network

    def evaluate(
        self, game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, legal: np.ndarray, rng: Any
    ) -> tuple[np.ndarray, ...]:
        p, v, *m = self.network(game.planes(cur, mask), legal)
        out = _normalized(p, legal), np.asarray(v, np.float64).reshape(-1)
        return (*out, np.asarray(m[0], np.float64).reshape(-1)) if m else out


class CachedEvaluator(Evaluator):
    """A deterministic evaluator's results, kept by position for as long as it lives.

    A search that plays a game move by move meets most positions again: the next move's
    search starts inside the tree of the last one (in Connect Four training more than half
    the leaves were evaluated by an earlier search), and games of one batch share their
    openings. Each call evaluates only the positions it has not seen, once
    each, and looks the rest up. Make one per set of weights (the self-play collection
    makes one per update): it cannot tell that a network has changed.

    Results equal the inner evaluator's up to the last bits of float arithmetic (a
    network's output for a row may differ that much with the rows beside it).

    Args:
        inner: the evaluator (``deterministic``, and giving a root what it gives a leaf,
            as `NetworkEvaluator`).
        max_entries: positions kept; the call after the cache holds that many starts it
            afresh.
    """

    deterministic = True

    def __init__(self, inner: Evaluator, max_entries: int = 1 << 19) -> None:
        if not inner.deterministic:
            raise ValueError(
                f"CachedEvaluator: {type(inner).__name__} is not deterministic (its results "
                "for a position vary), so its results cannot be reused; search with it uncached"
            )
        if int(max_entries) < 1:
            raise ValueError(f"CachedEvaluator: max_entries must be >= 1, got {max_entries}")
        self.inner, self.max_entries = inner, int(max_entries)
        # positions asked for, and those answered without the inner evaluator (seen
        # before, or twice in one call)
        self.lookups = self.hits = 0
        self.clear()

    def clear(self) -> None:
        """Forget every position (after the network's weights changed)."""
        self._rows: dict[int, int] = {}  # position key -> row of the store
        self._store: list[np.ndarray] = []  # one array per output, rows [capacity, ...]
        self._size = 0

    def evaluate(
        self, game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, legal: np.ndarray, rng: Any
    ) -> tuple[np.ndarray, ...]:
        if self._size >= self.max_entries:
            self.clear()
        keys = [c << 64 | m for c, m in zip(cur.tolist(), mask.tolist())]  # unique per position
        found = self._rows
        rows = np.fromiter((found.get(k, -1) for k in keys), np.int64, len(keys))
        miss = np.flatnonzero(rows < 0)
        self.lookups += len(keys)
        self.hits += len(keys) - len(miss)
        if len(miss):
            new: dict[int, int] = {}
            first: list[int] = []  # the first row of each unseen position
            for i in miss.tolist():
                k = keys[i]
                if k not in new:
                    new[k] = len(first)
                    first.append(i)
            self.hits += len(miss) - len(first)
            out = self.inner.evaluate(game, cur[first], mask[first], legal[first], rng)
            start = self._keep(out)
            for k, r in new.items():
                found[k] = start + r
            rows[miss] = [start + new[keys[i]] for i in miss.tolist()]
        return tuple(a[rows] for a in self._store)

    def _keep(self, out: tuple[np.ndarray, ...]) -> int:
        """Append one call's results to the store (capacity doubling); their first row."""
        arrays = [np.asarray(a) for a in out]
        n, start = len(arrays[0]), self._size
        if not self._store:
            self._store = [np.empty((max(n, 1024), *a.shape[1:]), a.dtype) for a in arrays]
        elif start + n > len(self._store[0]):
            size = max(2 * len(self._store[0]), start + n)
            for j, a in enumerate(self._store):
                grown = np.empty((size, *a.shape[1:]), a.dtype)
                grown[:start] = a[:start]
                self._store[j] = grown
        for a, b in zip(self._store, arrays):
            a[start : start + n] = b
        self._size = start + n
        return start


class RandomRolloutEvaluator(Evaluator):
    """Uniform priors and the outcome of one uniformly random playout (1 win, 0 draw, -1
    loss for the player to move), all leaves played out in lockstep.

    The roots are not played out (their priors are uniform, their value 0): the search
    value of a root comes from its children, as in OpenSpiel's ``MCTSBot``. Random
    numbers are drawn one ``rng.random((games still playing, A))`` per ply, in game order.
    """

    def evaluate(
        self, game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, legal: np.ndarray, rng: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        if rng is None:
            raise ValueError("RandomRolloutEvaluator plays at random: pass the search an rng")
        return legal / legal.sum(axis=1, keepdims=True), self.rollout(game, cur, mask, rng)

    def root(
        self, game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, legal: np.ndarray, rng: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        return legal / legal.sum(axis=1, keepdims=True), np.zeros(len(cur))

    @staticmethod
    def rollout(game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, rng: Any) -> np.ndarray:
        """Outcomes ``[n]`` of random playouts from unfinished positions, for their movers."""
        cur, mask = cur.copy(), mask.copy()
        value = np.zeros(len(cur))
        active = np.ones(len(cur), bool)
        sign = 1.0  # +1 while the player to move at the leaf moves
        while active.any():
            ia = np.flatnonzero(active)
            a = random_legal(game.legal(mask[ia]), rng)
            c2, m2, won, full = game.play(cur[ia], mask[ia], a)
            cur[ia], mask[ia] = c2, m2
            value[ia[won]] = sign
            active[ia[won | full]] = False  # a full board without a line: a draw, 0
            sign = -sign
        return value
