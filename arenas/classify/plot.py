"""Pictures of a classifier's results: the confusion matrix (a matplotlib chart)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paddlecraft.arenas.engine.plots import confusion_chart, save, to_bgr


def render_confusion(cm: np.ndarray, labels: list[str] | None = None) -> np.ndarray:
    """A BGR picture of a confusion matrix (rows: true class, columns: predicted)."""
    return to_bgr(confusion_chart(cm, labels))


def save_confusion(cm: np.ndarray, path: str | Path, labels: list[str] | None = None) -> Path:
    """Write the confusion-matrix chart of ``cm`` ``[k, k]`` (counts) to ``path`` (PNG)."""
    return save(confusion_chart(cm, labels), path)
