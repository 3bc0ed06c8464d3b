"""Pictures of a self-play league: rating over training, and a tournament's ratings."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np


def render_rating_history(
    history: list[dict[str, Any]], size: tuple[int, int] = (900, 520)
) -> np.ndarray:
    """A BGR line chart of each player's rating (mu) over training updates."""
    w, h = size
    img = np.full((h, w, 3), 255, np.uint8)
    left, right, top, bottom = 70, 170, 30, 50
    cv2.putText(
        img,
        "league ratings (openskill mu)",
        (left, 20),
        cv2.FONT_HERSHEY_SIMPLEX,
        0.55,
        (0, 0, 0),
        1,
    )
    if not history:
        cv2.putText(
            img, "no evaluations yet", (left, h // 2), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 0, 0), 1
        )
        return img
    steps = [e["step"] for e in history]
    names: list[str] = []
    for e in history:
        for k in e["mu"]:
            if k not in names:
                names.append(k)
    values = [v for e in history for v in e["mu"].values()]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-6:
        lo, hi = lo - 1, hi + 1
    s0, s1 = min(steps), max(steps)
    s1 = s1 if s1 > s0 else s0 + 1

    def xy(step: float, v: float) -> tuple[int, int]:
        x = left + (step - s0) / (s1 - s0) * (w - left - right)
        y = h - bottom - (v - lo) / (hi - lo) * (h - top - bottom)
        return int(round(x)), int(round(y))

    cv2.rectangle(img, (left, top), (w - right, h - bottom), (0, 0, 0), 1)
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        _, y = xy(s0, v)
        cv2.line(img, (left - 4, y), (left, y), (0, 0, 0), 1)
        cv2.putText(img, f"{v:.0f}", (8, y + 4), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1)
    for i in range(5):
        s = s0 + (s1 - s0) * i / 4
        x, _ = xy(s, lo)
        cv2.line(img, (x, h - bottom), (x, h - bottom + 4), (0, 0, 0), 1)
        cv2.putText(
            img, f"{s:.0f}", (x - 10, h - bottom + 18), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1
        )
    cv2.putText(img, "update", (w // 2 - 30, h - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1)
    palette = [  # BGR
        (200, 60, 30),
        (30, 30, 200),
        (30, 150, 30),
        (160, 30, 160),
        (0, 140, 220),
        (120, 120, 0),
        (0, 0, 0),
        (80, 160, 240),
        (140, 90, 40),
        (200, 0, 120),
    ]
    legend_y = top + 10
    color_i = 0
    # snapshots first (thin, grey), so the learner and the anchors are drawn on top
    names = sorted(names, key=lambda n: not n.startswith("snap_"))
    for name in names:
        pts = [xy(e["step"], e["mu"][name]) for e in history if name in e["mu"]]
        if name.startswith("snap_"):
            color, thick = (200, 200, 200), 1
        else:
            color, thick = palette[color_i % len(palette)], 2
            color_i += 1
            cv2.line(img, (w - right + 10, legend_y), (w - right + 30, legend_y), color, 2)
            cv2.putText(
                img,
                name,
                (w - right + 35, legend_y + 4),
                cv2.FONT_HERSHEY_SIMPLEX,
                0.45,
                (0, 0, 0),
                1,
            )
            legend_y += 18
        for p, q in zip(pts, pts[1:]):
            cv2.line(img, p, q, color, thick, cv2.LINE_AA)
        for p in pts:
            cv2.circle(img, p, 2 if thick == 1 else 3, color, -1)
    if any(n.startswith("snap_") for n in names):
        cv2.line(img, (w - right + 10, legend_y), (w - right + 30, legend_y), (200, 200, 200), 1)
        cv2.putText(
            img,
            "snapshots",
            (w - right + 35, legend_y + 4),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.45,
            (0, 0, 0),
            1,
        )
    return img
