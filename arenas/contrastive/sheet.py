"""The retrieval sheet: each query image beside its top-scored captions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["retrieval_sheet"]

SIDE = 96  # px of the (nearest-neighbour enlarged) query image
TEXT_WIDTH = 520  # px of captions beside it
LINE = 18  # px per caption line


def _rgb(img: np.ndarray) -> np.ndarray:
    """uint8 [H, W, 3] from uint8 [H, W, C] or float [C, H, W] in [0, 1]."""
    x = np.asarray(img)
    if x.dtype != np.uint8:
        x = np.clip(np.moveaxis(x, 0, -1) * 255.0, 0, 255).astype(np.uint8)
    return np.repeat(x, 3, axis=-1) if x.shape[-1] == 1 else x[..., :3]


def retrieval_sheet(
    images: np.ndarray,
    captions: Sequence[str],
    sim: np.ndarray,
    relevant: np.ndarray,
    rows: Sequence[int],
    top: int = 3,
) -> np.ndarray:
    """uint8 RGB [H, W, 3]: for each image index in ``rows``, the image, its own caption and
    the ``top`` captions by similarity (``sim`` [N, M], ``relevant`` bool [N, M]); a
    caption that is the image's own is green, another red."""
    import cv2

    out = []
    for i in rows:
        order = np.argsort(-sim[i], kind="stable")[:top]
        own = captions[int(np.flatnonzero(relevant[i])[0])] if relevant[i].any() else "?"
        h = max(SIDE + 8, LINE * (top + 2))
        row = np.full((h, SIDE + TEXT_WIDTH, 3), 255, np.uint8)
        big = cv2.resize(_rgb(images[i]), (SIDE, SIDE), interpolation=cv2.INTER_NEAREST)
        row[4 : 4 + SIDE, :SIDE] = big
        font = cv2.FONT_HERSHEY_SIMPLEX
        cv2.putText(row, f"own: {own}"[:72], (SIDE + 8, LINE), font, 0.42, (90, 90, 90), 1,
                    cv2.LINE_AA)  # fmt: skip
        for r, j in enumerate(order):
            ok = bool(relevant[i, j])
            colour = (0, 140, 0) if ok else (200, 0, 0)
            text = f"{r + 1}. {sim[i, j]:+.2f} {captions[j]}"[:72]
            cv2.putText(row, text, (SIDE + 8, LINE * (r + 2)), font, 0.42, colour, 1, cv2.LINE_AA)
        row[-1] = 200
        out.append(row)
    return np.concatenate(out) if out else np.full((8, SIDE + TEXT_WIDTH, 3), 255, np.uint8)
