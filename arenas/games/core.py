"""Batched two-player board games on bitboards, and their gymnasium vector-env face.

A `BoardGame` holds ``num_envs`` games as numpy arrays and steps them all with a
handful of array operations, so one call advances thousands of games. Positions are two
``uint64`` bitboards per game, ``cur`` (stones of the player to move) and ``mask`` (all
stones); the opponent's stones are ``cur ^ mask``. After a move the roles swap, so every
function sees the position from the mover's side, like the observations.

Conventions shared with PettingZoo's classic games, so agents, baselines and the
`pettingzoo_adapter` interoperate:

- observation planes ``[..., rows, cols, 2]`` int8 from the mover's perspective:
  ``[..., 0]`` the mover's stones, ``[..., 1]`` the opponent's; row 0 is the top row;
- an action mask ``[..., num_actions]`` of legal moves;
- tic-tac-toe action ``i`` is the square at row ``i // 3``, column ``i % 3`` of the
  planes; Connect Four's action is the column (the stone drops to the lowest free row).

Seats: the first player is seat 0. ``winner`` is -1 while a game runs or after a draw,
else the winning seat. Rules and kernels are class methods on raw arrays (``play``,
``legal``, ``wins``, ``planes``...) so search players (minimax, MCTS) reuse them on their
own state arrays without an environment object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

U64 = np.uint64
#: the characters a line of moves is written in (one per move: a column or a cell)
DIGITS = tuple("0123456789")


def game_indices(idx: Any, num_envs: int) -> np.ndarray:
    """Game indices from None (all games), an index array, or a bool mask over the games."""
    if idx is None:
        return np.arange(num_envs)
    idx = np.asarray(idx)
    return np.flatnonzero(idx) if idx.dtype == bool else idx.astype(np.int64)


class IllegalMoveError(ValueError):
    """An action that the action mask forbids was played (or a finished game was stepped)."""


class BoardGame:
    """``num_envs`` games of one two-player board game, stepped together.

    Args:
        num_envs: how many games the arrays hold.
        illegal: what an illegal action does: ``"raise"`` (`IllegalMoveError`,
            the default: a policy with masks never plays one) or ``"lose"`` (the mover
            loses at once, PettingZoo's ``TerminateIllegalWrapper`` rule).
    """

    name: str = "board_game"
    rows: int = 0
    cols: int = 0
    num_actions: int = 0
    max_moves: int = 0
    #: bit index of each cell [rows, cols] (row 0 = top)
    POS: np.ndarray = np.zeros((0, 0), np.int64)

    def __init__(self, num_envs: int = 1, illegal: str = "raise") -> None:
        if illegal not in ("raise", "lose"):
            raise ValueError(f"illegal must be 'raise' or 'lose', got {illegal!r}")
        self.num_envs = int(num_envs)
        self.illegal = illegal
        n = self.num_envs
        self.cur = np.zeros(n, U64)
        self.mask = np.zeros(n, U64)
        self.moves = np.zeros(n, np.int16)
        self.done = np.zeros(n, bool)
        self.winner = np.full(n, -1, np.int8)

    @classmethod
    def after(cls, line: str) -> BoardGame:
        """One game after the moves ``line`` (a digit per move from the empty board;
        anything after ``:`` is ignored). Raises ``ValueError`` naming the line and the
        move where it cannot go on, or saying that the game is over there."""
        moves = str(line).split(":", 1)[0].strip()
        board = cls(1)
        for i, c in enumerate(moves):
            where = f"line {line!r}, move {i + 1} ({c!r})"
            if not (c in DIGITS and int(c) < cls.num_actions):
                raise ValueError(
                    f"{where}: expected a digit 0-{cls.num_actions - 1} ({cls.name}'s moves)"
                )
            if board.done[0]:
                raise ValueError(f"{where}: the game ended at move {i}; give a shorter line")
            try:
                board.step(np.array([int(c)]))
            except IllegalMoveError:
                raise ValueError(
                    f"{where}: not a legal move there (column full or cell taken)"
                ) from None
        if board.done[0]:
            raise ValueError(f"line {line!r}: the game is over there; give a shorter line")
        return board

    # ------------------------------------------------------------------ shapes
    @classmethod
    def obs_shape(cls) -> tuple[int, int, int]:
        """Observation planes per game: ``(rows, cols, 2)``."""
        return (cls.rows, cls.cols, 2)

    # ------------------------------------------------------------------ kernels
    @classmethod
    def legal(cls, mask: np.ndarray) -> np.ndarray:
        """Legal moves ``bool [n, num_actions]`` for positions with these stones."""
        raise NotImplementedError

    @classmethod
    def new_stone(cls, mask: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The bit each action places (assumes it is legal)."""
        raise NotImplementedError

    @classmethod
    def wins(cls, stones: np.ndarray) -> np.ndarray:
        """Whether each bitboard contains a winning line."""
        raise NotImplementedError

    @classmethod
    def play(
        cls, cur: np.ndarray, mask: np.ndarray, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Play legal ``actions``; return ``(cur', mask', won, full)`` from the next mover's side.

        ``won``: the player who just moved completed a line. ``full``: the board is full.
        """
        new = cls.new_stone(mask, actions)
        mover = cur | new
        mask2 = mask | new
        return mask2 ^ mover, mask2, cls.wins(mover), cls.full(mask2)

    @classmethod
    def winning_moves(cls, stones: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``bool [n, num_actions]``: the legal moves that complete a line for the player
        owning ``stones`` (a subset of ``mask``), were it that player's turn."""
        stones, mask = np.asarray(stones, U64), np.asarray(mask, U64)
        n, A = len(mask), cls.num_actions
        acts = np.tile(np.arange(A), n)
        new = cls.new_stone(np.repeat(mask, A), acts)
        won = cls.wins(np.repeat(stones, A) | new).reshape(n, A)
        return won & cls.legal(mask)

    @classmethod
    def winning_move_count(cls, stones: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``int64 [n]``: how many legal moves complete a line for the player owning
        ``stones`` (as `winning_moves`), counted up to 2 (two or more: 2)."""
        return np.minimum(cls.winning_moves(stones, mask).sum(axis=1), 2)

    @classmethod
    def two_ply_threats(cls, cur: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What the rules say about the next two plies of positions ``(cur, mask) [n]``
        (none finished): ``(mover_wins, opponent_forks)``, ``bool [n]`` each: the mover
        has a winning move; the opponent has two or more (one move blocks one of them,
        never both, so where the mover cannot win at once it loses in two plies)."""
        n = len(cur)
        count = cls.winning_move_count(np.concatenate([cur, cur ^ mask]),
                                       np.concatenate([mask, mask]))  # fmt: skip
        return count[:n] > 0, count[n:] >= 2

    @classmethod
    def full(cls, mask: np.ndarray) -> np.ndarray:
        """Whether the board is full."""
        return mask == cls.FULL  # type: ignore[attr-defined]

    @classmethod
    def planes(cls, cur: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Observation planes ``int8 [n, rows, cols, 2]`` (mover, opponent)."""
        n = len(cur)
        both = np.stack([cur, cur ^ mask], axis=1).astype("<u8")  # [n, 2]
        bits = np.unpackbits(both.view(np.uint8).reshape(n, 2, 8), axis=2, bitorder="little")
        cells = bits[:, :, cls.POS.reshape(-1)]  # [n, 2, rows*cols]
        return cells.reshape(n, 2, cls.rows, cls.cols).transpose(0, 2, 3, 1).astype(np.int8)

    @classmethod
    def from_planes(cls, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(cur, mask)`` bitboards from observation planes ``[n, rows, cols, 2]``."""
        p = np.asarray(planes).reshape(-1, cls.rows * cls.cols, 2) != 0
        weights = U64(1) << cls.POS.reshape(-1).astype(U64)
        cur = (p[:, :, 0] * weights).sum(axis=1, dtype=U64)
        opp = (p[:, :, 1] * weights).sum(axis=1, dtype=U64)
        return cur, cur | opp

    @classmethod
    def popcount(cls, x: np.ndarray) -> np.ndarray:
        """Stones on each bitboard."""
        b = np.unpackbits(np.asarray(x, "<u8").view(np.uint8).reshape(-1, 8), axis=1)
        return b.sum(axis=1).astype(np.int16)

    # ------------------------------------------------------------------ state
    def _idx(self, idx: Any) -> np.ndarray:
        return game_indices(idx, self.num_envs)

    def reset(self, idx: Any = None) -> None:
        """Start new games (all, or those at ``idx``: indices or a bool mask)."""
        i = self._idx(idx)
        self.cur[i] = 0
        self.mask[i] = 0
        self.moves[i] = 0
        self.done[i] = False
        self.winner[i] = -1

    @property
    def to_move(self) -> np.ndarray:
        """Seat to move in each game (0: the first player)."""
        return (self.moves % 2).astype(np.int8)

    def observe(self, idx: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """``(planes int8 [n, rows, cols, 2], action_mask bool [n, num_actions])`` for the movers.

        Finished games report an all-False mask (PettingZoo does the same for agents not
        to move).
        """
        i = self._idx(idx)
        legal = self.legal(self.mask[i])
        legal[self.done[i]] = False
        return self.planes(self.cur[i], self.mask[i]), legal

    def legal_mask(self, idx: Any = None) -> np.ndarray:
        """Action mask only (cheaper than `observe`)."""
        i = self._idx(idx)
        legal = self.legal(self.mask[i])
        legal[self.done[i]] = False
        return legal

    def step(self, actions: Any, idx: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Play one move in each game at ``idx`` (all by default).

        Returns ``(won, done)`` for those games: ``won`` is True where the player who
        just moved won. Stepping a finished game raises `IllegalMoveError`.
        """
        i = self._idx(idx)
        a = np.asarray(actions, np.int64).reshape(-1)
        if len(a) != len(i):
            raise ValueError(f"{self.name}: {len(a)} actions for {len(i)} games")
        if self.done[i].any():
            bad = i[self.done[i]][:5].tolist()
            raise IllegalMoveError(
                f"{self.name}: games {bad} are finished; reset them before stepping"
            )
        in_range = (a >= 0) & (a < self.num_actions)
        ok = in_range.copy()
        ok[in_range] = self.legal(self.mask[i[in_range]])[np.arange(in_range.sum()), a[in_range]]
        if not ok.all():
            if self.illegal == "raise":
                bad = [(int(g), int(x)) for g, x in zip(i[~ok][:5], a[~ok][:5])]
                raise IllegalMoveError(
                    f"{self.name}: illegal move(s) (game, action) {bad}; pick actions where "
                    "the action mask is True"
                )
        won = np.zeros(len(i), bool)
        done = np.zeros(len(i), bool)
        g = i[ok]
        cur, mask, w, full = self.play(self.cur[g], self.mask[g], a[ok])
        mover_seat = (self.moves[g] % 2).astype(np.int8)
        self.cur[g], self.mask[g] = cur, mask
        self.moves[g] += 1
        won[ok], done[ok] = w, w | full
        self.winner[g[w]] = mover_seat[w]
        if not ok.all():  # illegal="lose": the mover loses at once
            bad = i[~ok]
            self.winner[bad] = 1 - (self.moves[bad] % 2)
            done[~ok] = True
        self.done[i] = done
        return won, done

    def get_state(self) -> dict[str, np.ndarray]:
        """A copy of every array (for search and tests)."""
        return {k: getattr(self, k).copy() for k in ("cur", "mask", "moves", "done", "winner")}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore `get_state`."""
        for k, v in state.items():
            setattr(self, k, np.array(v, copy=True))
        self.num_envs = len(self.cur)

    def render(self, i: int = 0) -> str:
        """A text picture of game ``i`` (``X``: first player, ``O``: second, row 0 on top)."""
        planes = self.planes(self.cur[i : i + 1], self.mask[i : i + 1])[0]
        first = planes[..., 0] if self.moves[i] % 2 == 0 else planes[..., 1]
        second = planes[..., 1] if self.moves[i] % 2 == 0 else planes[..., 0]
        rows = []
        for r in range(self.rows):
            rows.append(
                " ".join(
                    "X" if first[r, c] else "O" if second[r, c] else "." for c in range(self.cols)
                )
            )
        return "\n".join(rows)


# ---------------------------------------------------------------------- vector env


class BoardGameVectorEnv(VectorEnv):
    """A gymnasium ``VectorEnv`` over a `BoardGame` (same-step autoreset).

    Observations are PettingZoo's dicts batched: ``{"observation": int8 [n, rows, cols, 2],
    "action_mask": int8 [n, num_actions]}`` for the player to move in each game. ``step``
    returns the reward of the player who just moved (+1 when the move won; an illegal
    move gives -1 and ends the game, PettingZoo's rule; a loss shows as the opponent's
    +1 on the next step's ``info["winner"]``), ``terminated`` when the game ended and
    ``truncated`` never. A finished game is reset in the same step: ``info["final_obs"]``
    holds its last observation and ``info["winner"]`` the winning seat (-1 for a draw or
    a running game); ``info["to_move"]`` is the seat to move in the returned observation.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, game: type[BoardGame] | BoardGame, num_envs: int = 1) -> None:
        self.game = game(num_envs, illegal="lose") if isinstance(game, type) else game
        g = self.game
        self.num_envs = g.num_envs
        self.single_observation_space = gym.spaces.Dict(
            {
                "observation": gym.spaces.Box(0, 1, g.obs_shape(), np.int8),
                "action_mask": gym.spaces.Box(0, 1, (g.num_actions,), np.int8),
            }
        )
        self.single_action_space = gym.spaces.Discrete(g.num_actions)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = gym.spaces.MultiDiscrete(np.full(self.num_envs, g.num_actions))
        self._np_random: np.random.Generator | None = None

    def _obs(self) -> dict[str, np.ndarray]:
        planes, legal = self.game.observe()
        return {"observation": planes, "action_mask": legal.astype(np.int8)}

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is not None:
            self._np_random = np.random.default_rng(seed)
            self.action_space.seed(seed)
        self.game.reset()
        return self._obs(), {"to_move": self.game.to_move.copy()}

    def step(self, actions: Any) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray, dict]:
        g = self.game
        won, done = g.step(actions)
        reward = won.astype(np.float32)
        illegal = done & ~won & (g.winner >= 0)  # ended with a winner that did not just move
        reward[illegal] = -1.0
        info: dict[str, Any] = {"winner": g.winner.copy()}
        if done.any():
            final = g.observe(done)[0]
            info["final_obs"] = np.zeros((g.num_envs, *g.obs_shape()), np.int8)
            info["final_obs"][done] = final
            info["_final_obs"] = done.copy()
            g.reset(done)
        info["to_move"] = g.to_move.copy()
        truncated = np.zeros(g.num_envs, bool)
        return self._obs(), reward, done.copy(), truncated, info

    def random_actions(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """A uniformly random legal action per game."""
        rng = rng or self._np_random or np.random.default_rng()
        return random_legal(self.game.legal_mask(), rng)


def random_legal(legal: np.ndarray, rng: Any) -> np.ndarray:
    """One uniformly random legal action per row of a bool mask ``[n, A]`` (int64 [n]).

    ``rng`` is a ``np.random.Generator`` or the ``np.random`` module (global stream).
    Rows with no legal action get -1.
    """
    u = rng.random(legal.shape) + legal  # legal entries in [1, 2), illegal in [0, 1)
    out = u.argmax(axis=1).astype(np.int64)
    out[~legal.any(axis=1)] = -1
    return out
