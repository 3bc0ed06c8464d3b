"""The training targets of search updates, from a step's self-play records: each
position's value target is its game's discounted result (`outcome_samples`)."""

from __future__ import annotations

import numpy as np

__all__ = ["outcome_samples"]


def outcome_samples(
    records: list[dict[str, np.ndarray]],
    winner: np.ndarray,
    discount: float = 1.0,
    max_moves: int | None = None,
) -> dict[str, np.ndarray]:
    """Training samples ``obs, mask, pi, z``: ``z`` is the game's outcome for the mover
    (+1 win, 0 draw, -1 loss), times ``discount ** k`` where the game was decided ``k``
    plies after the position (0: the mover's own move won it); a draw is decided with the
    board full, on ply ``max_moves - 1`` (without ``max_moves``, the game's last recorded ply).

    The deciding ply of a game is its last recorded move where the winner moved it, else
    the move after (the opponent's, which the records need not hold).
    """
    ply = np.concatenate([r["ply"] for r in records])
    game = np.concatenate([r["game"] for r in records])
    w = winner[game]
    z = np.where(w < 0, 0.0, np.where(w == ply % 2, 1.0, -1.0))
    if discount != 1.0:
        last = _deciding_plies(ply, game, winner, max_moves)
        z = z * discount ** (last[game] - ply).astype(np.float64)
    z = z.astype(np.float32)
    return {
        "obs": np.concatenate([r["obs"] for r in records]),
        "mask": np.concatenate([r["mask"] for r in records]),
        "pi": np.concatenate([r["pi"] for r in records]).astype(np.float32),
        "z": z,
    }


def _deciding_plies(
    ply: np.ndarray, game: np.ndarray, winner: np.ndarray, max_moves: int | None
) -> np.ndarray:
    """Each game's deciding ply ``int64 [games]`` from the records' ``ply`` and ``game``
    ``[samples]``: a won game's last recorded move where the winner moved it, else the move
    after (the opponent's, which the records need not hold); a drawn game's last square,
    ply ``max_moves - 1`` (without ``max_moves``, its last recorded ply)."""
    last = np.full(len(winner), -1, np.int64)
    np.maximum.at(last, game, ply)
    last += (last % 2 != winner) & (winner >= 0)  # the winner's move came after
    if max_moves is not None:  # a draw: decided by the last square's move
        last = np.where(winner < 0, max_moves - 1, last)
    return last
