"""What a trained policy makes of one board position, move by move.

    report = explain_position("runs/c4/seed0", "33333321:1", simulations=(200, 800))

A position is written as the moves that reach it from the empty board, one digit per
move (Connect Four: the column 0-6; tic-tac-toe: the cell 0-8), as the solver games'
``win_given_away_lines`` name them (``"33333321:1"``: the part after ``:`` is the move
that was played there, and is reported as ``played``). For each legal move the report
holds the network's prior, the value of the position after the move (the network's, for
the player to move now; a move that ends the game: its result, 1 a win, 0 a draw), the
solver's exact score (Connect Four with the ``solver`` extra) and, per search size, the
visits and mean value the policy's own search gives it (its discount, tactics, proofs and
move rule, as it was trained) and the move that search plays. It answers "the network
knew the winning move; did the search lose it?".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from paddlecraft.agents import Policy
from paddlecraft.errors import ConfigError

from ..games.core import DIGITS, BoardGame
from ..games.search import played_moves
from .player import SearchPlayer, _rules, load_policy


def position_after(game: str | type[BoardGame], line: str) -> BoardGame:
    """One board of ``game`` after the moves ``line`` (`BoardGame.after`: digits; anything
    after ``:`` is ignored). Raises ``ValueError`` naming the line and the move where it
    cannot go on."""
    return _rules(game).after(line)


def _exact_values(rules: type[BoardGame], planes: np.ndarray) -> list[float | None] | None:
    """The solver's score of each move ``[A]`` (None: illegal), or None without one."""
    if rules.name != "connect_four":
        return None
    try:
        from ..games.solver import solve_planes

        values = solve_planes(planes)[0]
    except ConfigError:  # the solver extra is missing: the report goes without it
        return None
    return [None if np.isnan(v) else float(v) for v in values]


def explain_position(
    source: str | os.PathLike | Policy,
    line: str,
    game: str | type[BoardGame] = "connect_four",
    simulations: Sequence[int] = (200,),
    c_puct: float = 1.5,
    seed: int = 0,
) -> dict[str, Any]:
    """The policy's and its searches' view of the position ``line`` reaches.

    Returns ``{"line", "played", "ply", "legal" [A], "solver" [A] | None, "prior" [A],
    "value", "value_after" [A], "search": {simulations: {"visits" [A], "q" [A], "move"}}}``
    with None on illegal moves (and ``q`` None on unvisited ones); values are for the player
    to move in the position.
    ``source``: a run folder, a saved policy folder or a `Policy`.
    """
    if any(int(n) < 1 for n in simulations):
        raise ValueError(f"simulations={list(simulations)}: each must be >= 1, e.g. (200, 800)")
    policy = load_policy(source)
    rules = _rules(game)
    board = position_after(rules, line)
    planes, masks = board.observe()  # [1, rows, cols, 2], [1, A]
    legal = masks[0].astype(bool)
    prior, value = policy.priors_and_values(planes, masks)  # [1, A], [1]
    after: list[float | None] = []
    for a in range(rules.num_actions):
        if not legal[a]:
            after.append(None)
            continue
        child = rules(1)
        child.set_state(board.get_state())
        won, done = child.step(np.array([a]))
        if done[0]:  # the move ends the game: its result for the mover
            after.append(1.0 if won[0] else 0.0)
        else:  # the network's value for the opponent, from the mover's side
            after.append(-float(policy.priors_and_values(*child.observe())[1][0]))
    searches: dict[int, dict[str, Any]] = {}
    for n in simulations:
        player = SearchPlayer(policy, rules, int(n), c_puct)
        rng = np.random.default_rng(seed)
        res = player.search.search(board.cur, board.mask, rng=rng)  # mover's bitboards [1]
        move = int(played_moves(res, player.move, masks, rng)[0])
        searches[int(n)] = {
            "visits": [int(v) if ok else None for v, ok in zip(res.visits[0], legal, strict=True)],
            "q": [
                float(q) if v > 0 else None for q, v in zip(res.q[0], res.visits[0], strict=True)
            ],
            "move": move,
        }
    played = str(line).split(":", 1)[1].strip() if ":" in str(line) else ""  # "1", or ""
    played_move = int(played) if played in DIGITS and int(played) < rules.num_actions else None
    return {
        "line": str(line),
        "played": played_move,
        "ply": int(board.moves[0]),
        "legal": legal.tolist(),
        "solver": _exact_values(rules, planes),
        "prior": [float(p) if ok else None for p, ok in zip(prior[0], legal, strict=True)],
        "value": float(value[0]),
        "value_after": after,
        "search": searches,
    }


def format_report(report: dict[str, Any]) -> str:
    """A text table of `explain_position`'s report, one row per legal move."""
    sims = list(report["search"])
    mover = "first" if report["ply"] % 2 == 0 else "second"
    head = (
        f"{report['line']}: ply {report['ply']}, the {mover} player to move; "
        f"the network's value {report['value']:+.3f}"
    )
    cols = ["move", "solver", "prior", "value after"] + [f"search{n} visits / Q" for n in sims]
    rows = [" | ".join(cols)]
    for a, ok in enumerate(report["legal"]):
        if not ok:
            continue
        exact = report["solver"][a] if report["solver"] else None
        mark = " (played)" if report["played"] == a else ""
        cells = [
            f"{a}{mark}",
            "-" if exact is None else f"{exact:+.0f}",
            f"{report['prior'][a]:.3f}",
            f"{report['value_after'][a]:+.3f}",
        ]
        for n in sims:
            s = report["search"][n]
            star = " *" if s["move"] == a else ""
            q = "-" if s["q"][a] is None else f"{s['q'][a]:+.3f}"
            cells.append(f"{s['visits'][a]} / {q}{star}")
        rows.append(" | ".join(cells))
    return "\n".join([head, *rows, "(* the move the search plays)"])
