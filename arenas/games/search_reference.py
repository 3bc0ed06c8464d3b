"""The PUCT search written plainly for one position (`search_one`): the reference the
batched `MCTS` is tested and benchmarked against."""

from __future__ import annotations

import math

import numpy as np

from .core import BoardGame
from .evaluators import Evaluator

__all__ = ["search_one"]


def search_one(
    game: type[BoardGame],
    evaluate: Evaluator,
    cur: int,
    mask: int,
    simulations: int,
    c_puct: float = 1.5,
    discount: float = 1.0,
    fpu_reduction: float | None = None,
) -> np.ndarray:
    """Root visit counts ``[A]`` of the same PUCT search for ONE position, written plainly.

    A dict-of-nodes tree with one evaluator call per leaf (batch of 1): the classic
    one-game-at-a-time loop, kept as the reference for tests and ``bench/search_bench.py``.
    No noise; ties go to the lowest move, as in `PUCTSearch`. A move's sampled
    value is the result where it ends the game (1 win, 0 draw), else ``-discount`` times
    the value found below it. An unvisited move's value is 0, or with ``fpu_reduction``
    ``r`` the node's mean value over its visited moves less ``r`` times the square root
    of their summed prior.
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
            first = 0.0  # what an unvisited move is worth
            if fpu_reduction is not None and n.sum() > 0:
                seen = sum(node["prior"][a] for a in range(A) if n[a] > 0)
                first = w.sum() / n.sum() - fpu_reduction * math.sqrt(seen)
            scores = [
                (w[a] / n[a] if n[a] > 0 else first)
                + c_puct * node["prior"][a] * (sq / (1.0 + n[a]))
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
