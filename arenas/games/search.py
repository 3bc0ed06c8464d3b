"""Monte-Carlo tree search, batched: one tree, a selection rule and a leaf evaluator.

As OpenSpiel's ``MCTSBot(evaluator, child_selection_fn)``, one `MCTS` serves both
searches of the project, which differ only in two variation points:

- the leaf evaluator (`evaluators`): a network's priors and value
  (`NetworkEvaluator`, AlphaZero), or uniform priors and a
  random playout (`RandomRolloutEvaluator`);
- the selection rule (`selection`): `puct` (``argmax_a Q(s,a) + c P(s,a) sqrt(1 + N(s)) /
  (1 + N(s,a))``, ``Q = 0`` for unvisited moves), or `uct` (UCB1 on win rates in
  [0, 1], every untried move first, picked at random: the rollout-MCTS anchors).

`PUCTSearch` (network + PUCT: AlphaZero-style training and the search evaluation)
and `MCTSPlayer` (rollouts + UCT: the MCTS-10/100/1000
anchors) are thin faces of it.

One search handles ``B`` positions at once: every game has its own tree, ``nodes`` rows of
``[B * nodes, ...]`` arrays, the trees grow in lockstep, and each simulation ends with ONE evaluator call
on the new leaves of all games (a network runs once per simulation, not once per leaf;
rollouts of all games advance together). Terminal positions are scored by the rules (a
win is worth 1 to the player who made it). Values are backed up with alternating signs;
the statistics live on the edges: ``N(s, a)`` and ``W(s, a)`` (for the player to move at
``s``, values in [-1, 1]). Training games add Dirichlet noise to the root priors
(``noise=True``) and sample moves from the visit counts (`choose_moves` with a
temperature); `completed_q_policy` turns a result into Gumbel AlphaZero's policy
target. `search_one` is the PUCT search written plainly for one position (reference
for tests and the benchmark).

This module knows only the rules (`paddlecraft.arenas.games`), no agents, so any
network or heuristic can guide it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import BoardGame
from .evaluators import (
    Evaluator,
    NetworkEvaluator,
    NetworkFn,
    RandomRolloutEvaluator,
    uniform_evaluator,
)
from .selection import Children, SelectionRule, puct, selection_rule, uct

__all__ = [
    "MCTS",
    "Children",
    "Evaluator",
    "NetworkEvaluator",
    "NetworkFn",
    "PUCTSearch",
    "RandomRolloutEvaluator",
    "SearchResult",
    "SelectionRule",
    "choose_moves",
    "completed_q_policy",
    "puct",
    "search_one",
    "uct",
    "uniform_evaluator",
]

#: the largest moves-left utility a move can get (value units, as Lc0's MovesLeftMaxEffect)
MOVES_LEFT_MAX_EFFECT = 0.1


@dataclass
class SearchResult:
    """What a search returns for ``B`` root positions."""

    visits: np.ndarray  #: [B, A] root visit counts (illegal moves: 0)
    value: np.ndarray  #: [B] mean backed-up value of the root for the player to move
    priors: np.ndarray  #: [B, A] root priors the search used (after any noise)
    q: np.ndarray  #: [B, A] mean value of each root move for the mover (0 where unvisited)
    net_priors: np.ndarray  #: [B, A] the evaluator's root priors (before any noise)
    net_value: np.ndarray  #: [B] the evaluator's value of the root (rollouts: 0)
    legal: np.ndarray  #: [B, A] legal root moves
    #: [B, A] mean plies from the root to the game's end through each move (0 where
    #: unvisited); only with ``moves_left_weight > 0``
    moves_left: np.ndarray | None = None


# ---------------------------------------------------------------------- the tree


class MCTS:
    """Batched Monte-Carlo tree search over a native `BoardGame`.

    Args:
        game: the rules (``ConnectFour``, ``TicTacToe``).
        evaluator: an `Evaluator`, or a network function
            ``(planes, masks) -> (priors, values)`` (wrapped in ``NetworkEvaluator``).
        simulations: simulations per search (each adds at most one node per tree).
        selection: ``"puct"``, ``"uct"`` (see `puct`, `uct`) or a
            `SelectionRule`.
        c: exploration constant of the selection rule.
        dirichlet_alpha: root noise concentration (AlphaZero: 0.3 chess, ~10 / moves).
        noise_fraction: share of the root priors replaced by noise when ``noise=True``.
        discount: per-ply discount of backed-up values (1: none). Below 1 a move's value is
            ``r`` for a move that ends the game and ``-discount * V(next)`` otherwise, so a
            sooner win and a later loss are worth more (the solver's exact scores order
            moves the same way); the evaluator's values must then be discounted values.
        moves_left_weight: Leela Chess Zero's moves-left utility (0: off). Every edge also
            averages the plies from its node to the game's end (a finished game: 0 from its
            last position; a new leaf: the evaluator's third output, its predicted plies
            left, or 0 where it gives none), and selection adds to a visited move's ``Q``
            ``-Q * clip(weight * (M(s, a) - M(s)), +-MOVES_LEFT_MAX_EFFECT)`` (``M(s)``:
            the node's own mean): a winning move that ends the game sooner and a losing
            one that puts the end off gain, scaled by how certain the value is. It only
            steers the visits; backed-up values are unchanged.
    """

    def __init__(
        self,
        game: type[BoardGame],
        evaluator: Evaluator | NetworkFn,
        simulations: int = 100,
        selection: str | SelectionRule = "puct",
        c: float = 1.5,
        dirichlet_alpha: float = 1.0,
        noise_fraction: float = 0.25,
        discount: float = 1.0,
        moves_left_weight: float = 0.0,
    ) -> None:
        if int(simulations) < 1:
            raise ValueError(f"search simulations must be >= 1, got {simulations}")
        if c < 0 or dirichlet_alpha <= 0 or not 0 <= noise_fraction <= 1:
            raise ValueError(
                f"search: need c >= 0, dirichlet_alpha > 0 and noise_fraction in [0, 1], "
                f"got {c}, {dirichlet_alpha}, {noise_fraction}"
            )
        if not 0 < discount <= 1:
            raise ValueError(f"search: need discount in (0, 1], got {discount}")
        if not moves_left_weight >= 0:
            raise ValueError(f"search: need moves_left_weight >= 0, got {moves_left_weight}")
        if not isinstance(evaluator, Evaluator):
            evaluator = NetworkEvaluator(evaluator)
        self.game, self.evaluator = game, evaluator
        self.select = selection_rule(selection)
        self.simulations, self.c = int(simulations), float(c)
        self.dirichlet_alpha, self.noise_fraction = float(dirichlet_alpha), float(noise_fraction)
        self.discount = float(discount)
        self.moves_left_weight = float(moves_left_weight)

    def search(
        self,
        cur: np.ndarray,
        mask: np.ndarray,
        rng: Any = None,
        noise: bool = False,
        legal: np.ndarray | None = None,
    ) -> SearchResult:
        """Search the positions ``(cur, mask)`` (bitboards ``[B]``, mover's side; none
        finished). ``rng``: a ``np.random.Generator`` or ``np.random`` (root noise, and the
        random draws of the evaluator and selection rule); ``legal``: the root moves
        ``[B, A]`` if known (by default from the rules)."""
        g = self.game
        cur, mask = np.asarray(cur, np.uint64), np.asarray(mask, np.uint64)
        B, S, A = len(cur), self.simulations, g.num_actions
        N = S + 1  # nodes per tree; node i of game b is row b * N + i of the arrays below
        ncur = np.zeros(B * N, np.uint64)
        nmask = np.zeros(B * N, np.uint64)
        term = np.zeros(B * N, np.int8)  # 1: the player who moved into it won; 2: draw
        prior = np.zeros((B * N, A))
        legal_at = np.zeros((B * N, A), bool)
        child = np.full((B * N, A), -1, np.int64)  # row of the child node, -1: untried
        visits = np.zeros((B * N, A))  # N(s, a)
        total = np.zeros((B * N, A))  # W(s, a), for the player to move at s
        flat_visits, flat_total = visits.reshape(-1), total.reshape(-1)  # [B * N * A] views
        roots = np.arange(B) * N
        count = roots + 1  # the next free row of each tree
        ncur[roots], nmask[roots] = cur, mask
        legal0 = g.legal(mask) if legal is None else np.asarray(legal, bool)
        if not legal0.any(axis=1).all():
            raise ValueError("search: a root position has no legal move (is the game over?)")
        net_p0, v0, *m0 = self.evaluator.root(g, cur, mask, legal0, rng)
        ml = self.moves_left_weight > 0
        if ml:  # plies to the end: each node's evaluator estimate, each edge's running sum
            node_m = np.zeros(B * N)
            node_m[roots] = np.asarray(m0[0], np.float64).reshape(-1) if m0 else 0.0
            mtotal = np.zeros((B * N, A))
            flat_mtotal = mtotal.reshape(-1)
        p0 = net_p0
        if noise and self.noise_fraction > 0:
            if rng is None:
                raise ValueError("search(noise=True) needs an rng (np.random.Generator)")
            gam = np.where(legal0, rng.standard_gamma(self.dirichlet_alpha, (B, A)), 0.0)
            dirichlet = gam / np.maximum(gam.sum(axis=1, keepdims=True), 1e-300)
            p0 = (1 - self.noise_fraction) * p0 + self.noise_fraction * dirichlet
        prior[roots], legal_at[roots] = p0, legal0
        gamma = self.discount
        for _ in range(S):
            node = roots.copy()  # [B] row of each game's current node
            path: list[tuple[np.ndarray, np.ndarray]] = []  # per depth: (games, edge rows)
            depth = np.zeros(B, np.int64)
            active = np.ones(B, bool)
            fresh = np.zeros(B, bool)  # the leaf is a new non-terminal node
            while active.any():  # selection, one level of all trees at a time
                b = np.flatnonzero(active)
                n = node[b]
                kids = child[n]  # [b, A]
                w = (
                    total[n]
                    if not ml
                    else total[n] + visits[n] * self._utility(n, visits, total, mtotal, node_m)
                )
                here = Children(visits[n], w, prior[n], legal_at[n], kids >= 0, not path)
                a = self.select(here, self.c, rng)
                path.append((b, n * A + a))
                depth[b] += 1
                c = kids[np.arange(len(b)), a]
                new = c < 0
                if new.any():  # expansion: add the child node
                    bn, nn, an = b[new], n[new], a[new]
                    idx = count[bn]
                    count[bn] += 1
                    c2, m2, won, full = g.play(ncur[nn], nmask[nn], an)
                    ncur[idx], nmask[idx] = c2, m2
                    term[idx] = np.where(won, 1, np.where(full, 2, 0))
                    child[nn, an] = idx
                    c[new] = idx
                node[b] = c
                t = term[c]
                stop = new | (t != 0)
                active[b[stop]] = False
                fresh[b[new & (t == 0)]] = True
            # leaf values for the player to move at the leaf
            value = np.where(term[node] == 1, -1.0, 0.0)
            e = np.flatnonzero(fresh)
            if len(e):  # one evaluator call for the new leaves of all games
                ne = node[e]
                ce, me = ncur[ne], nmask[ne]
                lg = g.legal(me)
                p, v, *m = self.evaluator.evaluate(g, ce, me, lg, rng)
                prior[ne], legal_at[ne] = p, lg
                if ml and m:
                    node_m[ne] = np.asarray(m[0], np.float64).reshape(-1)
                value[e] = v if gamma == 1.0 else gamma * v  # one ply further than a result
            # back up: the mover at depth d sees the leaf value with sign (-1)^(L - d)
            # (discounted: times gamma^(L - d - 1))
            for d, (b, edge) in enumerate(path):
                sign = np.where((depth[b] - d) % 2 == 1, -1.0, 1.0)
                if gamma != 1.0:
                    sign = sign * gamma ** (depth[b] - d - 1).astype(np.float64)
                flat_visits[edge] += 1.0  # one edge per game: no repeated index
                flat_total[edge] += sign * value[b]
                if ml:  # plies from this edge's node to the end: the path below + the leaf's
                    flat_mtotal[edge] += (depth[b] - d) + node_m[node[b]]
        root_n = visits[roots]
        root_value = total[roots].sum(axis=1) / np.maximum(root_n.sum(axis=1), 1.0)
        root_q = total[roots] / np.maximum(root_n, 1.0)
        root_m = mtotal[roots] / np.maximum(root_n, 1.0) if ml else None
        return SearchResult(root_n, root_value, p0, root_q, net_p0, v0, legal0, root_m)

    def _utility(
        self,
        n: np.ndarray,
        visits: np.ndarray,
        total: np.ndarray,
        mtotal: np.ndarray,
        node_m: np.ndarray,
    ) -> np.ndarray:
        """The moves-left utility ``[b, A]`` of the moves at nodes ``n`` (0 where unvisited)."""
        nsa = visits[n]  # [b, A]
        seen = nsa > 0
        q = total[n] / np.maximum(nsa, 1.0)
        m = mtotal[n] / np.maximum(nsa, 1.0)
        # the node's mean plies left: its own estimate counts as one visit
        parent = (node_m[n] + mtotal[n].sum(axis=1)) / (1.0 + nsa.sum(axis=1))  # [b]
        cap = MOVES_LEFT_MAX_EFFECT
        effect = np.clip(self.moves_left_weight * (m - parent[:, None]), -cap, cap)
        return np.where(seen, -q * effect, 0.0)


class PUCTSearch(MCTS):
    """AlphaZero's search: `MCTS` with a network's priors and value and `puct`.

    Args:
        game: the rules (``ConnectFour``, ``TicTacToe``).
        evaluate: the network (or heuristic), see `NetworkFn`, e.g.
            ``paddlecraft.agents.Policy.priors_and_values`` or `uniform_evaluator`.
        simulations: simulations per search (each adds at most one node per tree).
        c_puct: exploration constant.
        dirichlet_alpha: root noise concentration (AlphaZero: 0.3 chess, ~10 / moves).
        noise_fraction: share of the root priors replaced by noise when ``noise=True``.
        discount: per-ply discount of backed-up values (1: none; see `MCTS`).
        moves_left_weight: the moves-left utility (0: off; see `MCTS`); ``evaluate``
            then may return a third array, the plies left ``[n]``.
    """

    def __init__(
        self,
        game: type[BoardGame],
        evaluate: NetworkFn,
        simulations: int = 100,
        c_puct: float = 1.5,
        dirichlet_alpha: float = 1.0,
        noise_fraction: float = 0.25,
        discount: float = 1.0,
        moves_left_weight: float = 0.0,
    ) -> None:
        if c_puct <= 0:
            raise ValueError(f"search: need c_puct > 0, got {c_puct}")
        super().__init__(
            game, NetworkEvaluator(evaluate), simulations, "puct", c_puct, dirichlet_alpha,
            noise_fraction, discount, moves_left_weight,
        )  # fmt: skip
        self.evaluate, self.c_puct = evaluate, float(c_puct)


# ---------------------------------------------------------------------- results


def completed_q_policy(
    res: SearchResult, visit_offset: float = 50.0, value_scale: float = 0.1
) -> np.ndarray:
    """The improved policy ``softmax(log prior + sigma(completed Q))`` of Gumbel AlphaZero
    (Danihelka et al., ICLR 2022, eq. 10-11 and appendix D), from a PUCT search: ``[B, A]``.

    Visited moves keep their search Q; unvisited ones get the mixed value of the root
    (the network's value blended with the prior-weighted Q of the visited moves). The
    completed Q values are min-max scaled to [0, 1] over the legal moves and multiplied by
    ``(visit_offset + max_a N(a)) * value_scale``. The prior is the network's, before root
    noise, so the target does not learn the noise; where the search finds nothing to
    separate the moves, the target is the network's own policy. Unlike visit counts, it
    stays sharp with few simulations.
    """
    legal = res.legal
    n = res.visits
    seen = n > 0
    prior = np.maximum(res.net_priors, 1e-12)
    psum = np.where(seen, prior, 0.0).sum(axis=1)
    weighted_q = np.where(seen, prior * res.q, 0.0).sum(axis=1) / np.maximum(psum, 1e-12)
    total = n.sum(axis=1)
    mixed = (res.net_value + total * weighted_q) / (total + 1.0)  # [B]
    q = np.where(seen, res.q, mixed[:, None])
    lo = np.where(legal, q, np.inf).min(axis=1, keepdims=True)
    hi = np.where(legal, q, -np.inf).max(axis=1, keepdims=True)
    q = (q - lo) / np.maximum(hi - lo, 1e-8)
    sigma = (visit_offset + n.max(axis=1, keepdims=True)) * value_scale * q
    logits = np.where(legal, np.log(prior) + sigma, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


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


# ---------------------------------------------------------------------- reference


def search_one(
    game: type[BoardGame],
    evaluate: Evaluator,
    cur: int,
    mask: int,
    simulations: int,
    c_puct: float = 1.5,
    discount: float = 1.0,
) -> np.ndarray:
    """Root visit counts ``[A]`` of the same PUCT search for ONE position, written plainly.

    A dict-of-nodes tree with one evaluator call per leaf (batch of 1): the classic
    one-game-at-a-time loop, kept as the reference for tests and ``bench/search_bench.py``.
    No noise; ties go to the lowest move, as in `PUCTSearch`. A move's sampled
    value is the result where it ends the game (1 win, 0 draw), else ``-discount`` times
    the value found below it.
    """
    A = game.num_actions

    def expand(c: int, m: int) -> dict:
        cu, ma = np.array([c], np.uint64), np.array([m], np.uint64)
        lg = game.legal(ma)
        p, v = evaluate(game.planes(cu, ma), lg)
        p = np.where(lg[0], np.asarray(p[0], np.float64), 0.0)
        p = p / p.sum() if p.sum() > 0 else lg[0] / lg[0].sum()
        node = {"cur": c, "mask": m, "legal": lg[0], "prior": p, "children": {}}
        node["n"], node["w"] = np.zeros(A), np.zeros(A)
        return node, float(np.asarray(v).reshape(-1)[0])

    root, _ = expand(int(cur), int(mask))
    for _ in range(simulations):
        node, path = root, []
        while True:
            n, w = node["n"], node["w"]
            sq = math.sqrt(1.0 + n.sum())
            scores = [
                w[a] / max(n[a], 1.0) + c_puct * node["prior"][a] * (sq / (1.0 + n[a]))
                if node["legal"][a]
                else -math.inf
                for a in range(A)
            ]
            a = int(np.argmax(scores))
            path.append((node, a))
            if a in node["children"]:
                kid = node["children"][a]
                if kid["term"]:
                    q = 1.0 if kid["term"] == 1 else 0.0  # the move ends the game
                    break
                node = kid
                continue
            c2, m2, won, full = game.play(
                np.array([node["cur"]], np.uint64), np.array([node["mask"]], np.uint64), [a]
            )
            t = 1 if won[0] else 2 if full[0] else 0
            if t:
                kid, q = {"term": t}, (1.0 if t == 1 else 0.0)
            else:
                kid, value = expand(int(c2[0]), int(m2[0]))  # for the player to move there
                kid["term"] = 0
                q = -discount * value
            node["children"][a] = kid
            break
        for parent, a in reversed(path):  # q: the sampled value of the move, for its mover
            parent["n"][a] += 1.0
            parent["w"][a] += q
            q = -discount * q
    return root["n"]
