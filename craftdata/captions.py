"""Your own captioned images: JSONL pairs or COCO captions JSON, images decoded lazily.

JSONL: one object per line, ``{"image": "img/1.jpg", "caption": "a red circle"}`` (or
``"captions": [...]``); an image may appear on several lines. COCO: the captions JSON
(``{"images": [{"id", "file_name"}], "annotations": [{"image_id", "caption"}]}``).
Image paths are relative to ``image_root`` (default: the annotation file's folder).

Every example is one (image, caption) pair; train/test are split by image (a seeded
fraction unless ``test_path`` names a second annotation file), so no image is in both.
The vocabulary is built from the training captions (`paddlecraft.encoders.vocab.Vocab`), or is
a pretrained tokenizer's (``tokenizer=`` a local ``tokenizer.json`` / ``vocab.txt``, read by
`paddlecraft.encoders.tokenizer.SubwordTokenizer`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.craftdata.badfiles import BadDataError, BadFiles, check_image_file, need_path
from paddlecraft.craftdata.images import ImageTransform, decode_image
from paddlecraft.craftdata.loader import LazySplit, held_out

__all__ = ["CaptionFileData", "CaptionFileSplit", "load_captions", "read_caption_file"]

log = logging.getLogger("paddlecraft.data")


SPLIT_STREAM = 0xCA9  #: random-stream id: the held-out images


def read_caption_file(path: str | os.PathLike) -> list[tuple[str, str]]:
    """``(image path as written, caption)`` pairs of a JSONL or COCO captions JSON file."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise BadDataError(
            f"data.path={str(path)!r}: no such file. Expected a JSONL file of "
            '{"image": ..., "caption": ...} lines or a COCO captions JSON'
        )
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json":
        try:
            coco = json.loads(text)
            names = {im["id"]: im["file_name"] for im in coco["images"]}
            return [(names[a["image_id"]], a["caption"]) for a in coco["annotations"]]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise BadDataError(
                f"{p}: not a COCO captions file ({type(e).__name__}: {e}); expected "
                '{"images": [{"id", "file_name"}], "annotations": [{"image_id", "caption"}]}'
            ) from e
    pairs = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            caps = row["captions"] if "captions" in row else [row["caption"]]
            pairs.extend((str(row["image"]), str(c)) for c in caps)
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise BadDataError(
                f"{p}, line {n}: expected a JSON object with 'image' and 'caption' (or "
                f"'captions'), got {line[:80]!r} ({type(e).__name__})"
            ) from e
    return pairs


@dataclass
class CaptionFileSplit(LazySplit):
    """(image, caption) pairs: ``images`` [M] unique files, ``y`` [P] image index per pair."""

    images: np.ndarray  #: absolute image paths, bytes [M]
    y: np.ndarray  #: int64 [P]: which image each caption describes
    captions: np.ndarray  #: utf-8 bytes [P]
    encode: Any = None  #: caption -> list of token ids (set by load_captions)
    max_len: int = 32  #: tokens per caption (padded/cut)
    transform: ImageTransform = field(default_factory=ImageTransform)

    def path(self, i: int) -> str:
        return os.fsdecode(self.images[self.y[i]])

    def caption(self, i: int) -> str:
        """The caption of pair ``i``."""
        return self.captions[i].decode("utf-8")

    def references(self) -> list[list[str]]:
        """Every caption of each image, by image index (for BLEU with several references)."""
        refs: list[list[str]] = [[] for _ in range(len(self.images))]
        for i in range(len(self.y)):
            refs[self.y[i]].append(self.caption(i))
        return refs

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        img = self.transform(decode_image(self.path(i), self.transform.channels), rng)
        ids = np.zeros(self.max_len, np.int64)
        tok = list(self.encode(self.caption(i)))[: self.max_len]
        ids[: len(tok)] = tok
        return img, ids, np.int64(self.y[i])  # [C, S, S], [L], image index

    def empty_item(self) -> tuple[np.ndarray, ...]:
        return (
            np.zeros(self.transform.shape, np.float32),
            np.zeros(self.max_len, np.int64),
            np.int64(0),
        )


@dataclass
class CaptionFileData:
    """Train/test caption splits plus the vocabulary (or tokenizer) and loader settings."""

    train: CaptionFileSplit
    test: CaptionFileSplit
    vocab: Any  #: encoders.vocab.Vocab, or an encoders.tokenizer.SubwordTokenizer
    image_shape: tuple[int, int, int]
    name: str
    workers: int = 2
    prefetch: int = 2
    bad_files: BadFiles = field(default_factory=BadFiles)
    tokenizer: str | None = None  #: the tokenizer file ``vocab`` was read from, if any

    @property
    def words(self) -> list[str] | str:
        """What the caption agents' ``words`` setting takes: the training captions' words
        (most frequent first, specials left out), or the tokenizer file (the agents read it)."""
        if self.tokenizer:
            return str(Path(self.tokenizer).expanduser().resolve())
        return list(self.vocab.itos[4:])


def _resolve(
    pairs: list[tuple[str, str]], root: Path, bad: BadFiles, source: Path
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique image paths, image index per pair, captions) with bad images dropped."""
    index: dict[str, int] = {}
    images: list[bytes] = []
    problems: dict[str, str | None] = {}
    pair_img, caps = [], []
    for rel, cap in pairs:
        full = str(root / rel)
        if full not in problems:
            problems[full] = (
                "is referred to by a caption but does not exist"
                if not os.path.isfile(full)
                else check_image_file(full)
            )
            if problems[full] is not None:
                bad.found(full, f"{problems[full]} (in {source})")
        if problems[full] is not None:
            continue
        if full not in index:
            index[full] = len(images)
            images.append(os.fsencode(full))
        pair_img.append(index[full])
        caps.append(cap.encode("utf-8"))
    if not caps:
        raise BadDataError(f"{source}: no usable (image, caption) pair")
    return np.array(images, bytes), np.array(pair_img, np.int64), np.array(caps, bytes)


def load_captions(
    path: str,
    test_path: str | None = None,
    image_root: str | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    channels: int = 3,
    image_size: int = 32,
    resize: str = "stretch",
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    max_len: int = 32,
    min_freq: int = 1,
    max_vocab: int | None = None,
    tokenizer: str | None = None,
    workers: int = 2,
    prefetch: int = 2,
    on_bad_file: str = "stop",
) -> CaptionFileData:
    """Image + caption pairs from JSONL or COCO JSON as lazy train/test splits (split by image).

    Every referenced image is checked first: a missing or damaged one raises
    `BadDataError` naming it (``on_bad_file="skip"``: its captions are dropped).
    """
    need_path(path, "captions")
    bad = BadFiles(on_bad_file)
    t = ImageTransform(channels, image_size, resize, mean, std, False)

    def read(where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = Path(where).expanduser()
        root = Path(image_root).expanduser() if image_root else src.parent
        return _resolve(read_caption_file(src), root, bad, src)

    images, y, caps = read(path)
    if test_path:
        t_images, t_y, t_caps = read(test_path)
    else:
        is_test = held_out(len(images), test_fraction, seed, SPLIT_STREAM, "image")
        (images, y, caps), (t_images, t_y, t_caps) = (
            _select(images, y, caps, ~is_test),
            _select(images, y, caps, is_test),
        )
    if tokenizer:
        vocab = _pretrained_tokenizer(tokenizer)

        def encode(text: str) -> list[int]:
            return vocab.encode(text, add_special_tokens=True)
    else:
        from paddlecraft.encoders.vocab import Vocab

        vocab = Vocab.build((c.decode("utf-8") for c in caps), min_freq, max_vocab)

        def encode(text: str) -> list[int]:
            return vocab.encode(text, add_bos=True, add_eos=True)

    def split(im: np.ndarray, yy: np.ndarray, cc: np.ndarray) -> CaptionFileSplit:
        return CaptionFileSplit(im, yy, cc, encode, max_len, t)

    return CaptionFileData(
        train=split(images, y, caps),
        test=split(t_images, t_y, t_caps),
        vocab=vocab,
        image_shape=t.shape,
        name=f"captions:{Path(path).name}",
        workers=workers,
        prefetch=prefetch,
        bad_files=bad,
        tokenizer=tokenizer or None,
    )


def _select(
    images: np.ndarray, y: np.ndarray, caps: np.ndarray, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    new = np.cumsum(keep) - 1  # old image index -> new
    pairs = keep[y]
    return images[keep], new[y[pairs]], caps[pairs]


def _pretrained_tokenizer(where: str) -> Any:
    """The project's subword tokenizer from a local ``tokenizer.json`` / ``vocab.txt`` (or folder)."""
    from paddlecraft.encoders.tokenizer import SubwordTokenizer

    try:
        return SubwordTokenizer.from_file(Path(where).expanduser())
    except (FileNotFoundError, ValueError) as e:
        raise BadDataError(
            f"data.tokenizer={where!r}: {e}. Give a local tokenizer.json or vocab.txt (or a "
            "folder holding one; nothing is downloaded), or leave it unset to build a "
            "vocabulary from the training captions"
        ) from e
