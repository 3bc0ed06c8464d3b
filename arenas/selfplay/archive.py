"""Go-Exploit's archive starts (``arena.search.archive_starts``): some of an update's
training games begin at a position drawn from the replay window instead of the empty board.

AlphaZero starts every self-play game from the initial position and samples its moves only
over the first plies, so the positions deep in the game tree that its searches meet are
ones its games rarely reach. Go-Exploit (Trudeau and Bowling, "Targeted Search Control in
AlphaZero for Effective Policy Improvement", AAMAS 2023, on Connect Four and 9x9 Go) starts
a share of the games from an archive of states visited in self-play: the games explore more
of the tree, and the shorter games give more independent value targets per position
played. Here the archive is the replay window (`ReplayBuffer`, mirror images included): a
start is a stored position drawn uniformly, a position some recent game was in.

    starts = archive_starts(replay, n, share, ConnectFour, rng)  # (cur [n], mask [n]) or None
    play_games(spec, n, seats, controllers, record=0, starts=starts)

The draws come from their own random stream (`ARCHIVE_STREAM`), so a run
with ``archive_starts=0`` plays exactly the games it played before the setting existed,
and a resumed run draws the same starts (the window is in the checkpoint).
"""

from __future__ import annotations

import numpy as np

from ..games.core import BoardGame
from .replay import ReplayBuffer

__all__ = ["ARCHIVE_STREAM", "archive_starts"]

#: random-stream id of an update's archive starts: ``[seed, id, update]`` (the arena's)
ARCHIVE_STREAM = 19


def archive_starts(
    replay: ReplayBuffer | None,
    n: int,
    share: float,
    rules: type[BoardGame],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The start of each of ``n`` games: ``(cur [n], mask [n])`` bitboards (the mover's
    stones and all stones; ``0, 0`` the empty board), ``round(share * n)`` of them, at
    games drawn from ``rng``, a position of the replay window drawn uniformly (its stored
    planes, `BoardGame.from_planes`). None where no game starts elsewhere (``share`` 0, or
    the window still empty: the first update's games all start from the empty board)."""
    k = int(round(share * n))
    if k == 0 or replay is None or not len(replay):
        return None
    games = rng.choice(n, k, replace=False)  # [k] which games start from the archive
    planes = replay.window_sample("obs", k, rng)  # [k, rows, cols, 2]
    cur, mask = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    cur[games], mask[games] = rules.from_planes(planes)
    return cur, mask
