"""What a POSTed sample may be, checked before anything is stored.

A sample is a JSON object:

    {"image": "<base64 PNG or JPEG>", "label": "3"}          arena=classify
    {"pixels": [[0.0, 0.5, ...], ...], "label": 3}            floats in [0, 1], [H][W] or [C][H][W]
    {"image": "...", "caption": "a red circle left of a blue square"}   arena=caption
    optional "index": the sample's position in the stream (a resend of a stored one is refused)

The image must already have the run's ``data.channels`` and ``data.image_size`` (the run
never resizes what it learns from; ``paddlecraft feed`` resizes files as ``data=image_folder``
does). A label is a class name or its index. Every refusal is a `SampleError` whose
``status`` is the HTTP code the route answers with.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import numpy as np

from paddlecraft.craftdata.stream import StreamData
from paddlecraft.errors import PaddleCraftError

__all__ = ["MAX_CAPTION_CHARS", "SampleError", "parse_body", "parse_image", "parse_sample"]

MAX_CAPTION_CHARS = 1000  #: a longer caption is refused


class SampleError(PaddleCraftError, ValueError):
    """A refused request: ``status`` is the HTTP code (400 malformed, 409 out of turn,
    413 too large, 422 does not fit the run)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object (400 otherwise)."""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise SampleError("the request body is not JSON") from None
    if not isinstance(obj, dict):
        raise SampleError(f"the request body must be a JSON object, got {type(obj).__name__}")
    return obj


def _decode_png(text: Any) -> np.ndarray:
    import cv2

    if not isinstance(text, str):
        raise SampleError('"image" must be a base64 string of PNG or JPEG bytes')
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SampleError('"image" is not valid base64') from None
    img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise SampleError('"image" does not decode as PNG or JPEG')
    scale = 65535.0 if img.dtype == np.uint16 else 255.0
    if img.ndim == 2:
        chw = img[None]
    else:
        if img.shape[2] == 3:
            img = img[:, :, ::-1]  # OpenCV's BGR -> RGB
        elif img.shape[2] == 4:
            img = img[:, :, [2, 1, 0, 3]]
        chw = np.transpose(img, (2, 0, 1))
    return (chw.astype(np.float32) / np.float32(scale)).astype(np.float32)


def _pixels(value: Any) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise SampleError(
            '"pixels" must be a nested list of numbers ([H][W] or [C][H][W])'
        ) from None
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise SampleError(f'"pixels" must be [H][W] or [C][H][W], got {arr.ndim} dimensions')
    if not np.isfinite(arr).all() or arr.min(initial=0.0) < 0.0 or arr.max(initial=0.0) > 1.0:
        raise SampleError('"pixels" must be finite numbers in [0, 1]', 422)
    return arr


def parse_image(obj: dict[str, Any], spec: StreamData) -> np.ndarray:
    """The sample's image as float32 [C, H, W] in [0, 1], checked against the run's shape."""
    if ("image" in obj) == ("pixels" in obj):
        raise SampleError('a sample needs exactly one of "image" (base64 PNG/JPEG) or "pixels"')
    img = _decode_png(obj["image"]) if "image" in obj else _pixels(obj["pixels"])
    c, h, w = img.shape
    want = spec.image_shape
    if c != spec.channels:
        raise SampleError(
            f"the image has {c} channel(s); this run takes {spec.channels} (data.channels): "
            "convert it (paddlecraft feed does)",
            422,
        )
    if (h, w) != want[1:]:
        raise SampleError(
            f"the image is {h}x{w}; this run takes {want[1]}x{want[2]} (data.image_size): "
            "resize it (paddlecraft feed does)",
            422,
        )
    return np.ascontiguousarray(img, dtype=np.float32)


def _label(value: Any, spec: StreamData) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SampleError('"label" must be a class name (string) or its index (integer)')
    if isinstance(value, int):
        if 0 <= value < len(spec.classes):
            return value
    elif value in spec.classes:
        return spec.classes.index(value)
    shown = list(spec.classes) if len(spec.classes) <= 20 else f"{len(spec.classes)} names"
    raise SampleError(
        f"unknown label {value!r}: this run's classes are {shown} (data.loader.classes), or "
        f"an index 0..{len(spec.classes) - 1}",
        422,
    )


def _caption(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SampleError('"caption" must be a non-empty string')
    if len(value) > MAX_CAPTION_CHARS:
        raise SampleError(f'"caption" is longer than {MAX_CAPTION_CHARS} characters', 422)
    return " ".join(value.split())


def parse_sample(obj: dict[str, Any], spec: StreamData) -> tuple[dict[str, Any], int | None]:
    """``({"image": [C, H, W], "label": int | "caption": str}, index or None)``."""
    known = {"image", "pixels", "label", "caption", "index"}
    extra = sorted(set(obj) - known)
    if extra:
        raise SampleError(f"unknown field(s) {extra}; a sample has {sorted(known)}")
    target = "label" if spec.kind == "labels" else "caption"
    other = "caption" if target == "label" else "label"
    if target not in obj:
        raise SampleError(f'the sample has no "{target}" (this run streams {spec.kind})')
    if other in obj:
        raise SampleError(f'"{other}" does not fit this run: it streams {spec.kind}', 422)
    index = obj.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise SampleError('"index" must be a non-negative integer')
    arrays: dict[str, Any] = {"image": parse_image(obj, spec)}
    if target == "label":
        arrays["label"] = np.int64(_label(obj["label"], spec))
    else:
        arrays["caption"] = np.str_(_caption(obj["caption"]))
    return arrays, index
