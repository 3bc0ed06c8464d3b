"""Writers of small data folders for the reader tests (PNG, JPEG, WAV, FLAC, JSONL, COCO, CSV)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np


def write_image(path: Path, rgb: np.ndarray) -> Path:
    """Write an RGB (or grey [H, W]) uint8 image; the format follows the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    img = rgb if rgb.ndim == 2 else cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    assert cv2.imwrite(str(path), img)
    return path


def class_image(label: int, seed: int, size: tuple[int, int] = (12, 12)) -> np.ndarray:
    """An RGB image whose mean colour tells its class (learnable), with seeded noise."""
    rng = np.random.default_rng([label, seed])
    base = np.array([[200, 30, 30], [30, 200, 30], [30, 30, 200]][label % 3], np.float64)
    img = base + rng.normal(0, 20, (*size, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def image_folder(root: Path, per_class: int = 8, classes: int = 3) -> Path:
    """``root/<class>/*.png|jpg``: PNG and JPEG mixed, sizes varying, one grey image."""
    for c in range(classes):
        for k in range(per_class):
            ext = ".jpg" if k % 3 == 0 else ".png"
            size = (12 + k % 4, 12 + (k * 3) % 5)
            img = class_image(c, k, size)
            if k == 1:
                img = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
            write_image(root / f"class_{c}" / f"img_{k:03d}{ext}", img)
    return root


def truncate(path: Path, keep: float = 0.5) -> Path:
    """Cut a file to ``keep`` of its length (a partial copy)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def damage_png_pixels(path: Path) -> Path:
    """Zero bytes inside the image data, keeping the signature and the IEND chunk."""
    b = bytearray(path.read_bytes())
    i = b.find(b"IDAT")
    b[i + 10 : i + 30] = b"\x00" * 20
    path.write_bytes(bytes(b))
    return path


def tone(seconds: float, rate: int, freq: float = 440.0) -> np.ndarray:
    """A float32 sine in [-0.5, 0.5]."""
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def write_audio(path: Path, x: np.ndarray, rate: int) -> Path:
    """WAV or FLAC (by suffix), 16-bit, through soundfile."""
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), x, rate, subtype="PCM_16")
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_coco(path: Path, files: list[str], captions: list[list[str]]) -> Path:
    images = [{"id": 100 + i, "file_name": f} for i, f in enumerate(files)]
    anns = [
        {"id": k, "image_id": 100 + i, "caption": c}
        for k, (i, c) in enumerate((i, c) for i, cs in enumerate(captions) for c in cs)
    ]
    path.write_text(json.dumps({"images": images, "annotations": anns}))
    return path
