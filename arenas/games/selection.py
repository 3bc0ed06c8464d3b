"""Selection rules of the search tree (`MCTS`): which move to
follow down from a node, as the ``child_selection_fn`` of OpenSpiel's ``MCTSBot``.

A rule gets the statistics of the moves at the nodes one selection step stands on
(`Children`, one row per game still descending), the exploration constant and the
search's ``rng``, and returns one legal move per row. `puct` is AlphaZero's rule
(the network-guided search); `uct` is UCB1 as the rollout-MCTS anchors play it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .core import random_legal


class Children(NamedTuple):
    """The moves at the nodes a selection step stands on: one row per game still descending."""

    visits: np.ndarray  #: [b, A] N(s, a)
    total: np.ndarray  #: [b, A] W(s, a), for the player to move at s (values in [-1, 1])
    prior: np.ndarray  #: [b, A] P(s, a), the evaluator's (root: after any noise)
    legal: np.ndarray  #: [b, A] bool
    expanded: np.ndarray  #: [b, A] bool: the move has its node (it was tried)
    at_root: bool  #: every s is a root (N(s) = sum_a N(s, a)) or none is (N(s) = 1 + that)


#: ``(children, c, rng) -> moves int64 [b]``: one legal move per row
SelectionRule = Callable[[Children, float, Any], np.ndarray]


def puct(children: Children, c: float, rng: Any, fpu_reduction: float | None = None) -> np.ndarray:
    """AlphaZero's rule: ``argmax_a Q + c P sqrt(1 + sum_b N(s,b)) / (1 + N(s,a))`` over the
    legal moves, ``Q = W / N``; ties go to the lowest move; no random draws.

    An unvisited move's ``Q`` (its first-play urgency) is 0 with ``fpu_reduction=None``
    (AlphaZero's pseudocode on a [-1, 1] scale: a draw). With a number ``r >= 0`` it is
    Leela Chess Zero's reduced parent value: the node's mean ``Q`` over its visited moves
    minus ``r * sqrt(sum of the visited moves' P)`` (0 where nothing is visited yet): in a
    node its mover is winning an untried move is no longer taken for a draw, so a
    low-prior one is read sooner; in a losing node, later."""
    nsa = children.visits  # [b, A]
    q = children.total / np.maximum(nsa, 1.0)
    node_n = nsa.sum(axis=1)  # [b]
    if fpu_reduction is not None:
        seen = nsa > 0
        parent = children.total.sum(axis=1) / np.maximum(node_n, 1.0)  # [b]; 0 if none seen
        urgency = parent - fpu_reduction * np.sqrt((children.prior * seen).sum(axis=1))
        q = np.where(seen, q, urgency[:, None])
    u = q + c * children.prior * (np.sqrt(1.0 + node_n)[:, None] / (1.0 + nsa))
    return np.where(children.legal, u, -np.inf).argmax(axis=1)


def uct(children: Children, c: float, rng: Any) -> np.ndarray:
    """UCB1 as the rollout-MCTS anchors play it: while a node has untried legal moves, one
    of them at random (one ``rng.random((rows with untried moves, A))``); then
    ``argmax_a w + c sqrt(ln N(s) / N(s,a))`` on win rates ``w = (W / N + 1) / 2`` in
    [0, 1] (draw 0.5), ``N(s)`` the node's own visits; ties go to the lowest move."""
    legal = children.legal
    untried = legal & ~children.expanded
    grow = untried.any(axis=1)
    moves = np.zeros(len(grow), np.int64)
    if grow.any():
        if rng is None:
            raise ValueError("the uct rule draws untried moves at random: pass the search an rng")
        moves[grow] = random_legal(untried[grow], rng)
    sel = ~grow
    if sel.any():
        nsa = children.visits[sel]  # [s, A], >= 1 on every legal move
        node_visits = nsa.sum(axis=1) + (0.0 if children.at_root else 1.0)
        # win totals in [0, 1] units: (W + N) / 2 is exact (sums of 0, 0.5, 1), so these are
        # the anchors' UCB values bit for bit (W / N then rescaled could round differently)
        wins = (children.total[sel] + nsa) * 0.5
        u = wins / np.maximum(nsa, 1) + c * np.sqrt(
            np.log(node_visits)[:, None] / np.maximum(nsa, 1)
        )
        moves[sel] = np.where(legal[sel], u, -np.inf).argmax(axis=1)
    return moves


def forced_moves(root: Children, k: float, moves: np.ndarray) -> np.ndarray:
    """KataGo's forced playouts (Wu 2019, section 3.2): a root move already visited but
    fewer than ``sqrt(k P N)`` times (``P`` its noised prior, ``N`` the root's visits) is
    searched next, the one furthest below first; the other rows keep ``moves [b]``."""
    nsa = root.visits  # [b, A]
    need = np.sqrt(k * root.prior * nsa.sum(axis=1, keepdims=True))  # [b, A]
    short = root.legal & (nsa > 0) & (nsa < need)
    gap = np.where(short, need - nsa, -np.inf)
    return np.where(short.any(axis=1), gap.argmax(axis=1), moves)


def selection_rule(selection: str | SelectionRule) -> SelectionRule:
    """The rule named ``"puct"`` or ``"uct"``, or ``selection`` itself if it is a function."""
    if callable(selection):
        return selection
    if selection == "puct":
        return puct
    if selection == "uct":
        return uct
    raise ValueError(f"unknown selection rule {selection!r}: use 'puct', 'uct' or a function")
