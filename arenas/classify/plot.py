"""Pictures of a classifier's results: the confusion matrix."""

from __future__ import annotations

import cv2
import numpy as np


def render_confusion(cm: np.ndarray, cell: int = 40) -> np.ndarray:
    """A BGR picture of a confusion matrix (rows: true class, columns: predicted)."""
    k = len(cm)
    norm = cm / np.maximum(cm.sum(1, keepdims=True), 1)
    img = np.full((cell * (k + 1), cell * (k + 1), 3), 255, np.uint8)
    for i in range(k):
        for j in range(k):
            shade = int(255 * (1 - norm[i, j]))
            y0, x0 = cell * (i + 1), cell * (j + 1)
            img[y0 : y0 + cell, x0 : x0 + cell] = (
                (255, shade, shade) if i == j else (shade, shade, 255)
            )
            ink = (255, 255, 255) if shade < 128 else (0, 0, 0)
            cv2.putText(
                img,
                str(cm[i, j]),
                (x0 + 4, y0 + cell // 2 + 5),
                cv2.FONT_HERSHEY_SIMPLEX,
                0.4,
                ink,
                1,
            )
        cv2.putText(
            img,
            str(i),
            (8, cell * (i + 1) + cell // 2 + 5),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.5,
            (0, 0, 0),
            1,
        )
        cv2.putText(
            img,
            str(i),
            (cell * (i + 1) + 14, cell - 12),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.5,
            (0, 0, 0),
            1,
        )
    return img
