"""Checks that a chart file is a real picture: a PNG of the promised size with something on it."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np


def assert_chart(path: str | Path, size: tuple[int, int]) -> np.ndarray:
    """``path`` decodes as a ``width x height`` PNG that is neither blank nor a flood of ink;
    returns the BGR pixels."""
    raw = Path(path).read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    assert img is not None and (img.shape[1], img.shape[0]) == size, (path, img.shape)
    ink = (img < 235).any(-1).mean()  # share of pixels that are not (near) white
    assert 0.01 < ink < 0.7, f"{path}: {ink:.3f} of the pixels inked"
    colours = len(np.unique(img.reshape(-1, 3) // 32, axis=0))
    assert colours >= 4, f"{path}: {colours} colours"
    return img
