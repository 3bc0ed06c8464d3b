"""The arrays of a batched search's trees, and the subtrees one search leaves to the next.

`Tree` holds the ``[B * nodes, ...]`` arrays of `MCTS.search` (every game its own tree of
``nodes`` rows). `TreeReuse` keeps, after each search, the subtrees below the moves played
and hands them to the next search of the positions they start from: AlphaZero's and
KataGo's tree reuse, so a search starts with the visits its predecessor already spent
below the move played instead of from nothing.

    reuse = TreeReuse()
    res = search.search(cur, mask, rng, noise=True, reuse=reuse)  # kept in reuse.last
    actions = choose_moves(res.visits, temperature, rng)
    reuse.played(actions)  # the subtrees below them, keyed by the positions they start at

A kept subtree is found by its root position (the bitboards), not by a game index, so one
`TreeReuse` serves a controller whatever the games it is called on: a self-play game's
next search starts at the child of the move played (the same controller moves on both
sides), a game against another player's at a grandchild (its opponent moved between); the
subtrees of the last two searches are kept for that. Two games at one position start
from the same subtree (each gets its own copy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Tree", "TreeReuse"]


@dataclass
class Tree:
    """The trees of one search of ``B`` positions: game ``b``'s node ``i`` is row
    ``b * nodes + i`` (node 0: the root); edge statistics are for the player to move."""

    nodes: int  #: rows per game
    count: np.ndarray  #: [B] the next free row of each game's tree
    ncur: np.ndarray  #: [B * nodes] the mover's stones (bitboard)
    nmask: np.ndarray  #: [B * nodes] all stones (bitboard)
    prior: np.ndarray  #: [B * nodes, A] priors (0: not evaluated yet)
    legal_at: np.ndarray  #: [B * nodes, A] legal moves
    child: np.ndarray  #: [B * nodes, A] row of each move's child, -1: not expanded
    visits: np.ndarray  #: [B * nodes, A] N(s, a)
    total: np.ndarray  #: [B * nodes, A] W(s, a)
    exact: np.ndarray  #: [B * nodes] exact value for the mover (NaN: not known)

    @classmethod
    def empty(cls, games: int, nodes: int, actions: int) -> Tree:
        """``games`` trees of ``nodes`` rows each, every one a bare root."""
        rows = games * nodes
        return cls(
            nodes=nodes,
            count=np.arange(games, dtype=np.int64) * nodes + 1,
            ncur=np.zeros(rows, np.uint64),
            nmask=np.zeros(rows, np.uint64),
            prior=np.zeros((rows, actions)),
            legal_at=np.zeros((rows, actions), bool),
            child=np.full((rows, actions), -1, np.int64),
            visits=np.zeros((rows, actions)),
            total=np.zeros((rows, actions)),
            exact=np.full(rows, np.nan),
        )

    @property
    def roots(self) -> np.ndarray:
        """[B] the root row of each game."""
        return np.arange(len(self.count), dtype=np.int64) * self.nodes

    def subtree_rows(self, tops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every row below (and including) each row of ``tops [k]``, breadth first:
        ``(owner [m], rows [m])``, ``owner`` the index into ``tops``, grouped by owner
        with each subtree's top first."""
        owner = [np.arange(len(tops))]
        rows = [np.asarray(tops, np.int64)]
        while len(rows[-1]):
            kids = self.child[rows[-1]]  # [k, A]
            o, a = np.nonzero(kids >= 0)
            owner.append(owner[-1][o])
            rows.append(kids[o, a])
        o, r = np.concatenate(owner), np.concatenate(rows)
        order = np.argsort(o, kind="stable")  # a subtree's rows together, its top first
        return o[order], r[order]


class TreeReuse:
    """The subtrees that searches leave to the next ones of one player (see the module).

    A search given ``reuse=`` starts each position found here from a copy of its subtree
    (`start`) and leaves its own trees in `last`; `played` then keeps the subtrees below
    the moves played, replacing those of the search before last.
    """

    def __init__(self) -> None:
        self.last: Tree | None = None  #: the trees of the latest search
        #: per kept search, newest first: (its trees, {(cur, mask): row})
        self._kept: list[tuple[Tree, dict[tuple[int, int], int]]] = []
        self.reused = 0  #: positions that started from a kept subtree
        self.searched = 0  #: positions searched

    def played(self, actions: np.ndarray) -> None:
        """Keep the subtrees below ``actions [B]``, the moves played after the latest
        search: the child of each move (the next position of a game this player moves on
        both sides of) and the child's children (a game whose opponent moves between)."""
        tree, self.last = self.last, None
        if tree is None:
            return
        kids = tree.child[tree.roots, np.asarray(actions, np.int64)]  # [B]
        kids = kids[kids >= 0]
        grand = tree.child[kids].reshape(-1)
        keys: dict[tuple[int, int], int] = {}
        for row in np.concatenate([kids, grand[grand >= 0]]).tolist():
            keys.setdefault((int(tree.ncur[row]), int(tree.nmask[row])), row)
        self._kept = [(tree, keys), *self._kept[:1]]

    def start(self, cur: np.ndarray, mask: np.ndarray, simulations: int, actions: int) -> Tree:
        """Trees for a search of ``(cur, mask) [B]`` with ``simulations``: each position
        found among the kept subtrees starts from a copy of its subtree (its root's
        statistics included), the others from a bare root."""
        found = []  # per kept search: (games, their kept rows)
        sizes = np.ones(len(cur), np.int64)  # rows each game starts with
        left = np.ones(len(cur), bool)
        for tree, keys in self._kept:
            games, rows = [], []
            for b in np.flatnonzero(left).tolist():
                row = keys.get((int(cur[b]), int(mask[b])))
                if row is not None:
                    games.append(b)
                    rows.append(row)
            if games:
                g, r = np.asarray(games), np.asarray(rows, np.int64)
                owner, sub = tree.subtree_rows(r)
                sizes[g] = np.bincount(owner, minlength=len(g))
                left[g] = False
                found.append((tree, g, owner, sub))
        self.searched += len(cur)
        self.reused += len(cur) - int(left.sum())
        out = Tree.empty(len(cur), int(sizes.max()) + simulations, actions)
        for tree, g, owner, sub in found:
            _copy(tree, out, g, owner, sub)
        return out


def _copy(src: Tree, dst: Tree, games: np.ndarray, owner: np.ndarray, rows: np.ndarray) -> None:
    """Copy the subtrees ``rows`` of ``src`` (grouped by ``owner``, tops first, as
    `Tree.subtree_rows` gives them) into ``dst`` as the trees of ``games``."""
    first = np.searchsorted(owner, np.arange(len(games)))  # each subtree's first entry
    local = np.arange(len(rows)) - first[owner]  # 0 for each top: the new root
    new = games[owner] * dst.nodes + local  # [m] rows in dst
    # the new row of each (owner, source row): children are found among their owner's rows
    key = owner * len(src.exact) + rows
    order = np.argsort(key)
    kids = src.child[rows]  # [m, A]
    has = kids >= 0
    pos = np.searchsorted(key[order], owner[:, None] * len(src.exact) + np.maximum(kids, 0))
    remapped = np.where(has, new[order][np.minimum(pos, len(rows) - 1)], -1)
    for name in ("ncur", "nmask", "prior", "legal_at", "visits", "total", "exact"):
        getattr(dst, name)[new] = getattr(src, name)[rows]
    dst.child[new] = remapped
    dst.count[games] = games * dst.nodes + np.bincount(owner, minlength=len(games))
