"""Leaf evaluators of the search tree (`MCTS`): what a new node
is worth and which of its moves to try first, as OpenSpiel's ``Evaluator``.

An evaluator gets a batch of positions as bitboards from the mover's side (``cur``,
``mask``: ``uint64 [n]``) with their legal moves (``bool [n, A]``) and returns
``(priors [n, A], values [n])``: a distribution over the legal moves and the value in
[-1, 1] for the player to move; an evaluator may add a third array, the plies left until
the game ends ``[n]`` (the search's moves-left utility reads it). The tree calls `Evaluator.evaluate` once per
simulation on the new leaves of all its games, and `Evaluator.root` once per search.

- `NetworkEvaluator`: a network (or any function of the observation planes), e.g.
  ``paddlecraft.agents.Policy.priors_and_values``: AlphaZero's evaluator.
- `RandomRolloutEvaluator`: uniform priors and the result of one random playout:
  the classic UCT baseline (the league's MCTS-k anchors).
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


class Evaluator:
    """Priors and values for a batch of positions (see the module docstring)."""

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

    def __init__(self, network: NetworkFn) -> None:
        self.network = network

    def evaluate(
        self, game: type[BoardGame], cur: np.ndarray, mask: np.ndarray, legal: np.ndarray, rng: Any
    ) -> tuple[np.ndarray, ...]:
        p, v, *m = self.network(game.planes(cur, mask), legal)
        out = _normalized(p, legal), np.asarray(v, np.float64).reshape(-1)
        return (*out, np.asarray(m[0], np.float64).reshape(-1)) if m else out


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
