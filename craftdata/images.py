"""Decoding and resizing one image file (OpenCV), as the image-folder and caption readers use it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from paddlecraft.craftdata.badfiles import BadDataError

__all__ = ["IMAGE_EXTENSIONS", "RESIZE_MODES", "ImageTransform", "decode_image"]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")  #: files the image readers pick up
RESIZE_MODES = ("stretch", "crop")  #: values of ``data.resize``


def decode_image(path: str | os.PathLike, channels: int) -> np.ndarray:
    """The file's pixels as uint8 ``[H, W]`` (``channels=1``) or RGB ``[H, W, 3]``.

    Raises ``ValueError`` (the problem, without the path) when OpenCV cannot decode it.
    """
    try:
        buf = np.fromfile(os.fspath(path), np.uint8)
    except OSError as e:
        raise ValueError(f"cannot be read ({e.strerror or e})") from e
    flag = cv2.IMREAD_GRAYSCALE if channels == 1 else cv2.IMREAD_COLOR
    img = cv2.imdecode(buf, flag) if buf.size else None
    if img is None:
        raise ValueError("cannot be decoded as an image (damaged, or not PNG/JPEG)")
    return img if channels == 1 else cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


@dataclass(frozen=True)
class ImageTransform:
    """Decoded pixels -> float32 ``[C, image_size, image_size]`` (OpenCV resize, then scaling).

    ``resize``: ``stretch`` scales the whole image to the square; ``crop`` scales the shorter
    side to ``image_size`` and keeps the centre square. Pixels become ``value / 255`` in
    [0, 1], then ``(v - mean) / std`` per channel when ``mean``/``std`` are given.
    ``hflip``: flip left-right with probability 1/2 (training only; the caller passes a
    generator seeded from (seed, epoch, index) so the choice is reproducible).
    """

    channels: int = 3
    image_size: int = 32
    resize: str = "stretch"
    mean: Sequence[float] | None = None
    std: Sequence[float] | None = None
    hflip: bool = False

    def __post_init__(self) -> None:
        if self.channels not in (1, 3):
            raise BadDataError(f"data.channels must be 1 or 3 for images, got {self.channels}")
        if self.image_size < 1:
            raise BadDataError(f"data.image_size must be >= 1, got {self.image_size}")
        if self.resize not in RESIZE_MODES:
            raise BadDataError(
                f"data.resize must be one of {list(RESIZE_MODES)}, got {self.resize!r}"
            )
        for name in ("mean", "std"):
            v = getattr(self, name)
            if v is not None and len(v) != self.channels:
                raise BadDataError(
                    f"data.{name} needs one value per channel ({self.channels}), got {list(v)}"
                )

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of the output."""
        return (self.channels, self.image_size, self.image_size)

    def __call__(self, img: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """``img`` uint8 [H, W(, C)] -> float32 [C, S, S]."""
        s = self.image_size
        h, w = img.shape[:2]
        if self.resize == "crop" and h != w:
            scale = s / min(h, w)
            nh, nw = max(s, round(h * scale)), max(s, round(w * scale))
            img = cv2.resize(img, (nw, nh), interpolation=_interp(h, nh))
            y0, x0 = (nh - s) // 2, (nw - s) // 2
            img = img[y0 : y0 + s, x0 : x0 + s]
        elif (h, w) != (s, s):
            img = cv2.resize(img, (s, s), interpolation=_interp(h, s))
        if self.hflip and rng is not None and rng.random() < 0.5:
            img = img[:, ::-1]
        x = img.astype(np.float32) * np.float32(1 / 255)
        x = x[None] if x.ndim == 2 else x.transpose(2, 0, 1)  # [C, S, S]
        if self.mean is not None:
            x = x - np.asarray(self.mean, np.float32)[:, None, None]
        if self.std is not None:
            x = x / np.asarray(self.std, np.float32)[:, None, None]
        return np.ascontiguousarray(x)


def _interp(old: int, new: int) -> int:
    return cv2.INTER_AREA if new < old else cv2.INTER_LINEAR
