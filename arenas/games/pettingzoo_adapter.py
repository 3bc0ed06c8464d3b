"""Run any PettingZoo AEC classic game in the self-play arena (``pip install 'paddlecraft[pettingzoo]'``).

`PettingZooGame` holds ``num_envs`` AEC environments and gives them the batched
interface of `BoardGame` (``reset``, ``observe``, ``step``,
``done``, ``winner``, ``to_move``), so ``python run.py arena=selfplay
data.loader.name=pettingzoo:connect_four_v3`` trains on PettingZoo's own
implementation. Games whose observations are ``{"observation": [rows, cols, planes],
"action_mask": [n]}`` for two players work; it steps the environments one by one
(PettingZoo's speed, one game at a time) where the native games step thousands at once.
For ``connect_four_v3`` and ``tictactoe_v3`` the native rules are known
(`PettingZooGame.rules`), so the minimax and MCTS anchors play there too.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from .connect_four import ConnectFour
from .core import IllegalMoveError, game_indices
from .tictactoe import TicTacToe

#: PettingZoo classic modules whose rules and encodings match a native game
NATIVE = {"connect_four_v3": ConnectFour, "tictactoe_v3": TicTacToe}


def load_env_module(name: str) -> Any:
    """``pettingzoo.classic.<name>`` (or a full module path), with a clear error if missing."""
    path = name if "." in name else f"pettingzoo.classic.{name}"
    try:
        return importlib.import_module(path)
    except ImportError as e:
        raise ImportError(
            f"PettingZoo game {name!r} needs pettingzoo (and pygame for its classic games): "
            f"pip install 'paddlecraft[pettingzoo]' ({e})"
        ) from e


class PettingZooGame:
    """``num_envs`` PettingZoo AEC games behind the batched `BoardGame` interface.

    Args:
        env: a PettingZoo classic module name (``connect_four_v3``), a module path, or a
            zero-argument callable returning an AEC env.
        num_envs: how many environments.
    """

    def __init__(self, env: Any = "connect_four_v3", num_envs: int = 1) -> None:
        factory = env if callable(env) else load_env_module(env).env
        self.envs = [factory() for _ in range(int(num_envs))]
        self.num_envs = len(self.envs)
        probe = self.envs[0]
        probe.reset(seed=0)
        self.agents = list(probe.possible_agents)
        if len(self.agents) != 2:
            raise ValueError(f"PettingZooGame supports two-player games, got {self.agents}")
        space = probe.observation_space(self.agents[0])
        shape = tuple(space["observation"].shape)
        if len(shape) != 3:
            raise ValueError(
                f"PettingZooGame needs [rows, cols, planes] observations, got shape {shape}"
            )
        self.name = probe.metadata.get("name", type(probe).__name__)
        self.rows, self.cols, self.planes = shape
        self.num_actions = int(probe.action_space(self.agents[0]).n)
        self.max_moves = self.rows * self.cols
        self.rules = NATIVE.get(self.name)
        self.moves = np.zeros(self.num_envs, np.int16)
        self.done = np.zeros(self.num_envs, bool)
        self.winner = np.full(self.num_envs, -1, np.int8)
        self.reset()

    def obs_shape(self) -> tuple[int, int, int]:
        return (self.rows, self.cols, self.planes)

    def _idx(self, idx: Any) -> np.ndarray:
        return game_indices(idx, self.num_envs)

    def reset(self, idx: Any = None) -> None:
        for i in self._idx(idx):
            self.envs[i].reset()
            self.moves[i] = 0
            self.done[i] = False
            self.winner[i] = -1

    @property
    def to_move(self) -> np.ndarray:
        return np.array([self.agents.index(e.agent_selection) for e in self.envs], np.int8)

    def observe(self, idx: Any = None) -> tuple[np.ndarray, np.ndarray]:
        obs, masks = [], []
        for i in self._idx(idx):
            e = self.envs[i]
            o = e.observe(e.agent_selection)
            obs.append(np.asarray(o["observation"], np.int8))
            m = np.asarray(o["action_mask"], bool)
            masks.append(m & ~self.done[i])
        if not obs:
            return np.zeros((0, *self.obs_shape()), np.int8), np.zeros((0, self.num_actions), bool)
        return np.stack(obs), np.stack(masks)

    def legal_mask(self, idx: Any = None) -> np.ndarray:
        return self.observe(idx)[1]

    def step(self, actions: Any, idx: Any = None) -> tuple[np.ndarray, np.ndarray]:
        i_all = self._idx(idx)
        a_all = np.asarray(actions, np.int64).reshape(-1)
        won = np.zeros(len(i_all), bool)
        done = np.zeros(len(i_all), bool)
        for k, (i, a) in enumerate(zip(i_all, a_all)):
            e = self.envs[i]
            if self.done[i]:
                raise IllegalMoveError(f"{self.name}: game {i} is finished; reset it first")
            mover = e.agent_selection
            if not e.observe(mover)["action_mask"][a]:
                raise IllegalMoveError(f"{self.name}: illegal action {a} in game {i}")
            e.step(int(a))
            self.moves[i] += 1
            if any(e.terminations.values()) or any(e.truncations.values()):
                done[k] = True
                r = e.rewards[mover]
                if r > 0:
                    won[k] = True
                    self.winner[i] = self.agents.index(mover)
                elif r < 0:
                    self.winner[i] = 1 - self.agents.index(mover)
        self.done[i_all] = done
        return won, done
