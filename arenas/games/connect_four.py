"""Connect Four as a batched bitboard game (PettingZoo ``connect_four_v3`` conventions).

Bitboard layout (John Tromp / Pascal Pons): column ``c`` uses bits ``7c .. 7c+5`` from
the bottom row up, and bit ``7c+6`` stays empty as a sentinel, so a line test is a
shift and an AND per direction and never wraps across columns. Playing column ``c``
adds ``mask + bottom(c)`` restricted to the column: the carry lands on the lowest
empty cell. Observation row 0 is the top row, as in PettingZoo.
"""

from __future__ import annotations

import numpy as np

from .core import U64, BoardGame

ROWS, COLS = 6, 7
_COL = np.arange(COLS, dtype=U64)
BOTTOM = U64(1) << (_COL * U64(7))
TOP = U64(1) << (_COL * U64(7) + U64(ROWS - 1))
COLUMN = U64((1 << ROWS) - 1) << (_COL * U64(7))
_SHIFTS = (1, 7, 6, 8)  # vertical, horizontal, two diagonals
_BOARD = U64(int(COLUMN.sum()))  # every cell, no sentinel
_BOTTOMS = U64(int(BOTTOM.sum()))  # the bottom cell of every column
_U = [U64(k) for k in range(25)]  # shift amounts as uint64 scalars


class ConnectFour(BoardGame):
    """6x7 Connect Four; the action is the column; a game lasts at most 42 moves."""

    name = "connect_four"
    rows, cols, num_actions, max_moves = ROWS, COLS, COLS, ROWS * COLS
    # cell (r, c) with r = 0 on top is bit 7c + (5 - r)
    POS = np.array([[7 * c + (ROWS - 1 - r) for c in range(COLS)] for r in range(ROWS)])
    FULL = U64(int(COLUMN.sum()))

    @classmethod
    def legal(cls, mask: np.ndarray) -> np.ndarray:
        return (np.asarray(mask, U64)[:, None] & TOP[None, :]) == 0

    @classmethod
    def new_stone(cls, mask: np.ndarray, actions: np.ndarray) -> np.ndarray:
        a = np.asarray(actions, np.int64)
        return (np.asarray(mask, U64) + BOTTOM[a]) & COLUMN[a]

    @classmethod
    def wins(cls, stones: np.ndarray) -> np.ndarray:
        p = np.asarray(stones, U64)
        out = np.zeros(p.shape, bool)
        for s in _SHIFTS:
            m = p & (p >> U64(s))
            out |= (m & (m >> U64(2 * s))) != 0
        return out

    @classmethod
    def winning_cells(cls, stones: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``uint64 [n]`` bitboards (Pons' winning cells): the empty cells that would
        complete a line of ``stones``, kept where a stone can be played (the lowest empty
        cell of each column, so at most one per column)."""
        p, mask = np.asarray(stones, U64), np.asarray(mask, U64)
        cells = (p << _U[1]) & (p << _U[2]) & (p << _U[3])  # vertical: three below
        for s in _SHIFTS[1:]:  # three in a row on either side of the cell, or two and one
            up1, up2, down1, down2 = p << _U[s], p << _U[2 * s], p >> _U[s], p >> _U[2 * s]
            left, right = up1 & up2, down1 & down2
            cells |= (left & ((p << _U[3 * s]) | down1)) | (right & ((p >> _U[3 * s]) | up1))
        playable = (mask + _BOTTOMS) & _BOARD
        return cells & playable & ~mask  # [n]

    @classmethod
    def winning_moves(cls, stones: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """As `BoardGame.winning_moves`, from `winning_cells`."""
        win = cls.winning_cells(stones, mask)  # [n]
        return (win[:, None] & COLUMN[None, :]) != 0  # [n, 7]

    @classmethod
    def winning_move_count(cls, stones: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """As `BoardGame.winning_move_count`, on the bitboards: one winning cell per
        column at most, so a second set bit (``w & (w - 1)``) means two moves."""
        w = cls.winning_cells(stones, mask)  # [n]
        return (w != 0).astype(np.int64) + ((w & (w - _U[1])) != 0)
