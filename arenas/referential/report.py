"""End-of-run files of a referential game: messages.jsonl and pictures (cv2, no matplotlib)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from paddlecraft.encoders.tensorio import atomic_write_bytes, atomic_write_json

if TYPE_CHECKING:
    from .arena import ReferentialArena

__all__ = ["render_curves", "render_heatmap", "write_artifacts"]

FONT = cv2.FONT_HERSHEY_SIMPLEX
COLOURS_BGR = [(200, 90, 30), (40, 40, 220), (40, 160, 40), (160, 40, 160)]


def render_heatmap(
    matrix: np.ndarray, title: str, rows: str = "speaker", cols: str = "listener", cell: int = 70
) -> np.ndarray:
    """A BGR picture of a matrix of values in [0, 1] (white 0 -> dark blue 1), values written."""
    n, m = matrix.shape
    top, left = 50, 90
    img = np.full((top + cell * n + 30, left + cell * m + 20, 3), 255, np.uint8)
    cv2.putText(img, title, (8, 20), FONT, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, f"{cols} ->", (left, 42), FONT, 0.42, (80, 80, 80), 1, cv2.LINE_AA)
    for i in range(n):
        cv2.putText(
            img,
            f"{rows} {i}",
            (4, top + cell * i + cell // 2 + 4),
            FONT,
            0.4,
            (0, 0, 0),
            1,
            cv2.LINE_AA,
        )
        for j in range(m):
            v = float(np.clip(matrix[i, j], 0.0, 1.0))
            colour = tuple(int(255 - v * (255 - c)) for c in (140, 60, 20))
            y0, x0 = top + cell * i, left + cell * j
            img[y0 : y0 + cell - 2, x0 : x0 + cell - 2] = colour
            ink = (255, 255, 255) if v > 0.55 else (0, 0, 0)
            cv2.putText(
                img,
                f"{matrix[i, j]:.3f}",
                (x0 + 8, y0 + cell // 2 + 4),
                FONT,
                0.45,
                ink,
                1,
                cv2.LINE_AA,
            )
    for j in range(m):
        cv2.putText(
            img,
            str(j),
            (left + cell * j + cell // 2 - 4, top + cell * n + 18),
            FONT,
            0.42,
            (0, 0, 0),
            1,
            cv2.LINE_AA,
        )
    return img


def render_curves(
    curves: dict[str, Sequence[float]],
    title: str,
    xlabel: str,
    ylabel: str,
    xs: Sequence[float] | None = None,
    size: tuple[int, int] = (560, 340),
    ylim: tuple[float, float] = (0.0, 1.0),
) -> np.ndarray:
    """A BGR line chart of one or more curves (same x values), with a legend."""
    w, h = size
    left, right, top, bottom = 55, 15, 35, 45
    img = np.full((h, w, 3), 255, np.uint8)
    pw, ph = w - left - right, h - top - bottom
    longest = max(len(v) for v in curves.values())
    xv = np.asarray(xs if xs is not None else np.arange(1, longest + 1), np.float64)
    x0, x1 = float(xv.min()), float(xv.max()) if xv.max() > xv.min() else float(xv.min() + 1)
    lo, hi = ylim

    def pt(x: float, y: float) -> tuple[int, int]:
        px = left + (x - x0) / (x1 - x0) * pw
        py = top + (1 - (np.clip(y, lo, hi) - lo) / (hi - lo)) * ph
        return int(round(px)), int(round(py))

    cv2.rectangle(img, (left, top), (left + pw, top + ph), (0, 0, 0), 1)
    for k in range(5):
        y = lo + (hi - lo) * k / 4
        cv2.line(img, pt(x0, y), pt(x1, y), (225, 225, 225), 1)
        cv2.putText(img, f"{y:.2f}", (6, pt(x0, y)[1] + 4), FONT, 0.38, (60, 60, 60), 1)
    for x in (x0, (x0 + x1) / 2, x1):
        cv2.putText(img, f"{x:g}", (pt(x, lo)[0] - 12, top + ph + 16), FONT, 0.38, (60, 60, 60), 1)
    cv2.putText(img, title, (left, 22), FONT, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, xlabel, (left + pw // 2 - 30, h - 8), FONT, 0.42, (0, 0, 0), 1)
    cv2.putText(img, ylabel, (4, top - 8), FONT, 0.38, (0, 0, 0), 1)
    for n, (name, ys) in enumerate(curves.items()):
        colour = COLOURS_BGR[n % len(COLOURS_BGR)]
        pts = np.array([pt(float(xv[i]), float(y)) for i, y in enumerate(ys)], np.int32)
        if len(pts) > 1:
            cv2.polylines(img, [pts], False, colour, 2, cv2.LINE_AA)
        for p in pts if len(pts) <= 20 else ():
            cv2.circle(img, tuple(int(v) for v in p), 3, colour, -1)
        ly = top + 14 + 16 * n
        cv2.line(img, (left + pw - 150, ly - 4), (left + pw - 130, ly - 4), colour, 2)
        cv2.putText(img, name, (left + pw - 125, ly), FONT, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    return img


def _smooth(v: Sequence[float], window: int = 20) -> np.ndarray:
    v = np.asarray(v, np.float64)
    if v.size < window:
        return v
    return np.convolve(v, np.ones(window) / window, mode="valid")


def write_artifacts(arena: ReferentialArena, run_dir: str) -> dict[str, str]:
    """Write messages.jsonl (every evaluated object of every speaker), crossplay.{json,png}
    for populations and newcomer.png when a newcomer was taught; return their paths."""
    d = Path(run_dir)
    out: dict[str, str] = {}
    last = arena.last or {}
    if not last:
        arena.evaluate()
        last = arena.last
    lines = []
    splits = {"train": arena.world.train, "test": arena.world.test}
    several = len(arena.speakers) > 1
    for sp in arena.speakers:
        for name, split in splits.items():
            idx = last["batches"][name]["target"]
            for k, msg in zip(idx, last["messages"][sp.name][name]):
                row: dict = {
                    "meaning": split.meanings[k].tolist() if split.meanings is not None else None,
                    "message": [int(s) for s in msg],
                    "split": name,
                }
                if split.meanings is None:
                    row["index"] = int(k)
                if several:
                    row["speaker"] = sp.name
                lines.append(json.dumps(row))
    atomic_write_bytes(d / "messages.jsonl", ("\n".join(lines) + "\n").encode())
    out["messages"] = str(d / "messages.jsonl")
    acc = last["crossplay"]
    if acc["test"].size > 1:
        atomic_write_json(
            d / "crossplay.json",
            {
                "rows": [s.name for s in arena.speakers],
                "columns": [li.name for li in arena.listeners],
                "train_accuracy": acc["train"].tolist(),
                "test_accuracy": acc["test"].tolist(),
            },
        )
        cv2.imwrite(
            str(d / "crossplay.png"),
            render_heatmap(acc["test"], "cross-play accuracy, held-out objects"),
        )
        out["crossplay"] = str(d / "crossplay.json")
        out["crossplay_heatmap"] = str(d / "crossplay.png")
    curve = getattr(arena, "snr_curve", None)
    if arena.voice is not None and curve:
        img = render_curves(
            {"training objects": curve},
            "spoken channel: accuracy against noise",
            "SNR (dB)",
            "accuracy",
            xs=list(arena.cfg.eval_snrs),
        )
        cv2.imwrite(str(d / "snr_curve.png"), img)
        out["snr_curve"] = str(d / "snr_curve.png")
    if arena.newcomer_curve:
        curves = {
            "first generation": _smooth(arena.history),
            "newcomer": _smooth(arena.newcomer_curve),
        }
        n = min(len(v) for v in curves.values())
        curves = {k: v[:n] for k, v in curves.items()}
        img = render_curves(
            curves, "ease of teaching (batch accuracy, moving average)", "step", "accuracy"
        )
        cv2.imwrite(str(d / "newcomer.png"), img)
        out["newcomer_curve"] = str(d / "newcomer.png")
    return out
