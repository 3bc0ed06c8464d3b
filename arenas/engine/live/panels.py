"""What an arena's `live_view` returns: panels the live page draws.

A view is ``{"panels": [...]}``; each panel is a JSON object with a ``kind`` the page
knows how to draw and a ``label``:

- ``image``: ``src``, a PNG data URL (a sample grid, a caption sheet, a chart);
- ``text``: ``text``, shown as preformatted lines (messages, a Markdown table);
- ``table``: ``columns`` and ``rows`` (lists of cells);
- ``audio``: ``src``, a WAV data URL;
- ``board``: ``rows``, ``cols``, ``cells`` (``[rows][cols]``: 0 empty, 1 the first
  player's stone, 2 the second's; row 0 on top), ``last`` (``[row, col]`` of the last
  stone or null) and a ``caption``.

Arenas that already render pictures for VisualDL (``media()``) reuse them through
`media_panels`.
"""

from __future__ import annotations

import base64
import io
import wave
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from ..media import Audio, Image, Text, as_media, audio_float, image_uint8

__all__ = [
    "audio_panel",
    "board_panel",
    "image_panel",
    "media_panels",
    "png_data_url",
    "table_panel",
    "text_panel",
]


def png_data_url(image: np.ndarray) -> str:
    """``data:image/png;base64,...`` of an image ``[H, W, C]`` / ``[H, W]`` (uint8 or [0, 1])."""
    img = image_uint8(np.asarray(image))  # [H, W, C] uint8
    if img.shape[2] == 3:
        img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
    elif img.shape[2] == 4:
        img = cv2.cvtColor(img, cv2.COLOR_RGBA2BGRA)
    ok, buf = cv2.imencode(".png", img)
    if not ok:
        raise RuntimeError("OpenCV could not encode the live view's image as PNG")
    return "data:image/png;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def image_panel(label: str, image: np.ndarray) -> dict[str, Any]:
    """An image panel (``image`` is HWC/HW, uint8 or float in [0, 1])."""
    return {"kind": "image", "label": label, "src": png_data_url(image)}


def text_panel(label: str, text: str) -> dict[str, Any]:
    """A panel of preformatted text."""
    return {"kind": "text", "label": label, "text": str(text)}


def table_panel(
    label: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[str, Any]:
    """A table; cells are shown as text."""
    return {
        "kind": "table",
        "label": label,
        "columns": [str(c) for c in columns],
        "rows": [[_cell(v) for v in row] for row in rows],
    }


def audio_panel(label: str, samples: np.ndarray, sample_rate: int) -> dict[str, Any]:
    """A mono waveform as a playable WAV data URL (16-bit PCM)."""
    pcm = (audio_float(samples) * 32767).round().astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
    src = "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return {"kind": "audio", "label": label, "src": src}


def board_panel(
    label: str, cells: np.ndarray, caption: str = "", last: tuple[int, int] | None = None
) -> dict[str, Any]:
    """A board ``cells [rows, cols]`` (0 empty, 1 first player, 2 second player)."""
    c = np.asarray(cells, np.int64)
    return {
        "kind": "board",
        "label": label,
        "rows": int(c.shape[0]),
        "cols": int(c.shape[1]),
        "cells": c.tolist(),
        "last": None if last is None else [int(last[0]), int(last[1])],
        "caption": caption,
    }


def media_panels(media: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Panels from an arena's ``media()`` (``{tag: Image | Text | Audio | array}``)."""
    panels = []
    for tag, item in media.items():
        m = as_media(item, tag)
        if isinstance(m, Image):
            panels.append(image_panel(tag, m.array))
        elif isinstance(m, Text):
            panels.append(text_panel(tag, m.text))
        elif isinstance(m, Audio):
            panels.append(audio_panel(tag, m.samples, m.sample_rate))
    return panels


def _cell(v: Any) -> Any:
    if isinstance(v, (np.integer, np.floating)):
        v = v.item()
    if isinstance(v, float):
        return round(v, 4)
    return v if isinstance(v, (int, str)) or v is None else str(v)
