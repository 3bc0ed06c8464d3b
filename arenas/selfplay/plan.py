"""What a self-play run is judged against: the evaluation games, the baseline players and
the headline metric, read from the settings and checked against the game before training."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from paddlecraft.errors import ConfigError

from ..games import ConnectFour, Player, TicTacToe, make_baseline
from .config import SelfPlayConfig

__all__ = ["EvalPlan", "evaluation_plan"]


@dataclass
class EvalPlan:
    """The evaluation of a self-play run, by baseline name."""

    games: dict[str, int]  #: games per baseline at each evaluation
    final_games: dict[str, int]  #: games per baseline at the final evaluation
    search_games: dict[str, int]  #: games per baseline played by the searching policy
    baselines: dict[str, Player]  #: every baseline player named anywhere (anchors included)
    headline: str  #: the metric the run reports and sweepers optimise


def evaluation_plan(cfg: SelfPlayConfig, spec: Any, train_anchors: Mapping[str, float]) -> EvalPlan:
    """The plan ``cfg.eval`` asks for on the game ``spec`` (a `GameSpec`), with the
    training anchors' baselines; one `ConfigError` naming the setting for what the game
    cannot give (a baseline or the solver without native rules)."""
    rules = spec.rules
    default = {"random": 100, **({"minimax": 100} if rules is TicTacToe else {})}
    games = {str(k): int(v) for k, v in (cfg.eval.games or default).items()}
    final = {str(k): int(v) for k, v in (cfg.eval.final_games or games).items()}
    search = {str(k): int(v) for k, v in cfg.eval.search_games.items()}
    baselines: dict[str, Player] = {}
    for name in sorted({*games, *final, *train_anchors} | set(search)):
        if rules is None and name != "random":
            raise ConfigError(
                f"baseline {name!r} needs the native rules of the game; {spec.name} "
                "only supports the random baseline"
            )
        baselines[name] = make_baseline(name, rules or TicTacToe)
    if cfg.eval.solver_positions:
        if rules is not ConnectFour:
            raise ConfigError(
                f"arena.eval.solver_positions needs game=connect_four (the solved game), "
                f"got {spec.name}; set arena.eval.solver_positions=0"
            )
        from ..games.solver import SolverPlayer

        SolverPlayer()  # the extra is missing: one error line now, not after training
    headline = cfg.eval.headline_metric
    if headline is None:
        if "minimax" in final:
            headline = "no_loss_rate_vs_minimax"
        elif "mcts100" in final:
            headline = "win_rate_vs_mcts100"
        else:
            headline = "win_rate_vs_random"
    return EvalPlan(games, final, search, baselines, headline)
