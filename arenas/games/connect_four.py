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
# the shifts as a [4, 1] column: one array operation covers the four directions of [n] boards
_SH1 = np.array(_SHIFTS, U64)[:, None]
_SH2, _SH3 = _SH1 * U64(2), _SH1 * U64(3)
_BOARD = U64(int(COLUMN.sum()))  # every cell, no sentinel
_BOTTOMS = U64(int(BOTTOM.sum()))  # the bottom cell of every column
_ONE = U64(1)


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
        p = np.asarray(stones, U64)[None]  # [1, n]
        sh1, sh2 = (s.reshape((4,) + (1,) * (p.ndim - 1)) for s in (_SH1, _SH2))
        m = p & (p >> sh1)  # [4, n]: two in a row, per direction
        return ((m & (m >> sh2)) != 0).any(axis=0)  # [n]

    @classmethod
    def winning_cells(cls, stones: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``uint64 [n]`` bitboards (Pons' winning cells): the empty cells that would
        complete a line of ``stones``, kept where a stone can be played (the lowest empty
        cell of each column, so at most one per column)."""
        p, mask = np.asarray(stones, U64), np.asarray(mask, U64)
        return _line_cells(p.reshape(1, -1)) & ((mask + _BOTTOMS) & _BOARD) & ~mask  # [n]

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
        return (w != 0).astype(np.int64) + ((w & (w - _ONE)) != 0)

    @classmethod
    def two_ply_threats(cls, cur: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As `BoardGame.two_ply_threats`, from both players' `winning_cells` at once."""
        cur, mask, n = np.asarray(cur, U64), np.asarray(mask, U64), len(cur)
        w = cls.winning_cells(np.concatenate([cur, cur ^ mask]), np.concatenate([mask, mask]))
        return w[:n] != 0, (w[n:] & (w[n:] - _ONE)) != 0  # [2n]: the mover's, the opponent's


def _line_cells(p: np.ndarray) -> np.ndarray:
    """The cells, empty or not, that a stone would make part of a line of four of ``p
    [1, n]``: three in a row on one side of the cell, or two on one side and one on the
    other, tested in the four directions at once (``[4, n]``) and ORed (``[n]``).
    Vertically this also counts stones above a cell, which a playable cell never has, so
    on playable cells it is the rule of three below."""
    up1, down1 = p << _SH1, p >> _SH1
    cells = (up1 & (p << _SH2) & ((p << _SH3) | down1)) | (
        down1 & (p >> _SH2) & ((p >> _SH3) | up1)
    )
    return np.bitwise_or.reduce(cells, axis=0)
