"""The "telephone" sheet: test images with the text every hop made of them, and the choice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["sheet_row", "telephone_sheet"]

TEXT_WIDTH = 560  # px of text beside each image
SIDE = 128  # px of the (nearest-neighbour enlarged) image
THUMB = 44  # px of each candidate thumbnail


def telephone_sheet(rows: Sequence[tuple[np.ndarray, dict[str, Any], int, str]]) -> np.ndarray:
    """uint8 RGB [H, W, 3]: one `sheet_row` per ``(images, trace, i, label)``."""
    return np.concatenate([sheet_row(images, tr, i, label) for images, tr, i, label in rows])


def _rgb(img: np.ndarray) -> np.ndarray:
    return np.repeat(img, 3, axis=-1) if img.shape[-1] == 1 else img


def _text(row: np.ndarray, text: str, xy: tuple[int, int], scale: float, color: tuple) -> None:
    import cv2

    cv2.putText(row, text, xy, cv2.FONT_HERSHEY_SIMPLEX, scale, color, 1, cv2.LINE_AA)


def sheet_row(images: np.ndarray, tr: dict[str, Any], i: int, label: str) -> np.ndarray:
    """uint8 RGB row for item ``i`` of an evaluation trace.

    ``images`` is the split's uint8 [N, H, W, C]; ``tr`` holds ``truth``, ``targets``,
    ``trace`` ([(hop, texts)]), ``correct`` and, when the chain ends in a listener,
    ``cands``, ``choice`` and ``slot``. The chosen candidate is framed green (right) or
    red (wrong); the true one is labelled "target".
    """
    import cv2

    img = _rgb(images[tr["targets"][i]])
    big = cv2.resize(img, (SIDE, SIDE), interpolation=cv2.INTER_NEAREST)
    cands = images[tr["cands"][i]] if tr.get("cands") is not None else None
    lines = [f"[{label}] truth: {tr['truth'][i]}"] + [f"{h}: {outs[i]}" for h, outs in tr["trace"]]
    y0 = 20 + 16 * len(lines) + 10  # thumbnails below the text, "target" label above them
    row_h = max(SIDE + 12, y0 + THUMB + 8)
    row = np.full((row_h, SIDE + TEXT_WIDTH, 3), 255, np.uint8)
    row[6 : 6 + SIDE, 0:SIDE] = big
    ok = bool(tr["correct"][i])
    for j, line in enumerate(lines):
        _text(row, line[:70], (SIDE + 8, 20 + 16 * j), 0.42, (0, 0, 0) if j else (90, 90, 90))
    if cands is not None and tr.get("choice") is not None:
        for c in range(len(cands)):
            x0 = SIDE + 8 + c * (THUMB + 8)
            row[y0 : y0 + THUMB, x0 : x0 + THUMB] = cv2.resize(
                _rgb(cands[c]), (THUMB, THUMB), interpolation=cv2.INTER_AREA
            )
            if c == tr["choice"][i]:
                colour = (0, 160, 0) if ok else (220, 0, 0)
                cv2.rectangle(row, (x0 - 2, y0 - 2), (x0 + THUMB + 1, y0 + THUMB + 1), colour, 2)
            if c == tr["slot"][i]:
                _text(row, "target", (x0, y0 - 5), 0.35, (0, 0, 0))
    _text(
        row,
        "ok" if ok else "WRONG",
        (SIDE + TEXT_WIDTH - 70, row_h - 12),
        0.55,
        (0, 140, 0) if ok else (200, 0, 0),
    )
    row[-1] = 200
    return row
