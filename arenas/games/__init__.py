"""Two-player board games for the self-play arena: batched numpy environments, baselines,
and an adapter for PettingZoo's classic games.

``GameSpec`` names a game for configs (``data.loader`` of ``arena=selfplay``):

    spec = GameSpec("connect_four")          # or "tictactoe", or "pettingzoo:connect_four_v3"
    game = spec.make(1024)                   # 1024 games in numpy arrays
    planes, mask = game.observe()            # [1024, 6, 7, 2] int8, [1024, 7] bool
    won, done = game.step(actions)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .baselines import MCTSPlayer, MinimaxPlayer, Player, RandomPlayer
from .connect_four import ConnectFour
from .core import BoardGame, BoardGameVectorEnv, IllegalMoveError, random_legal
from .registry import make_baseline
from .tictactoe import TicTacToe

GAMES: dict[str, type[BoardGame]] = {"tictactoe": TicTacToe, "connect_four": ConnectFour}


def TicTacToeVectorEnv(num_envs: int = 1) -> BoardGameVectorEnv:  # noqa: N802 (env factory)
    """A gymnasium vector env of ``num_envs`` tic-tac-toe games."""
    return BoardGameVectorEnv(TicTacToe, num_envs)


def ConnectFourVectorEnv(num_envs: int = 1) -> BoardGameVectorEnv:  # noqa: N802 (env factory)
    """A gymnasium vector env of ``num_envs`` Connect Four games."""
    return BoardGameVectorEnv(ConnectFour, num_envs)


@dataclass
class GameSpec:
    """Which game an arena plays: a native name or ``pettingzoo:<classic env>``.

    Args:
        name: ``tictactoe``, ``connect_four``, or ``pettingzoo:<module>`` for any AEC
            classic game with PettingZoo's planes + action-mask observations
            (``pettingzoo:connect_four_v3``, ``pettingzoo:tictactoe_v3``; needs
            ``pip install 'paddlecraft[pettingzoo]'``).
    """

    name: str = "tictactoe"
    #: built PettingZoo games by size (they are costly to build; ``make`` resets them)
    _pettingzoo: dict[int, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: a one-game PettingZoo env kept apart, only read for the game's sizes and rules
    _probe: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.startswith("pettingzoo:") and self.name not in GAMES:
            raise ValueError(
                f"unknown game {self.name!r}: use one of {sorted(GAMES)} or pettingzoo:<env>, "
                "e.g. pettingzoo:connect_four_v3"
            )

    @property
    def is_pettingzoo(self) -> bool:
        return self.name.startswith("pettingzoo:")

    def make(self, num_envs: int) -> Any:
        """``num_envs`` fresh games with the batched interface of `BoardGame`.

        PettingZoo environments are costly to build, so they are kept per size (in
        ``_pettingzoo``) and reset; native games are new arrays each time.
        """
        if self.is_pettingzoo:
            from .pettingzoo_adapter import PettingZooGame

            if num_envs not in self._pettingzoo:
                self._pettingzoo[num_envs] = PettingZooGame(self.name.split(":", 1)[1], num_envs)
            game = self._pettingzoo[num_envs]
            game.reset()
            return game
        return GAMES[self.name](num_envs)

    def _info(self) -> Any:
        """An object with the game's sizes: the native class, or a one-game PettingZoo env."""
        if not self.is_pettingzoo:
            return GAMES[self.name]
        if self._probe is None:
            from .pettingzoo_adapter import PettingZooGame

            self._probe = PettingZooGame(self.name.split(":", 1)[1], 1)
        return self._probe

    @property
    def rules(self) -> type[BoardGame] | None:
        """Native rules (for minimax/MCTS anchors), or None for an unknown PettingZoo game."""
        if self.is_pettingzoo:
            return self._info().rules
        return GAMES[self.name]

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        return tuple(self._info().obs_shape())

    @property
    def num_actions(self) -> int:
        return int(self._info().num_actions)

    @property
    def max_moves(self) -> int:
        return int(self._info().max_moves)

    @property
    def short_name(self) -> str:
        """``tictactoe``, ``connect_four``, or the PettingZoo module name."""
        return self.name.split(":", 1)[-1]


__all__ = [
    "GAMES",
    "BoardGame",
    "BoardGameVectorEnv",
    "ConnectFour",
    "ConnectFourVectorEnv",
    "GameSpec",
    "IllegalMoveError",
    "MCTSPlayer",
    "MinimaxPlayer",
    "Player",
    "RandomPlayer",
    "TicTacToe",
    "TicTacToeVectorEnv",
    "make_baseline",
    "random_legal",
]
