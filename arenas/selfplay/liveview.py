"""The self-play arena's picture for the live page: a board from the latest training games."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.live.panels import board_panel
from ..games.core import BoardGame


def stone_cell(rules: type[BoardGame], stone: int) -> tuple[int, int]:
    """``(row, col)`` of the single bit ``stone`` on the board of ``rules``."""
    r, c = np.argwhere(rules.POS == int(stone).bit_length() - 1)[0]
    return int(r), int(c)


def training_board(
    rules: type[BoardGame], rollout: dict[str, Any], update: int, g: int = 0
) -> dict[str, Any] | None:
    """A board panel: game ``g`` of the last update's games, after the learner's last move
    in it (the final position when the learner played both seats). None without records."""
    last: tuple[int, Any, int] | None = None  # (ply, record, index in record)
    for rec in rollout.get("records", []):
        hit = np.flatnonzero(np.asarray(rec["game"]) == g)
        if len(hit) and (last is None or int(rec["ply"][hit[0]]) > last[0]):
            last = (int(rec["ply"][hit[0]]), rec, int(hit[0]))
    if last is None:
        return None
    ply, rec, j = last
    cur, mask = rules.from_planes(np.asarray(rec["obs"][j])[None])  # the mover's side
    action = np.asarray([int(rec["action"][j])])
    stone = rules.new_stone(mask, action)
    cur2, mask2, _, _ = rules.play(cur, mask, action)  # from the next mover's side
    planes = rules.planes(cur2, mask2)[0]  # [rows, cols, 2]
    nxt, prev = planes[..., 0].astype(np.int64), planes[..., 1].astype(np.int64)
    first, second = (nxt, prev) if (ply + 1) % 2 == 0 else (prev, nxt)
    r, c = stone_cell(rules, int(stone[0]))
    winner = int(np.asarray(rollout["winner"])[g])
    outcome = (
        "a draw" if winner < 0 else f"won by the {'first' if winner == 0 else 'second'} player"
    )
    caption = (
        f"update {update}: training game {g + 1} of {rollout.get('n', '?')} after move "
        f"{ply + 1}, {outcome} (X moved first)"
    )
    return board_panel("training game", first + 2 * second, caption, (r, c))
