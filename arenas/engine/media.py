"""What an arena shows besides numbers: images, audio, text, at each evaluation.

An arena returns them from ``media()``, ``{tag: item}``; loggers (the VisualDL callback)
write each item as its kind. A bare array (HWC uint8) is an image:

    def media(self) -> dict[str, Any]:
        return {
            "samples/grid": grid,                                   # HWC uint8
            "chain/telephone": Image(sheet),
            "chain/spoken_hop": Audio(wave, sample_rate=22050),
            "chain/captions": Text("\\n".join(captions)),
        }
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Image:
    """An image ``[H, W, C]`` (uint8, or float in [0, 1]) or ``[H, W]`` grey."""

    array: np.ndarray


@dataclass
class Audio:
    """A mono waveform (int16, or float in [-1, 1]) and its sample rate."""

    samples: np.ndarray
    sample_rate: int


@dataclass
class Text:
    """A text record (Markdown is rendered by VisualDL)."""

    text: str


Media = Image | Audio | Text


def as_media(item: Any, tag: str) -> Media:
    """``item`` as `Media` (a bare array is an image); a clear error otherwise."""
    if isinstance(item, (Image, Audio, Text)):
        return item
    if isinstance(item, np.ndarray):
        return Image(item)
    if isinstance(item, str):
        return Text(item)
    raise TypeError(
        f"media tag {tag!r}: expected an Image, Audio or Text (arenas.engine.media) or a numpy "
        f"image, got {type(item).__name__}"
    )


def image_uint8(img: np.ndarray) -> np.ndarray:
    """``[H, W, C]`` uint8 from uint8 or [0, 1] float, grey ``[H, W]`` given one channel."""
    a = np.asarray(img)
    if a.dtype != np.uint8:
        a = (np.clip(a, 0.0, 1.0) * 255).round().astype(np.uint8)
    return a[..., None] if a.ndim == 2 else a


def audio_float(samples: np.ndarray) -> np.ndarray:
    """Mono float32 in [-1, 1] from int16 or float samples."""
    a = np.asarray(samples).reshape(-1)
    if a.dtype == np.int16:
        return a.astype(np.float32) / 32768.0
    return np.clip(a.astype(np.float32), -1.0, 1.0)


def arena_media(arena: Any) -> dict[str, Media]:
    """Everything ``arena.media()`` returns, typed."""
    fn = getattr(arena, "media", None)
    items = (fn() or {}) if callable(fn) else {}
    return {tag: as_media(item, tag) for tag, item in items.items()}
