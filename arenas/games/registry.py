"""Baselines by name: the one place that knows every fixed player, the solver included.

Apart from `.baselines` so that `.solver` (which builds on the baselines' player
base) and the baselines never import each other.
"""

from __future__ import annotations

from .baselines import MCTSPlayer, MinimaxPlayer, Player, RandomPlayer, TacticalPlayer
from .connect_four import ConnectFour
from .core import BoardGame
from .tictactoe import TicTacToe

__all__ = ["make_baseline"]


def make_baseline(spec: str, game: type[BoardGame]) -> Player:
    """A baseline by name: ``random``, ``tactical``, ``tactical_uniform`` (no centre
    preference), ``minimax`` (tic-tac-toe), ``mcts<N>``, or the Connect Four solver
    ``solver`` (perfect) / ``solver<d>`` (searches ``d`` plies) / ``solver_result`` (any
    move that keeps the theoretical result, blind to how soon; extra ``solver``)."""
    if spec == "random":
        return RandomPlayer()
    if spec == "minimax":
        if game is not TicTacToe:
            raise ValueError(
                f"baseline 'minimax' is the solved tic-tac-toe player, not for {game.name}"
            )
        return MinimaxPlayer()
    if spec == "tactical":
        return TacticalPlayer(game)
    if spec == "tactical_uniform":
        player = TacticalPlayer(game, centre=0.0)
        player.name = spec
        return player
    if spec.startswith("mcts") and spec[4:].isdigit():
        return MCTSPlayer(game, int(spec[4:]))
    if spec in ("solver", "solver_result") or (spec.startswith("solver") and spec[6:].isdigit()):
        if game is not ConnectFour:
            raise ValueError(f"baseline {spec!r} is the Connect Four solver, not for {game.name}")
        from .solver import SolverPlayer  # the optional extra 'solver'

        if spec == "solver_result":
            return SolverPlayer(result_only=True)
        return SolverPlayer(int(spec[6:]) if spec[6:] else -1)
    raise ValueError(
        f"unknown baseline {spec!r}: use random, tactical, tactical_uniform, minimax "
        "(tic-tac-toe), mcts<N>, solver, solver<depth> or solver_result (Connect Four)"
    )
