"""Tic-tac-toe as a batched bitboard game (PettingZoo ``tictactoe_v3`` conventions).

Bit ``i`` of a bitboard is the square at row ``i // 3``, column ``i % 3`` of the
observation planes, which is also action ``i``.
"""

from __future__ import annotations

import numpy as np

from .core import U64, BoardGame

#: the eight lines: three rows, three columns, two diagonals (as bit masks)
LINES = np.array(
    [
        sum(1 << i for i in line)
        for line in (
            (0, 1, 2),
            (3, 4, 5),
            (6, 7, 8),
            (0, 3, 6),
            (1, 4, 7),
            (2, 5, 8),
            (0, 4, 8),
            (2, 4, 6),
        )
    ],
    U64,
)
_BITS = U64(1) << np.arange(9, dtype=U64)


class TicTacToe(BoardGame):
    """3x3 tic-tac-toe; 9 actions; a game lasts at most 9 moves."""

    name = "tictactoe"
    rows, cols, num_actions, max_moves = 3, 3, 9, 9
    POS = np.arange(9).reshape(3, 3)
    FULL = U64(0x1FF)

    @classmethod
    def legal(cls, mask: np.ndarray) -> np.ndarray:
        return (np.asarray(mask, U64)[:, None] & _BITS[None, :]) == 0

    @classmethod
    def new_stone(cls, mask: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return _BITS[np.asarray(actions, np.int64)]

    @classmethod
    def wins(cls, stones: np.ndarray) -> np.ndarray:
        s = np.asarray(stones, U64)[:, None]
        return ((s & LINES[None, :]) == LINES[None, :]).any(axis=1)
