"""Pictures of a classifier's results: the confusion matrix (a matplotlib chart, or a
table for the live page)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.arenas.engine.live.panels import table_panel
from paddlecraft.arenas.engine.plots import confusion_chart, save, to_bgr


def render_confusion(cm: np.ndarray, labels: list[str] | None = None) -> np.ndarray:
    """A BGR picture of a confusion matrix (rows: true class, columns: predicted)."""
    return to_bgr(confusion_chart(cm, labels))


def save_confusion(cm: np.ndarray, path: str | Path, labels: list[str] | None = None) -> Path:
    """Write the confusion-matrix chart of ``cm`` ``[k, k]`` (counts) to ``path`` (PNG)."""
    return save(confusion_chart(cm, labels), path)


def live_panels(predicted: np.ndarray, true: np.ndarray, recent: int = 12) -> list[dict[str, Any]]:
    """The live page's tables: the confusion matrix of ``predicted`` against ``true`` labels
    (rows: true class, columns: predicted) and the first ``recent`` test predictions."""
    pred, y = np.asarray(predicted, np.int64), np.asarray(true, np.int64)
    k = int(max(pred.max(initial=0), y.max(initial=0))) + 1
    cm = np.zeros((k, k), np.int64)  # [true, predicted]
    np.add.at(cm, (y, pred), 1)
    acc = float((pred == y).mean()) if len(y) else float("nan")
    matrix = table_panel(
        f"confusion matrix, test split (accuracy {acc:.3f}; rows: true, columns: predicted)",
        ["true \\ predicted", *map(str, range(k))],
        [[str(i), *cm[i].tolist()] for i in range(k)],
    )
    n = min(recent, len(y))
    shown = table_panel(
        f"the first {n} test predictions",
        ["example", "true", "predicted", "right"],
        [[i, int(y[i]), int(pred[i]), "yes" if pred[i] == y[i] else "no"] for i in range(n)],
    )
    return [matrix, shown]
