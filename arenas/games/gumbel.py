"""Gumbel AlphaZero's root search (Danihelka, Guez, Schrittwieser and Silver, "Policy
improvement by planning with Gumbel", ICLR 2022): the root of a `MCTS` search that
samples its moves instead of adding Dirichlet noise to their priors.

At the root of each game the search

1. draws one Gumbel variable ``g(a)`` per move (``scale`` times a standard Gumbel; 0: none,
   the evaluation's deterministic root) and considers the ``m`` moves with the largest
   ``g(a) + logits(a)``: Gumbel-top-k, a sample of ``m`` moves without replacement from the
   prior (``m`` = ``considered``, or every move the root may play where there are fewer);
2. shares its ``n`` simulations among them by **sequential halving**: ``ceil(log2 m)``
   phases; in each, every move still considered gets the same number of visits
   (about ``n / (ceil(log2 m) x moves left)``, at least one), then the better half by
   ``g + logits + sigma(completed Q)`` goes on (never fewer than two); the last two share
   what is left;
3. plays the move with the most of this search's visits and the best such score (the
   chosen move, `SearchResult.gumbel_move`): with ``g`` a sample from the improved policy,
   with ``scale`` 0 its mode.

``sigma(completed Q)`` is `completed_q_sigma`: the search's Q of each visited move, the
root's mixed value for the others, min-max scaled and multiplied by ``(50 + max N) x 0.1``.
The policy target that goes with it is `completed_q_policy` (the prior raised by the same
sigma), not the visits, which sequential halving spreads by rule. Below the root the
search selects by PUCT as before (the paper's Gumbel AlphaZero; Gumbel MuZero changes the
non-root rule too).

The sequence of visits (`halving_visits`) follows the schedule of DeepMind's reference
implementation (mctx); the root of a game picks, at its ``s``-th simulation, among the considered moves that have
exactly ``halving_visits(m, n)[s]`` of this search's visits, so a move that lost a
round is never picked again. A search that starts from a kept subtree (`TreeReuse`)
counts only its own visits in the rounds and all of them in Q.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .search_results import completed_q_sigma

__all__ = ["GumbelRoot", "halving_visits"]


def halving_visits(m: int, n: int) -> np.ndarray:
    """``int64 [n]``: the visits a considered move has when sequential halving over ``m``
    moves searches it at each of ``n`` simulations (``m <= 1``: ``0, 1, 2, ...``).

    Phase by phase, ``k`` moves still considered (``m`` at first, then half, never fewer
    than two) each get ``max(1, floor(n / (ceil(log2 m) k)))`` visits, one round of ``k``
    simulations per visit: e.g. ``m = 4, n = 8``: ``0 0 0 0 1 1 2 2``."""
    if m <= 1:
        return np.arange(n, dtype=np.int64)
    phases = math.ceil(math.log2(m))
    out: list[int] = []
    k, v = m, 0
    while len(out) < n:
        for _ in range(max(1, n // (phases * k))):
            out.extend([v] * k)
            v += 1
        k = max(2, k // 2)
    return np.asarray(out[:n], np.int64)


class GumbelRoot:
    """The roots of one batched search of ``B`` games run by Gumbel AlphaZero's rule.

    Args:
        prior: ``[B, A]`` the root priors the search uses; a move with prior 0 (illegal,
            or no winning move where the root has one: ``tactics``) is never considered.
        value: ``[B]`` the evaluator's value of each root (the completed Q's mixed value).
        visits: ``[B, A]`` the root visits the search starts with (0, or a kept subtree's).
        considered: ``m``, the moves sampled per root (Gumbel-top-k).
        simulations: ``n``, this search's simulations.
        rng: draws the Gumbel variables (``np.random.Generator``); unused with ``scale`` 0.
        scale: the Gumbel variables' scale (1 samples from the improved policy, 0 plays
            its mode).
    """

    def __init__(
        self,
        prior: np.ndarray,
        value: np.ndarray,
        visits: np.ndarray,
        considered: int,
        simulations: int,
        rng: Any,
        scale: float = 1.0,
    ) -> None:
        B, A = prior.shape
        self.ok = prior > 0  # [B, A] the moves the root may play
        self.prior, self.value = prior, np.asarray(value, np.float64).reshape(-1)
        self.start = visits.copy()  # [B, A]
        self.logits = np.where(self.ok, np.log(np.where(self.ok, prior, 1.0)), -np.inf)
        g = np.zeros((B, A))
        if scale > 0:
            if rng is None:
                raise ValueError("a Gumbel root with scale > 0 draws its moves: pass an rng")
            g = rng.gumbel(size=(B, A)) * scale
        self.gumbel = g  # [B, A]
        m = np.minimum(int(considered), self.ok.sum(axis=1))  # [B]
        table = np.stack([halving_visits(k, simulations) for k in range(A + 1)])  # [A+1, n]
        self.rounds = table[m]  # [B, n]: the visits a move must have at each simulation

    def scores(self, visits: np.ndarray, total: np.ndarray) -> np.ndarray:
        """``[B, A]``: ``g + logits + sigma(completed Q)`` of the root moves (-inf: not
        playable), from the root edges' visits and value totals."""
        q = total / np.maximum(visits, 1.0)
        sigma = completed_q_sigma(visits, q, self.prior, self.value, self.ok)
        return np.where(self.ok, self.gumbel + self.logits + sigma, -np.inf)

    def select(self, s: int, visits: np.ndarray, total: np.ndarray) -> np.ndarray:
        """``int64 [B]``: the move each root searches at its ``s``-th simulation (from 0):
        the best-scoring move among those with exactly this round's visits."""
        # (some move always has them: the round's moves are visited one by one, and the
        # next round's are those the last one visited, so a search that only visits its
        # roots through here never leaves a round empty)
        pick = self.ok & (visits - self.start == self.rounds[:, s][:, None])
        return np.where(pick, self.scores(visits, total), -np.inf).argmax(axis=1)

    def chosen(self, visits: np.ndarray, total: np.ndarray) -> np.ndarray:
        """``int64 [B]``: the move sequential halving chose: the best-scoring move among
        those with the most of this search's visits."""
        new = np.where(self.ok, visits - self.start, -1.0)
        top = new == new.max(axis=1, keepdims=True)
        return np.where(top, self.scores(visits, total), -np.inf).argmax(axis=1)
