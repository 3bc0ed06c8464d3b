"""Monte-Carlo tree search, batched: one tree, a selection rule and a leaf evaluator.

As OpenSpiel's ``MCTSBot(evaluator, child_selection_fn)``, one `MCTS` serves both
searches of the project, which differ only in two variation points:

- the leaf evaluator (`evaluators`): a network's priors and value
  (`NetworkEvaluator`, AlphaZero), or uniform priors and a
  random playout (`RandomRolloutEvaluator`);
- the selection rule (`selection`): `puct` (``argmax_a Q(s,a) + c P(s,a) sqrt(1 + N(s)) /
  (1 + N(s,a))``, an unvisited move's ``Q`` 0 or its node's reduced mean), or `uct`
  (UCB1 on win rates in [0, 1], every untried move first, picked at random: the
  rollout-MCTS anchors).

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
temperature). `SearchSettings` holds a search's settings.
`search_one` is the PUCT search written plainly for one position (reference for tests
and the benchmark).

This module knows only the rules (`paddlecraft.arenas.games`), no agents, so any
network or heuristic can guide it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from .core import BoardGame
from .evaluators import (
    CachedEvaluator,
    Evaluator,
    NetworkEvaluator,
    NetworkFn,
    RandomRolloutEvaluator,
    uniform_evaluator,
)
from .search_reference import search_one
from .search_results import (
    MOVE_RULES,
    SearchResult,
    choose_moves,
    decided_visits,
    played_moves,
    pruned_visits,
)
from .search_tree import Tree, TreeReuse
from .selection import Children, SelectionRule, forced_moves, puct, selection_rule, uct

__all__ = [
    "MCTS",
    "MOVE_RULES",
    "CachedEvaluator",
    "Children",
    "Evaluator",
    "NetworkEvaluator",
    "NetworkFn",
    "PUCTSearch",
    "RandomRolloutEvaluator",
    "SearchResult",
    "SearchSettings",
    "SelectionRule",
    "TreeReuse",
    "choose_moves",
    "decided_visits",
    "played_moves",
    "pruned_visits",
    "puct",
    "search_one",
    "uct",
    "uniform_evaluator",
]

# ---------------------------------------------------------------------- the tree


@dataclass(frozen=True)
class SearchSettings:
    """What a search does, apart from its rules, evaluator and selection rule."""

    simulations: int = 100
    """Simulations per search (>= 1; each adds at most one node per tree)."""
    c: float = 1.5
    """Exploration constant of the selection rule (>= 0; PUCT's ``c_puct``: > 0)."""
    dirichlet_alpha: float = 1.0
    """Root noise concentration (> 0; AlphaZero: 0.3 chess, ~10 / moves)."""
    noise_fraction: float = 0.25
    """Share of the root priors replaced by noise when ``noise=True``, in [0, 1]."""
    discount: float = 1.0
    """Per-ply discount of backed-up values, in (0, 1] (1: none). Below 1 a move's value is
    ``r`` for a move that ends the game and ``-discount * V(next)`` otherwise, so a sooner
    win and a later loss are worth more (the solver's exact scores order moves the same
    way); the evaluator's values must then be discounted values."""
    tactics: bool = False
    """Score the positions the rules decide within two plies exactly and search no further
    below them (a shallow proof at expansion, as Baier and Winands' MCTS-minimax hybrids):
    a new node whose mover has a winning move is worth ``1`` to that mover (its parent's
    move into it: ``-discount``), one whose opponent has two winning moves the mover cannot
    both block is a loss in two plies (``-discount`` to its mover); at the root, only the
    winning moves are searched when there are any. Off: the plain search."""
    proofs: bool = False
    """MCTS-Solver backups (Winands, Bjornsson and Saito 2008) with exact discounted values:
    a node whose every legal move has a proven value, or one of whose moves is proven at
    least as good as any unproven move could be, is proven at the best of them; its parent
    edge then carries that exact value (Q replaced, not averaged), a search stops at proven
    nodes as at finished ones, and `SearchResult.proven` holds the root moves' exact
    values. With ``tactics``, an unproven move of a node whose mover cannot win at once is
    worth at most ``discount ** 2``, so a forced win in three plies is proof enough."""
    forced_playouts: float = 0.0
    """KataGo's forced playouts in searches with root noise (``noise=True``, training):
    every root move the search has visited gets at least about ``sqrt(k P(s, a) N(s))``
    visits (``k`` this, >= 0, KataGo's 2; 0: off), so a move the noise lifts is looked at
    more than once; `pruned_visits` takes those visits back out of the policy target."""
    fpu_reduction: float | None = None
    """PUCT's value of an unvisited move (first-play urgency): None 0, a number ``r >= 0``
    the node's mean ``Q`` minus ``r * sqrt(visited prior)`` (see `puct`)."""

    def check(self) -> None:
        """Raise ``ValueError`` for a value no search can use."""
        if int(self.simulations) < 1:
            raise ValueError(f"search simulations must be >= 1, got {self.simulations}")
        if self.c < 0 or self.dirichlet_alpha <= 0 or not 0 <= self.noise_fraction <= 1:
            raise ValueError(
                f"search: need c >= 0, dirichlet_alpha > 0 and noise_fraction in [0, 1], "
                f"got {self.c}, {self.dirichlet_alpha}, {self.noise_fraction}"
            )
        if not 0 < self.discount <= 1:
            raise ValueError(f"search: need discount in (0, 1], got {self.discount}")
        if not self.forced_playouts >= 0:
            raise ValueError(f"search: need forced_playouts >= 0, got {self.forced_playouts}")
        if self.fpu_reduction is not None and not self.fpu_reduction >= 0:
            raise ValueError(f"search: need fpu_reduction >= 0 or None, got {self.fpu_reduction}")


def _settings(settings: SearchSettings | None, fields: dict[str, Any]) -> SearchSettings:
    """``settings`` (default: `SearchSettings()`) with ``fields`` replaced (``c_puct``: ``c``)."""
    if "c_puct" in fields:
        fields["c"] = fields.pop("c_puct")
    out = replace(settings or SearchSettings(), **fields)
    out.check()
    return out


class MCTS:
    """Batched Monte-Carlo tree search over a native `BoardGame`.

    Args:
        game: the rules (``ConnectFour``, ``TicTacToe``).
        evaluator: an `Evaluator`, or a network function
            ``(planes, masks) -> (priors, values)`` (wrapped in ``NetworkEvaluator``).
        settings: the search's `SearchSettings` (default: its defaults).
        selection: ``"puct"``, ``"uct"`` (see `puct`, `uct`) or a `SelectionRule`;
            ``"puct"`` with ``settings.fpu_reduction`` reduces an unvisited move's value.
        **fields: `SearchSettings` fields to replace in ``settings`` (``c_puct``: ``c``).
    """

    def __init__(
        self,
        game: type[BoardGame],
        evaluator: Evaluator | NetworkFn,
        settings: SearchSettings | None = None,
        selection: str | SelectionRule = "puct",
        **fields: Any,
    ) -> None:
        self.settings = cfg = _settings(settings, fields)
        if not isinstance(evaluator, Evaluator):
            evaluator = NetworkEvaluator(evaluator)
        self.game, self.evaluator = game, evaluator
        if selection == "puct" and cfg.fpu_reduction is not None:
            selection = partial(puct, fpu_reduction=float(cfg.fpu_reduction))
        self.select = selection_rule(selection)
        self.simulations, self.c = int(cfg.simulations), float(cfg.c)
        self.dirichlet_alpha, self.noise_fraction = cfg.dirichlet_alpha, cfg.noise_fraction
        self.discount = float(cfg.discount)
        self.tactics, self.proofs = bool(cfg.tactics), bool(cfg.proofs)
        self.forced_playouts = float(cfg.forced_playouts)

    def search(
        self,
        cur: np.ndarray,
        mask: np.ndarray,
        rng: Any = None,
        noise: bool = False,
        legal: np.ndarray | None = None,
        reuse: TreeReuse | None = None,
    ) -> SearchResult:
        """Search the positions ``(cur, mask)`` (bitboards ``[B]``, mover's side; none
        finished). ``rng``: a ``np.random.Generator`` or ``np.random`` (root noise, and the
        random draws of the evaluator and selection rule); ``legal``: the root moves
        ``[B, A]`` if known (by default from the rules). ``reuse``: the subtrees earlier
        searches left (`TreeReuse`): a position found there starts from its subtree's
        visits and adds ``simulations`` to them; this search's trees are left in
        ``reuse.last`` (then call ``reuse.played(actions)``)."""
        g = self.game
        cur, mask = np.asarray(cur, np.uint64), np.asarray(mask, np.uint64)
        B, S, A = len(cur), self.simulations, g.num_actions
        legal0 = g.legal(mask) if legal is None else np.asarray(legal, bool)
        if not legal0.any(axis=1).all():
            raise ValueError("search: a root position has no legal move (is the game over?)")
        forcing = noise and self.forced_playouts > 0  # KataGo's, at the roots
        # node i of game b is row b * N + i of the tree's arrays (`Tree`)
        tree = Tree.empty(B, S + 1, A) if reuse is None else reuse.start(cur, mask, S, A)
        ncur, nmask, prior, legal_at = tree.ncur, tree.nmask, tree.prior, tree.legal_at
        child, visits, total, exact = tree.child, tree.visits, tree.total, tree.exact
        flat_visits, flat_total = visits.reshape(-1), total.reshape(-1)  # [B * N * A] views
        roots, count = tree.roots, tree.count
        ncur[roots], nmask[roots] = cur, mask
        net_p0, v0, *_ = self.evaluator.root(g, cur, mask, legal0, rng)
        p0 = net_p0
        if noise and self.noise_fraction > 0:
            if rng is None:
                raise ValueError("search(noise=True) needs an rng (np.random.Generator)")
            gam = np.where(legal0, rng.standard_gamma(self.dirichlet_alpha, (B, A)), 0.0)
            dirichlet = gam / np.maximum(gam.sum(axis=1, keepdims=True), 1e-300)
            p0 = (1 - self.noise_fraction) * p0 + self.noise_fraction * dirichlet
        if self.tactics:  # a winning root move: search only those (all worth 1)
            wins0 = g.winning_moves(cur, mask) & legal0
            some = wins0.any(axis=1, keepdims=True)
            p0 = np.where(some, np.where(wins0, p0 + 1e-12, 0.0), p0)
            p0 = p0 / p0.sum(axis=1, keepdims=True)
            # (a kept subtree never starts at such a root: a node whose mover can win was
            # scored exactly when it was made and never expanded, so it comes back bare)
        prior[roots], legal_at[roots] = p0, legal0
        gamma = self.discount
        # signs[k]: what a leaf value is worth k plies up, (-1)^k gamma^(k - 1) (k >= 1)
        signs = _signs(g.max_moves + 2, gamma)
        # the value, for the player to move there, that a leaf of each kind backs up
        leaf_value = np.array([np.nan, -1.0, 0.0, gamma, -gamma * gamma])
        # exact: each node's exact leaf value (NaN: not known); an edge into it is worth -exact
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
                here = Children(visits[n], total[n], prior[n], legal_at[n], kids >= 0, not path)
                a = self.select(here, self.c, rng)
                if forcing and not path:
                    a = forced_moves(here, self.forced_playouts, a)
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
                    # 1: the player who moved into it won; 2: draw; with tactics, decided
                    # by the rules within two plies: 3 its mover wins next ply, 4 loses in two
                    kind = np.where(won, 1, np.where(full, 2, 0))
                    if self.tactics:
                        kind = np.where(kind == 0, self._decide(c2, m2), kind)
                    exact[idx] = leaf_value[kind]
                    child[nn, an] = idx
                    c[new] = idx
                node[b] = c
                known = ~np.isnan(exact[c])  # finished, decided or proven
                stop = new | known
                active[b[stop]] = False
                fresh[b[new & ~known]] = True
            # leaf values for the player to move at the leaf
            value = np.nan_to_num(exact[node])  # fresh leaves: the evaluator's, below
            e = np.flatnonzero(fresh)
            if len(e):  # one evaluator call for the new leaves of all games
                ne = node[e]
                ce, me = ncur[ne], nmask[ne]
                lg = g.legal(me)
                p, v, *_ = self.evaluator.evaluate(g, ce, me, lg, rng)
                prior[ne], legal_at[ne] = p, lg
                value[e] = v if gamma == 1.0 else gamma * v  # one ply further than a result
            # back up: the mover at depth d sees the leaf value with sign (-1)^(L - d)
            # (discounted: times gamma^(L - d - 1))
            if len(path) >= len(signs):  # a game longer than its max_moves says
                signs = _signs(2 * len(path), gamma)
            for d, (b, edge) in enumerate(path):
                sign = signs[depth[b] - d]
                flat_visits[edge] += 1.0  # one edge per game: no repeated index
                flat_total[edge] += sign * value[b]
            if self.proofs:
                self._prove(path, ~np.isnan(exact[node]), exact, child, legal_at, flat_visits,
                            flat_total)  # fmt: skip
        root_n = visits[roots]
        root_value = total[roots].sum(axis=1) / np.maximum(root_n.sum(axis=1), 1.0)
        root_q = total[roots] / np.maximum(root_n, 1.0)
        res = SearchResult(root_n, root_value, p0, root_q, net_p0, v0, legal0)
        if reuse is not None:
            reuse.last = tree
        if self.proofs:
            kids = child[roots]
            res.proven = np.where(kids >= 0, -exact[np.maximum(kids, 0)], np.nan)
            res.decided = ~np.isnan(exact[roots])
            best = np.where(legal0 & ~np.isnan(res.proven), res.proven, -np.inf).max(axis=1)
            res.value = np.where(res.decided, best, res.value)  # a proven root: exact
        return res

    def _decide(self, cur: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """What the rules decide within two plies of the positions ``(cur, mask)`` (none
        finished): 3 where the mover has a winning move, 4 where it has none and the
        opponent has two (one move blocks one of them, never both), else 0."""
        mover, lost = self.game.two_ply_threats(cur, mask)  # [n] each
        return np.where(mover, 3, np.where(lost, 4, 0))

    def _prove(
        self,
        path: list[tuple[np.ndarray, np.ndarray]],
        sure: np.ndarray,
        exact: np.ndarray,
        child: np.ndarray,
        legal_at: np.ndarray,
        flat_visits: np.ndarray,
        flat_total: np.ndarray,
    ) -> None:
        """After a backup: walk each path up from a leaf of known value (``sure [B]``),
        give every edge into a proven node its exact value and prove the nodes above
        where the rule of `MCTS` (``proofs``) allows, stopping where a node stays open."""
        A = self.game.num_actions
        gamma = self.discount
        bound = gamma * gamma if self.tactics else 1.0  # the most an unproven move is worth
        sure = sure.copy()
        for b, edge in reversed(path):
            on = sure[b]
            if not on.any():
                continue
            b, edge = b[on], edge[on]
            kid = child.reshape(-1)[edge]
            flat_total[edge] = flat_visits[edge] * -exact[kid]  # Q is now exact
            n = edge // A
            kids = child[n]  # [k, A]
            worth = np.where(kids >= 0, -exact[np.maximum(kids, 0)], np.nan)  # edge values
            legal = legal_at[n]
            known = ~np.isnan(worth)
            best = np.where(legal & known, worth, -np.inf).max(axis=1)
            proven = (~legal | known).all(axis=1) | (best >= bound - 1e-12)
            exact[n[proven]] = gamma * best[proven]
            sure[b] = proven


def _signs(n: int, gamma: float) -> np.ndarray:
    """``[n]``: what a leaf's value is worth ``k`` plies up, ``(-1)^k gamma^(k - 1)`` (k >= 1)."""
    k = np.arange(n)
    signs = np.where(k % 2 == 1, -1.0, 1.0)
    return signs * gamma ** (k - 1).astype(np.float64) if gamma != 1.0 else signs


class PUCTSearch(MCTS):
    """AlphaZero's search: `MCTS` with a network's priors and value and `puct`.

    Args:
        game: the rules (``ConnectFour``, ``TicTacToe``).
        evaluate: the network (or heuristic), see `NetworkFn`, e.g.
            ``paddlecraft.agents.Policy.priors_and_values`` or `uniform_evaluator`; or an
            `Evaluator` around one (e.g. a `CachedEvaluator`, which searches may share).
        settings: the search's `SearchSettings`.
        **fields: `SearchSettings` fields to replace in ``settings`` (``c_puct``: ``c``).
    """

    def __init__(
        self,
        game: type[BoardGame],
        evaluate: NetworkFn | Evaluator,
        settings: SearchSettings | None = None,
        **fields: Any,
    ) -> None:
        settings = _settings(settings, fields)
        if settings.c <= 0:
            raise ValueError(f"search: need c_puct > 0, got {settings.c}")
        super().__init__(game, evaluate, settings)  # MCTS wraps a function
        self.evaluate, self.c_puct = evaluate, float(settings.c)
