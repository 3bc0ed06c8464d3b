"""Fixed players for the league's anchors: random, perfect minimax (tic-tac-toe), MCTS,
the Connect Four solver (`.solver`); `make_baseline` picks one by name.

Every player takes batches the way `paddlecraft.agents.Policy.act` does:

    actions = player.act(observations, action_masks, rng=rng)   # int64 [n], always legal

``observations`` are the PettingZoo-style planes ``[n, rows, cols, 2]`` from the mover's
side, so the same players face the native batched games and PettingZoo's environments.
``rng`` is a ``np.random.Generator`` or the ``np.random`` module (the global stream,
which checkpoints capture); it breaks ties and drives rollouts.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from .connect_four import ConnectFour
from .core import BoardGame, random_legal
from .evaluators import RandomRolloutEvaluator
from .search import MCTS
from .tictactoe import TicTacToe


class Player:
    """A fixed (non-learning) player: ``act(observations, action_masks, rng)``."""

    name: str = "player"

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _masks(action_masks: Any) -> np.ndarray:
        m = np.asarray(action_masks).astype(bool)
        if m.ndim == 1:
            m = m[None]
        if not m.any(axis=1).all():
            raise ValueError("a game has no legal action (is it finished?)")
        return m


class RandomPlayer(Player):
    """Uniformly random legal moves."""

    name = "random"

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        return random_legal(self._masks(action_masks), rng if rng is not None else np.random)


class TacticalPlayer(Player):
    """A classical sparring partner with one move of lookahead, for any native game.

    In order: win if it can; else block a square where the opponent would win next;
    else avoid moves that let the opponent win right after (in Connect Four: playing
    under the opponent's winning cell); among what is left, a random move, weighted
    towards the centre by ``centre`` (score = centre / (1 + distance) + uniform noise;
    0: uniform). Cheap (a few array operations per action). With the default it stays
    varied, which a training anchor needs (a near-deterministic one is soon exploited
    and teaches little).
    """

    name = "tactical"

    def __init__(self, game: type[BoardGame] = ConnectFour, centre: float = 1.0) -> None:
        self.game, self.centre_weight = game, float(centre)
        rows, cols = game.rows, game.cols
        r, c = np.mgrid[0:rows, 0:cols]
        dist = np.abs(r - (rows - 1) / 2) + np.abs(c - (cols - 1) / 2)
        if game.num_actions == cols:  # column games: weight by column
            dist = np.abs(np.arange(cols) - (cols - 1) / 2)
        self.centre = 1.0 / (1.0 + dist.reshape(-1))

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        rng = rng if rng is not None else np.random
        legal = self._masks(action_masks)
        g = self.game
        cur, mask = g.from_planes(np.asarray(observations).reshape(-1, *g.obs_shape()))
        opp = cur ^ mask
        win = g.winning_moves(cur, mask) & legal
        block = g.winning_moves(opp, mask) & legal  # the opponent's wins, taken first
        unsafe = np.zeros_like(legal)
        for a in range(g.num_actions):
            ok = legal[:, a]
            if not ok.any():
                continue
            acts = np.full(int(ok.sum()), a)
            new = g.new_stone(mask[ok], acts)
            after = mask[ok] | new  # does this move open a winning reply for the opponent?
            replies = g.legal(after)
            threat = np.zeros(len(acts), bool)
            for b in range(g.num_actions):
                rb = replies[:, b]
                if rb.any():
                    nb = g.new_stone(after[rb], np.full(int(rb.sum()), b))
                    threat[rb] |= g.wins(opp[ok][rb] | nb)
            unsafe[ok, a] = threat
        score = self.centre_weight * self.centre[None, :] + rng.random(legal.shape)
        safe = legal & ~unsafe
        score = np.where(safe.any(1, keepdims=True) & ~safe, score - 10, score)
        score = np.where(block.any(1, keepdims=True) & ~block, score - 100, score)
        score = np.where(win.any(1, keepdims=True) & ~win, score - 1000, score)
        return np.where(legal, score, -np.inf).argmax(axis=1).astype(np.int64)


# ---------------------------------------------------------------------- minimax


@lru_cache(maxsize=1)
def tictactoe_table() -> np.ndarray:
    """Solved tic-tac-toe: ``q[cur * 512 + opp, a]`` = the mover's outcome after action ``a``.

    Outcomes under perfect play by both sides, from the mover's side: 1 win, 0 draw,
    -1 loss; -2 marks an illegal action (square taken) or an unreachable position.
    Built once by memoized negamax over the 5,478 reachable positions.
    """
    q = np.full((512 * 512, 9), -2, np.int8)
    value: dict[int, int] = {}
    lines = [int(x) for x in _ttt_lines()]

    def won(stones: int) -> bool:
        return any(stones & line == line for line in lines)

    def solve(cur: int, opp: int) -> int:
        key = cur * 512 + opp
        if key in value:
            return value[key]
        best = -2
        for a in range(9):
            bit = 1 << a
            if (cur | opp) & bit:
                continue
            mover = cur | bit
            if won(mover):
                v = 1
            elif (mover | opp) == 0x1FF:
                v = 0
            else:
                v = -solve(opp, mover)
            q[key, a] = v
            best = max(best, v)
        value[key] = best
        return best

    solve(0, 0)
    return q


def _ttt_lines() -> np.ndarray:
    from .tictactoe import LINES

    return LINES


class MinimaxPlayer(Player):
    """Perfect tic-tac-toe: every move keeps the best outcome; ties broken at random.

    Random tie-breaking makes it a harder test than a fixed line: across games it plays
    every optimal continuation, so a policy that draws or wins against it has no hole
    on any line a perfect opponent can reach.
    """

    name = "minimax"

    def __init__(self) -> None:
        self.q = tictactoe_table()

    def values(self, observations: Any) -> np.ndarray:
        """Action values ``int8 [n, 9]`` (1 win, 0 draw, -1 loss, -2 illegal) for the mover."""
        cur, mask = TicTacToe.from_planes(np.asarray(observations).reshape(-1, 3, 3, 2))
        opp = cur ^ mask
        return self.q[(cur * np.uint64(512) + opp).astype(np.int64)]

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        legal = self._masks(action_masks)
        q = np.where(legal, self.values(observations), -3)
        best = q == q.max(axis=1, keepdims=True)
        return random_legal(best, rng if rng is not None else np.random)


# ---------------------------------------------------------------------- MCTS


class MCTSPlayer(Player):
    """UCT Monte-Carlo tree search with random rollouts, run for all games at once.

    A thin player over the one search tree (`MCTS`) with the
    `RandomRolloutEvaluator` and the
    `uct` rule, as OpenSpiel's ``MCTSBot`` with a
    ``RandomRolloutEvaluator``. Each game gets its own tree, but the trees grow in
    lockstep, so 100 games cost little more than one. ``simulations`` per move (10, 100,
    1000 make the league's difficulty ladder); UCB1 with constant ``c`` on win rates in
    [0, 1] (draw 0.5); every child is expanded once (in random order) before UCB
    selection; the move is the most visited root child (ties at random).

    Args:
        game: the rules (a `BoardGame` class, e.g. ``ConnectFour``).
        simulations: simulations per move.
        c: exploration constant.
    """

    def __init__(
        self, game: type[BoardGame] = ConnectFour, simulations: int = 100, c: float = math.sqrt(2)
    ) -> None:
        if simulations < 1:
            raise ValueError(f"MCTSPlayer: simulations must be >= 1, got {simulations}")
        self.game, self.simulations, self.c = game, int(simulations), float(c)
        self.name = f"mcts{self.simulations}"
        self.tree = MCTS(
            game, RandomRolloutEvaluator(), selection="uct", simulations=self.simulations, c=self.c
        )

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        legal = self._masks(action_masks)
        obs = np.asarray(observations).reshape(-1, *self.game.obs_shape())
        cur, mask = self.game.from_planes(obs)
        return self.search(cur, mask, rng if rng is not None else np.random, legal)

    def search(
        self, cur0: np.ndarray, mask0: np.ndarray, rng: Any, legal0: np.ndarray | None = None
    ) -> np.ndarray:
        """Best action ``int64 [B]`` for each position ``(cur0, mask0)`` after the simulations."""
        res = self.tree.search(cur0, mask0, rng, legal=legal0)
        visits = np.where(res.legal, res.visits, -1.0)  # [B, A]
        best = visits == visits.max(axis=1, keepdims=True)
        return random_legal(best & res.legal, rng)
