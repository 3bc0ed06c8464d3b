"""Fixed players for the league's anchors: random, perfect minimax (tic-tac-toe), MCTS,
the Connect Four solver (:mod:`.solver`).

Every player takes batches the way :meth:`paddlecraft.agents.Policy.act` does::

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
        win = np.zeros_like(legal)
        block = np.zeros_like(legal)
        unsafe = np.zeros_like(legal)
        for a in range(g.num_actions):
            ok = legal[:, a]
            if not ok.any():
                continue
            acts = np.full(int(ok.sum()), a)
            new = g.new_stone(mask[ok], acts)
            win[ok, a] = g.wins(cur[ok] | new)
            block[ok, a] = g.wins(opp[ok] | new)
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
    Built once by memoized negamax over the 5,478 reachable positions (~0.1 s).
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

    Each game gets its own tree, but the trees grow in lockstep: one simulation step
    selects, expands, rolls out and backs up in every tree with array operations, so
    100 games cost little more than one. ``simulations`` per move (10, 100, 1000 make
    the league's difficulty ladder); UCB1 with constant ``c`` on win rates in [0, 1]
    (draw 0.5); every child is expanded once before UCB selection; the move is the
    most visited root child.

    Args:
        game: the rules (a :class:`BoardGame` class, e.g. ``ConnectFour``).
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

    def act(self, observations: Any, action_masks: Any, rng: Any = None) -> np.ndarray:
        legal = self._masks(action_masks)
        obs = np.asarray(observations).reshape(-1, *self.game.obs_shape())
        cur, mask = self.game.from_planes(obs)
        return self.search(cur, mask, rng if rng is not None else np.random, legal)

    def search(
        self, cur0: np.ndarray, mask0: np.ndarray, rng: Any, legal0: np.ndarray | None = None
    ) -> np.ndarray:
        """Best action for each position ``(cur0, mask0)`` after the simulations."""
        g = self.game
        B, N, A = len(cur0), self.simulations + 1, g.num_actions
        ncur = np.zeros((B, N), np.uint64)
        nmask = np.zeros((B, N), np.uint64)
        term = np.zeros((B, N), np.int8)  # 1: the player who moved into it won; 2: draw
        child = np.full((B, N, A), -1, np.int32)
        visits = np.zeros((B, N), np.float64)
        wins = np.zeros((B, N), np.float64)  # for the player who moved into the node
        count = np.ones(B, np.int64)
        ncur[:, 0], nmask[:, 0] = cur0, mask0
        root_legal = g.legal(mask0) if legal0 is None else legal0
        rows = np.arange(B)
        for _ in range(self.simulations):
            node = np.zeros(B, np.int64)
            depth = np.zeros(B, np.int64)
            path = [node.copy()]
            alive = np.ones(B, bool)
            while alive.any():
                b = np.flatnonzero(alive)
                n = node[b]
                stop = term[b, n] != 0
                alive[b[stop]] = False
                b, n = b[~stop], n[~stop]
                if len(b) == 0:
                    break
                legal = g.legal(nmask[b, n]) if len(path) > 1 else root_legal[b]
                ch = child[b, n]
                unexp = legal & (ch < 0)
                grow = unexp.any(axis=1)
                step = np.full(B, -1, np.int64)
                if grow.any():  # expansion: one untried move, then roll out from it
                    be, ne = b[grow], n[grow]
                    a = random_legal(unexp[grow], rng)
                    new = count[be]
                    count[be] += 1
                    c2, m2, won, full = g.play(ncur[be, ne], nmask[be, ne], a)
                    ncur[be, new], nmask[be, new] = c2, m2
                    term[be, new] = np.where(won, 1, np.where(full, 2, 0))
                    child[be, ne, a] = new
                    step[be] = new
                    alive[be] = False
                sel = ~grow
                if sel.any():  # selection: UCB1 over the children
                    bs, ns, cs = b[sel], n[sel], ch[sel]
                    ok = legal[sel]
                    cc = np.where(ok, cs, 0)
                    nv = visits[bs[:, None], cc]
                    q = wins[bs[:, None], cc] / np.maximum(nv, 1)
                    u = q + self.c * np.sqrt(np.log(visits[bs, ns])[:, None] / np.maximum(nv, 1))
                    u = np.where(ok, u, -np.inf)
                    pick = cs[np.arange(len(bs)), u.argmax(axis=1)]
                    step[bs] = pick
                node = np.where(step >= 0, step, node)
                depth += step >= 0
                path.append(step)
            value = self._rollout(node, ncur, nmask, term, rng)  # for who moved into the leaf
            # back up: a node's value alternates with its distance from the leaf
            for d, nodes in enumerate(path):
                on = nodes >= 0
                if not on.any():
                    continue
                bb, nn = rows[on], nodes[on]
                flip = (depth[on] - d) % 2 == 1
                visits[bb, nn] += 1
                wins[bb, nn] += np.where(flip, 1.0 - value[on], value[on])
        ch0 = child[:, 0]
        cv = np.where(ch0 >= 0, visits[rows[:, None], np.maximum(ch0, 0)], 0.0)
        cv = np.where(root_legal, cv, -1.0)
        best = cv == cv.max(axis=1, keepdims=True)
        return random_legal(best & root_legal, rng)

    def _rollout(
        self,
        leaf: np.ndarray,
        ncur: np.ndarray,
        nmask: np.ndarray,
        term: np.ndarray,
        rng: Any,
    ) -> np.ndarray:
        """Random playouts from each leaf; the result for the player who moved into it."""
        g = self.game
        B = len(leaf)
        rows = np.arange(B)
        t = term[rows, leaf]
        value = np.where(t == 1, 1.0, 0.5)
        cur, mask = ncur[rows, leaf].copy(), nmask[rows, leaf].copy()
        active = t == 0
        parity = 0  # 0: the player to move at the leaf (the leaf mover's opponent) moves
        while active.any():
            ia = np.flatnonzero(active)
            a = random_legal(g.legal(mask[ia]), rng)
            c2, m2, won, full = g.play(cur[ia], mask[ia], a)
            cur[ia], mask[ia] = c2, m2
            value[ia[won]] = 0.0 if parity == 0 else 1.0
            value[ia[full & ~won]] = 0.5
            active[ia[won | full]] = False
            parity ^= 1
        return value


def make_baseline(spec: str, game: type[BoardGame]) -> Player:
    """A baseline by name: ``random``, ``tactical``, ``tactical_uniform`` (no centre
    preference), ``minimax`` (tic-tac-toe), ``mcts<N>``, or the Connect Four solver
    ``solver`` (perfect) / ``solver<d>`` (searches ``d`` plies; extra ``solver``)."""
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
    if spec == "solver" or (spec.startswith("solver") and spec[6:].isdigit()):
        if game is not ConnectFour:
            raise ValueError(f"baseline {spec!r} is the Connect Four solver, not for {game.name}")
        from .solver import SolverPlayer  # the optional extra 'solver'

        return SolverPlayer(int(spec[6:]) if spec[6:] else -1)
    raise ValueError(
        f"unknown baseline {spec!r}: use random, tactical, tactical_uniform, minimax "
        "(tic-tac-toe), mcts<N>, solver or solver<depth> (Connect Four)"
    )
