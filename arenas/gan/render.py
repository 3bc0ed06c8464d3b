"""Sample grids and the files a GAN run writes (PNG grids, ``samples.npy``), atomically."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np

from paddlecraft.encoders.tensorio import atomic_write_bytes

__all__ = ["render_grid", "save_npy", "write_png"]


def render_grid(images: np.ndarray, rows: int, cell: int = 32, pad: int = 1) -> np.ndarray:
    """A ``rows x rows`` grid of images [N, C, H, W] in [0, 1] as uint8, upscaled (nearest).

    Returns [H', W'] for one plane, [H', W', 3] RGB for three; cells are separated by
    ``pad`` white pixels.
    """
    n, c, h, w = images.shape
    scale = max(1, cell // max(h, w))
    hs, ws = h * scale, w * scale
    canvas = np.full((rows * (hs + pad) + pad, rows * (ws + pad) + pad, c), 255, np.uint8)
    for i in range(min(n, rows * rows)):
        r, k = divmod(i, rows)
        img = (np.clip(images[i], 0.0, 1.0).transpose(1, 2, 0) * 255.0 + 0.5).astype(np.uint8)
        big = cv2.resize(img, (ws, hs), interpolation=cv2.INTER_NEAREST).reshape(hs, ws, c)
        y0, x0 = pad + r * (hs + pad), pad + k * (ws + pad)
        canvas[y0 : y0 + hs, x0 : x0 + ws] = big
    return canvas[:, :, 0] if c == 1 else canvas


def write_png(path: Path, grid: np.ndarray) -> None:
    """Write a grey [H, W] or RGB [H, W, 3] uint8 image as PNG (atomically)."""
    img = grid if grid.ndim == 2 else cv2.cvtColor(grid, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".png", img)
    if not ok:
        raise RuntimeError(f"OpenCV could not encode {path}")
    atomic_write_bytes(path, buf.tobytes())


def save_npy(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as ``.npy`` (atomically)."""
    buf = io.BytesIO()
    np.save(buf, array)
    atomic_write_bytes(path, buf.getvalue())
