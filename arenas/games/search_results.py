"""What a search returns and what is made of it: `SearchResult`, the move choice
(`choose_moves`), the move a player plays after its search (`played_moves`), the
visits left to the moves a search proved best (`decided_visits`) and KataGo's policy target pruning
(`pruned_visits`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "MOVE_RULES",
    "SearchResult",
    "choose_moves",
    "decided_visits",
    "played_moves",
    "pruned_visits",
]

#: how a player picks the move it plays after a search (`played_moves`)
MOVE_RULES = ("visits", "lcb")


@dataclass
class SearchResult:
    """What a search returns for ``B`` root positions."""

    visits: np.ndarray  #: [B, A] root visit counts (illegal moves: 0)
    #: [B] mean backed-up value of the root for the player to move (a root the search
    #: proved: its exact value)
    value: np.ndarray
    priors: np.ndarray  #: [B, A] root priors the search used (after any noise)
    q: np.ndarray  #: [B, A] mean value of each root move for the mover (0 where unvisited)
    net_priors: np.ndarray  #: [B, A] the evaluator's root priors (before any noise)
    net_value: np.ndarray  #: [B] the evaluator's value of the root (rollouts: 0)
    legal: np.ndarray  #: [B, A] legal root moves
    #: [B, A] the exact value of each root move for the mover where the search proved it
    #: (NaN: not proven); only with ``proofs``
    proven: np.ndarray | None = None
    #: [B] whether the search proved the root's value (then the moves with the best
    #: ``proven`` value are the best moves); only with ``proofs``
    decided: np.ndarray | None = None


def choose_moves(visits: np.ndarray, temperature: np.ndarray | float, rng: Any) -> np.ndarray:
    """A move per row: sampled from ``visits^(1/T)``, or the most visited where ``T == 0``.

    Ties between the most visited moves are broken at random (``rng``).
    """
    v = np.asarray(visits, np.float64)
    t = np.broadcast_to(np.asarray(temperature, np.float64), (len(v),))
    best = v == v.max(axis=1, keepdims=True)
    u = rng.random(v.shape)
    out = np.where(best, u + 1.0, -1.0).argmax(axis=1)  # random among the best
    hot = t > 0
    if hot.any():
        w = np.where(v[hot] > 0, v[hot], 0.0) ** (1.0 / t[hot][:, None])
        cdf = np.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
        r = rng.random(int(hot.sum()))[:, None]
        pick = np.minimum((cdf <= r).sum(axis=1), v.shape[1] - 1)
        ok = v[hot][np.arange(len(pick)), pick] > 0
        out[np.flatnonzero(hot)[ok]] = pick[ok]  # rounding edge: keep the best move
    return out.astype(np.int64)


def decided_visits(res: SearchResult) -> np.ndarray:
    """The root visits ``[B, A]``, where the search proved the root's value only on the
    moves proven best (the others' visits were exploration): what a player picks from and
    a policy target learns. Unchanged where nothing was proved (or without ``proofs``)."""
    if res.proven is None or res.decided is None or not res.decided.any():
        return res.visits
    worth = np.where(res.legal & ~np.isnan(res.proven), res.proven, -np.inf)
    top = worth >= worth.max(axis=1, keepdims=True) - 1e-12
    return np.where(res.decided[:, None] & ~top, 0.0, res.visits)


def pruned_visits(visits: np.ndarray, res: SearchResult, c: float, k: float) -> np.ndarray:
    """KataGo's policy target pruning (Wu 2019, section 3.2), the other half of forced
    playouts (`MCTS` ``forced_playouts=k``): ``visits [B, A]`` with the forced visits taken
    back out. From every move but the most visited one ``c*``, up to ``sqrt(k P N)`` visits
    are removed (``P`` the root prior the search used, ``N`` the root's visits), as many as
    keep its PUCT value ``Q + c P sqrt(1 + N) / (1 + n)`` at or below ``c*``'s; a move
    pruned down to one visit loses it too. Each row's total is not renormalised."""
    n = np.asarray(visits, np.float64)
    rows = np.arange(len(n))
    total = n.sum(axis=1, keepdims=True)  # [B, 1]
    best = n.argmax(axis=1)  # [B] c*
    scale = c * np.sqrt(1.0 + total)  # [B, 1]
    p, q = res.priors, res.q
    top = q[rows, best] + scale[:, 0] * p[rows, best] / (1.0 + n[rows, best])  # [B]
    room = top[:, None] - q  # [B, A] the exploration term a move may keep
    # the fewest visits that keep its PUCT at or below c*'s: 1 + n' >= scale P / room
    least = np.where(room > 0, np.ceil(scale * p / np.maximum(room, 1e-300) - 1.0 - 1e-9), np.inf)
    cut = np.clip(np.minimum(n - np.maximum(least, 0.0), np.floor(np.sqrt(k * p * total))), 0, n)
    cut[rows, best] = 0.0
    kept = n - cut
    return np.where((cut > 0) & (kept <= 1.0), 0.0, kept)


def played_moves(
    res: SearchResult, rule: str = "visits", legal: np.ndarray | None = None, rng: Any = None
) -> np.ndarray:
    """The move a player plays after a search, one per row ``int64 [B]``, among ``legal``
    ``[B, A]`` (default: the search's ``res.legal``). Both rules read `decided_visits`
    (where the search proved the root: its best moves only).

    - ``"visits"``: the most visited move, ties at random from ``rng`` (AlphaZero).
    - ``"lcb"``: the best lower confidence bound ``Q - 1 / sqrt(N)`` among the visited
      moves (Leela Chess Zero's and KataGo's LCB move choice, with a fixed width instead
      of their value variance): a move with fewer visits is played over the most visited
      one only when its mean value is higher by more than their bounds' difference. ``Q``
      is the move's mean value for the mover (exact where proven); ties go to the lowest
      move.
    """
    ok = res.legal if legal is None else np.asarray(legal, bool)
    visits = decided_visits(res)
    if rule == "visits":
        rng = rng if rng is not None else np.random.default_rng(0)
        return choose_moves(np.where(ok, visits, -1.0), 0.0, rng)
    if rule != "lcb":
        raise ValueError(f"unknown move rule {rule!r}: use one of {', '.join(MOVE_RULES)}")
    bound = res.q - 1.0 / np.sqrt(np.maximum(visits, 1.0))  # [B, A]
    # unvisited legal moves rank below every visited one, illegal ones last
    bound = np.where(ok & (visits > 0), bound, np.where(ok, -1e300, -np.inf))
    return bound.argmax(axis=1).astype(np.int64)
