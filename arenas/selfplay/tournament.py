"""A round-robin tournament between trained policies (raw or with search) and the anchors,
with Bradley-Terry ratings fitted over all results.

    python -m arenas.selfplay.tournament --game connect_four \\
        --players runs/c4/seed0:search200 runs/c4/seed0 random tactical mcts10 mcts100 \\
        --games 100 --seed 0 --out runs/c4/seed0/tournament

A player is an anchor name (``random``, ``tactical``, ``minimax`` for tic-tac-toe,
``mcts<N>``: UCT with random rollouts), a self-play run folder or saved policy folder
(the network's greedy move), or ``<folder>:search<N>`` (PUCT search with N simulations
per move guided by that network; ``:search<N>reuse``: each move's search adds its N
simulations to the subtree the previous one left, `SearchPlayer`'s ``reuse``);
``label=<spec>`` names it. Every pair plays ``games``
games, seats alternating (half each), from the fixed stream ``(seed, i, j)``;
``--focus`` limits the pairs to those with a named player.

Ratings: maximum likelihood of the Bradley-Terry model ``P(i beats j) = 1 / (1 +
10^((r_j - r_i) / 400))`` (Elo scale) over every game, a draw counting half a win for
each, ``random`` fixed at 0, plus one virtual draw per pair played so that a player who
won every game gets a finite rating; 95% intervals from the inverse observed
information. Writes ``tournament.json``, ``tournament.md`` (the table and the score
matrix) and ``tournament.png`` (ratings with intervals) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from paddlecraft.agents.settings import ConfigError
from paddlecraft.encoders.tensorio import CheckpointError

from ..engine.plots import interval_chart, save, to_bgr
from ..games import GAMES, GameSpec, Player, make_baseline
from .analysis import outcomes
from .player import PolicyPlayer, SearchPlayer, load_policy
from .playing import play_games

log = logging.getLogger("paddlecraft")

ELO = 400.0 / np.log(10.0)  # natural log-odds -> Elo points


@dataclass
class Entrant:
    """A tournament player: its label, spec and the batched player."""

    label: str
    spec: str
    player: Player


def make_entrant(spec: str, game: str, index: int = 0) -> Entrant:
    """An `Entrant` from ``[label=]anchor | folder | folder:search<N>[reuse]``."""
    label, _, body = spec.partition("=") if "=" in spec else ("", "", spec)
    rules = GAMES[game]
    path, _, mode = body.partition(":search")
    try:
        if not Path(path).exists():
            if mode:
                raise FileNotFoundError(f"no folder {path!r}")
            return Entrant(label or body, body, make_baseline(body, rules))
        policy = load_policy(path, name=f"tournament_{index}")
    except (ValueError, FileNotFoundError) as e:  # the flag's fault: say which value
        raise type(e)(f"--players {spec!r}: {e}") from e
    if mode:
        n = mode.removesuffix("reuse")
        if not n.isdigit():
            raise ValueError(
                f"--players {spec!r}: expected <folder>:search<N> or :search<N>reuse, e.g. "
                ":search200"
            )
        player: Player = SearchPlayer(policy, rules, int(n), reuse=mode != n)
        default = f"{Path(path).name}:search{mode}"
    else:
        player, default = PolicyPlayer(policy), Path(path).name
    return Entrant(label or default, body, player)


def play_pair(a: Player, b: Player, game: str, games: int, rng: np.random.Generator) -> np.ndarray:
    """Outcomes for ``a`` (+1 / 0 / -1) of ``games`` games, ``a`` first in the even ones."""
    a_seat = np.arange(games) % 2
    seats = np.ones((games, 2), np.int64)
    seats[np.arange(games), a_seat] = 0
    controllers = [
        lambda o, m: (a.act(o, m, rng=rng), None),
        lambda o, m: (b.act(o, m, rng=rng), None),
    ]
    winner, _, _ = play_games(GameSpec(game), games, seats, controllers)
    return outcomes(winner, a_seat)


def fit_ratings(
    names: list[str], results: dict[tuple[int, int], np.ndarray], anchor: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Bradley-Terry maximum likelihood: ``(ratings, standard errors)`` in Elo points.

    ``results[(i, j)]`` holds outcomes for ``i`` against ``j``; draws count half a win
    each; one virtual draw per pair keeps unbeaten players finite; ``anchor`` is 0.
    """
    n = len(names)
    wins = np.zeros((n, n))  # wins[i, j]: i's (half-)wins against j
    for (i, j), o in results.items():
        w = float((o > 0).sum() + 0.5 * (o == 0).sum()) + 0.5
        losses = float((o < 0).sum() + 0.5 * (o == 0).sum()) + 0.5
        wins[i, j] += w
        wins[j, i] += losses
    free = [k for k in range(n) if k != anchor]

    def full(x: np.ndarray) -> np.ndarray:
        t = np.zeros(n)
        t[free] = x
        return t

    def nll(x: np.ndarray) -> tuple[float, np.ndarray]:
        t = full(x)
        d = t[:, None] - t[None, :]
        logp = -np.logaddexp(0.0, -d)  # log sigmoid(t_i - t_j)
        p = np.exp(logp)
        value = -(wins * logp).sum()
        grad = -((wins * (1 - p)).sum(1) - (wins.T * (1 - p.T)).sum(1))
        return value, grad[free]

    from scipy.optimize import minimize  # here: every command imports this module

    res = minimize(nll, np.zeros(len(free)), jac=True, method="L-BFGS-B")
    t = full(res.x)
    d = t[:, None] - t[None, :]
    p = 1.0 / (1.0 + np.exp(-d))
    games = wins + wins.T
    h = games * p * (1 - p)  # observed information of each pair
    info = np.diag(h.sum(1)) - h
    cov = np.linalg.pinv(info[np.ix_(free, free)])
    se = np.zeros(n)
    se[free] = np.sqrt(np.maximum(np.diag(cov), 0.0))
    return t * ELO, se * ELO


def run_tournament(
    specs: list[str], game: str, games: int, seed: int = 0, focus: list[str] | None = None
) -> dict[str, Any]:
    """Play the round robin and fit the ratings; returns the JSON-able report."""
    if game not in GAMES:
        raise ValueError(f"--game must be one of {sorted(GAMES)}, got {game!r}")
    if games < 2 or games % 2:
        raise ValueError(f"--games must be even and >= 2 (seats alternate), got {games}")
    entrants = [make_entrant(s, game, k) for k, s in enumerate(specs)]
    names = [e.label for e in entrants]
    if len(set(names)) != len(names):
        raise ValueError(f"--players: labels must be unique, got {names}; use label=<spec>")
    if "random" not in names:
        raise ValueError("--players must include 'random': its rating is the zero point")
    results: dict[tuple[int, int], np.ndarray] = {}
    for i in range(len(entrants)):
        for j in range(i + 1, len(entrants)):
            if focus and names[i] not in focus and names[j] not in focus:
                continue
            t = time.time()
            o = play_pair(entrants[i].player, entrants[j].player, game, games,
                          np.random.default_rng([seed, i, j]))  # fmt: skip
            results[(i, j)] = o
            log.info("%s vs %s: +%d =%d -%d (%.0f s)", names[i], names[j], (o > 0).sum(),
                     (o == 0).sum(), (o < 0).sum(), time.time() - t)  # fmt: skip
    ratings, se = fit_ratings(names, results, names.index("random"))
    table = []
    for k, name in enumerate(names):
        mine = [o if i == k else -o for (i, j), o in results.items() if k in (i, j)]
        o = np.concatenate(mine) if mine else np.zeros(0)
        table.append({
            "player": name, "spec": entrants[k].spec, "rating": round(float(ratings[k]), 1),
            "ci95": [round(float(ratings[k] - 1.96 * se[k]), 1),
                     round(float(ratings[k] + 1.96 * se[k]), 1)],
            "games": int(len(o)),
            "score": round(float((o > 0).mean() + 0.5 * (o == 0).mean()), 4) if len(o) else None,
        })  # fmt: skip
    pairs = [
        {"a": names[i], "b": names[j], "wins": int((o > 0).sum()), "draws": int((o == 0).sum()),
         "losses": int((o < 0).sum()), "score": round(float((o > 0).mean() + 0.5 * (o == 0).mean()), 4)}
        for (i, j), o in results.items()
    ]  # fmt: skip
    return {
        "game": game,
        "games_per_pair": games,
        "seed": seed,
        "table": sorted(table, key=lambda r: -r["rating"]),
        "pairs": pairs,
        "rating_model": "Bradley-Terry ML, Elo scale, random = 0, one virtual draw per pair",
    }


def format_report(report: dict[str, Any]) -> str:
    """The table and the pair results as Markdown."""
    lines = [
        f"# Tournament: {report['game']}, {report['games_per_pair']} games per pair, "
        f"seed {report['seed']}",
        "",
        "| player | rating (Elo, random = 0) | 95% interval | games | score |",
        "|---|---|---|---|---|",
    ]
    for r in report["table"]:
        lo, hi = r["ci95"]
        lines.append(f"| {r['player']} | {r['rating']:.0f} | {lo:.0f} .. {hi:.0f} | "
                     f"{r['games']} | {r['score']} |")  # fmt: skip
    lines += ["", "| A | B | A wins | draws | A losses | A's score |", "|---|---|---|---|---|---|"]
    for p in report["pairs"]:
        lines.append(f"| {p['a']} | {p['b']} | {p['wins']} | {p['draws']} | {p['losses']} | "
                     f"{p['score']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def ratings_chart(table: list[dict[str, Any]]) -> Figure:
    """One row per player: its rating (Elo, random = 0) as a dot with the 95% interval."""
    rows = [
        {"label": r["player"], "value": r["rating"], "lo": r["ci95"][0], "hi": r["ci95"][1]}
        for r in table
    ]
    return interval_chart(
        rows, title="tournament ratings", xlabel="rating (Elo, random = 0), 95% interval",
        reference=0.0,
    )  # fmt: skip


def render_ratings(table: list[dict[str, Any]]) -> np.ndarray:
    """`ratings_chart` as a BGR picture."""
    return to_bgr(ratings_chart(table))


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is one ``error:`` line (exit 2), not usage plus a message."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        sys.stderr.write(f"error: {' '.join(message.split())}; see paddlecraft tournament --help\n")
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: play, fit, print the table, write the files."""
    ap = _OneLineParser(prog="paddlecraft tournament", description=__doc__.split("\n\n")[0])
    ap.add_argument("--game", default="connect_four", choices=sorted(GAMES))
    ap.add_argument(
        "--players", nargs="+", required=True, help="anchors, folders, folder:searchN[reuse]"
    )
    ap.add_argument("--games", type=int, default=100, help="games per pair (even)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--focus", nargs="*", default=None, help="only pairs with these labels")
    ap.add_argument("--out", default=None, help="folder for the report (default: none)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        report = run_tournament(args.players, args.game, args.games, args.seed, args.focus)
    except (ValueError, FileNotFoundError, CheckpointError) as e:
        # every check of the flags and player folders runs before the first game
        if not str(e).startswith("--") and not isinstance(e, (CheckpointError, ConfigError)):
            raise
        ap.error(str(e))
    text = format_report(report)
    sys.stdout.write(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tournament.json").write_text(json.dumps(report, indent=2))
        (out / "tournament.md").write_text(text)
        save(ratings_chart(report["table"]), out / "tournament.png")
    return report


if __name__ == "__main__":
    main()
