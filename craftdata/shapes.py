"""Captioned shapes: two coloured shapes in a spatial relation, drawn with OpenCV, with their
exact caption ("a red circle left of a blue square"). Offline and deterministic by seed.

Grammar: ``a <colour> <shape> <relation> a <colour> <shape>`` with colours red, green,
blue, yellow; shapes circle, square, triangle; relations "left of", "right of", "above",
"below". The two objects have different colours.

Decisions worth knowing:

- **One caption per image.** "a red circle left of a blue square" and "a blue square
  right of a red circle" describe the same picture, so a caption could not be predicted
  exactly from the image. Captions are canonical: the subject is the object whose colour
  comes first in ``red, green, blue, yellow``. That leaves 6 colour pairs x 9 shape pairs
  x 4 relations = 216 captions, all four relations included.
- **The obvious reading.** Along the named axis the objects never overlap (a gap of at
  least ``MIN_GAP`` px between their extents); across it they are nearly aligned (offset
  at most a quarter of the separation), so "left of" never looks like "above".
- **Compositional split.** Some (subject colour, subject shape, relation) triples, one
  per relation and chosen by seed, never occur in train or test: e.g. the model sees red
  circles and sees "above", but never a red circle above anything. Their captions form
  the ``compositional`` split; every word still occurs in training.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from paddlecraft.craftdata.digits import Dataset, Split
from paddlecraft.errors import ConfigError

__all__ = [
    "COLOURS",
    "RELATIONS",
    "SHAPES",
    "SHAPES_LABELS",
    "CaptionSplit",
    "ShapesData",
    "all_captions",
    "canonical_caption",
    "compositional_holdout",
    "draw_scene",
    "load_shapes",
    "load_shapes_classes",
    "parse_caption",
    "shapes_vocabulary",
]

#: colour name -> RGB; the order is the canonical subject order
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (30, 160, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 195, 20),
}
SHAPES: tuple[str, ...] = ("circle", "square", "triangle")
RELATIONS: tuple[str, ...] = ("left of", "right of", "above", "below")
MIN_RADIUS, MAX_RADIUS = 6, 10
MIN_GAP = 3  # px between the two objects' extents along the named axis
IMAGE_SIZE = 64

Obj = tuple[str, str]  # (colour, shape)
Scene = tuple[str, str, str, str, str]  # (colour1, shape1, relation, colour2, shape2)


HOLDOUT_STREAM = 0x5A  #: random-stream id: the held-out shape combinations
#: random-stream ids of the scenes drawn for each split: ``[seed, id]``
TRAIN_STREAM, TEST_STREAM, COMPOSITIONAL_STREAM = 1, 2, 3


def shapes_vocabulary() -> list[str]:
    """Every caption word, in a fixed order (the captioner's and listener's vocabulary)."""
    words = ["a", *COLOURS, *SHAPES]
    for rel in RELATIONS:
        for w in rel.split():
            if w not in words:
                words.append(w)
    return words


def caption_of(scene: Scene) -> str:
    """``a <c1> <s1> <relation> a <c2> <s2>``."""
    c1, s1, rel, c2, s2 = scene
    return f"a {c1} {s1} {rel} a {c2} {s2}"


def canonical_caption(scene: Scene) -> str:
    """The one caption of a scene: the subject is the object whose colour comes first."""
    c1, s1, rel, c2, s2 = scene
    order = list(COLOURS)
    if order.index(c1) > order.index(c2):
        flip = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
        return caption_of((c2, s2, flip[rel], c1, s1))
    return caption_of(scene)


def all_scenes() -> list[Scene]:
    """The 216 canonical scenes, in a fixed order."""
    order = list(COLOURS)
    out = []
    for c1, c2 in itertools.combinations(order, 2):
        for s1, rel, s2 in itertools.product(SHAPES, RELATIONS, SHAPES):
            out.append((c1, s1, rel, c2, s2))
    return out


def all_captions() -> list[str]:
    """The 216 canonical captions, in a fixed order."""
    return [caption_of(s) for s in all_scenes()]


def parse_caption(text: str) -> Scene | None:
    """The scene a caption describes, or None when it does not follow the grammar."""
    w = text.lower().split()
    if len(w) == 7 and w[3] in ("above", "below"):
        rel, rest = w[3], w[4:]
    elif len(w) == 8:
        rel, rest = f"{w[3]} {w[4]}", w[5:]
    else:
        return None
    if w[0] != "a" or rest[0] != "a" or rel not in RELATIONS:
        return None
    c1, s1, c2, s2 = w[1], w[2], rest[1], rest[2]
    if c1 not in COLOURS or c2 not in COLOURS or s1 not in SHAPES or s2 not in SHAPES:
        return None
    return (c1, s1, rel, c2, s2)


def compositional_holdout(seed: int) -> list[tuple[str, str, str]]:
    """(subject colour, subject shape, relation) triples kept out of training, one per relation.

    Subjects are drawn from red, green and blue (yellow is never a subject) so that each
    held-out triple removes several captions; the four triples use four different
    colour-shape pairs, so every pair is still seen as a subject with other relations.
    """
    rng = np.random.default_rng([seed, HOLDOUT_STREAM])
    subjects = [(c, s) for c in list(COLOURS)[:3] for s in SHAPES]
    picks = rng.choice(len(subjects), size=len(RELATIONS), replace=False)
    return [(*subjects[i], rel) for i, rel in zip(picks, RELATIONS)]


def _draw_shape(img: np.ndarray, shape: str, cx: float, cy: float, r: float, rgb) -> None:
    import cv2

    shift = 4  # sub-pixel coordinates (1/16 px) for smooth, seed-exact placement
    k = 1 << shift
    color = tuple(int(v) for v in rgb)
    if shape == "circle":
        cv2.circle(img, (round(cx * k), round(cy * k)), round(r * k), color, -1, cv2.LINE_AA, shift)
    elif shape == "square":
        h = 0.82 * r
        pts = np.array([[cx - h, cy - h], [cx + h, cy - h], [cx + h, cy + h], [cx - h, cy + h]])
        cv2.fillPoly(img, [np.round(pts * k).astype(np.int32)], color, cv2.LINE_AA, shift)
    else:  # triangle pointing up, circumradius r, centred on its bounding box
        h = r * 0.866
        pts = np.array([[cx, cy - r * 0.85], [cx + h, cy + r * 0.65], [cx - h, cy + r * 0.65]])
        cv2.fillPoly(img, [np.round(pts * k).astype(np.int32)], color, cv2.LINE_AA, shift)


def draw_scene(scene: Scene, rng: np.random.Generator, size: int = IMAGE_SIZE) -> np.ndarray:
    """An RGB uint8 image [size, size, 3] of ``scene`` on a light background."""
    c1, s1, rel, c2, s2 = scene
    r1, r2 = rng.uniform(MIN_RADIUS, MAX_RADIUS, 2)
    lo = 1.0  # border margin
    subject_low = rel in ("left of", "above")  # the subject has the smaller coordinate
    r_low, r_high = (r1, r2) if subject_low else (r2, r1)
    # along the named axis: extents apart by at least MIN_GAP, both inside the frame
    d = rng.uniform(r_low + r_high + MIN_GAP, size - 2 * lo - r_low - r_high)
    low = rng.uniform(lo + r_low, size - lo - r_high - d)
    along1, along2 = (low, low + d) if subject_low else (low + d, low)
    # across it: nearly aligned (offset at most a quarter of the separation, <= 6 px)
    off = rng.uniform(-1.0, 1.0) * min(d / 4.0, 6.0)
    rmax = max(r1, r2)
    base = rng.uniform(lo + rmax + max(0.0, -off), size - lo - rmax - max(0.0, off))
    across1, across2 = base, base + off
    if rel in ("left of", "right of"):
        (x1, y1), (x2, y2) = (along1, across1), (along2, across2)
    else:
        (x1, y1), (x2, y2) = (across1, along1), (across2, along2)
    bg = rng.integers(222, 250) + rng.integers(-6, 7, 3)
    img = np.empty((size, size, 3), np.uint8)
    img[:] = np.clip(bg, 0, 255).astype(np.uint8)
    for c, s, x, y, r in ((c1, s1, x1, y1, r1), (c2, s2, x2, y2, r2)):
        rgb = np.clip(np.array(COLOURS[c]) + rng.integers(-18, 19, 3), 0, 255)
        _draw_shape(img, s, x, y, r, rgb)
    noise = rng.integers(-4, 5, img.shape)
    return np.clip(img.astype(np.int16) + noise, 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class CaptionSplit:
    """Images (uint8 [N, H, W, 3] RGB) and their captions (``captions[i]`` describes ``images[i]``)."""

    images: np.ndarray
    captions: list[str]

    def __post_init__(self) -> None:
        if len(self.images) != len(self.captions):
            raise ValueError(
                f"CaptionSplit: {len(self.images)} images but {len(self.captions)} captions"
            )

    def __len__(self) -> int:
        return len(self.captions)


@dataclass(frozen=True)
class ShapesData:
    """Train / test / compositional splits, the vocabulary and the held-out triples."""

    train: CaptionSplit
    test: CaptionSplit
    compositional: CaptionSplit
    vocab: list[str]
    holdout: list[tuple[str, str, str]]
    name: str = "shapes"


def _split(scenes: list[Scene], n: int, rng: np.random.Generator, size: int) -> CaptionSplit:
    picks = rng.integers(0, len(scenes), n)
    images = np.empty((n, size, size, 3), np.uint8)
    caps = []
    for i, j in enumerate(picks):
        images[i] = draw_scene(scenes[j], rng, size)
        caps.append(caption_of(scenes[j]))
    return CaptionSplit(images, caps)


def load_shapes(
    seed: int = 0,
    n_train: int = 6000,
    n_test: int = 500,
    n_compositional: int = 500,
    image_size: int = IMAGE_SIZE,
) -> ShapesData:
    """Generate the captioned-shapes dataset (deterministic by ``seed``).

    ``train`` and ``test`` draw scenes (uniformly over the seen captions) and positions
    from independent streams of ``seed``; ``compositional`` holds only captions of the
    held-out (subject colour, subject shape, relation) triples, never seen in training.
    """
    if min(n_train, n_test, n_compositional) < 0:
        raise ValueError("load_shapes: split sizes must be >= 0")
    holdout = set(compositional_holdout(seed))
    scenes = all_scenes()
    seen = [s for s in scenes if (s[0], s[1], s[2]) not in holdout]
    unseen = [s for s in scenes if (s[0], s[1], s[2]) in holdout]
    return ShapesData(
        train=_split(seen, n_train, np.random.default_rng([seed, TRAIN_STREAM]), image_size),
        test=_split(seen, n_test, np.random.default_rng([seed, TEST_STREAM]), image_size),
        compositional=_split(
            unseen, n_compositional, np.random.default_rng([seed, COMPOSITIONAL_STREAM]), image_size
        ),
        vocab=shapes_vocabulary(),
        holdout=sorted(holdout),
    )


#: what `load_shapes_classes` can use as the class of an image
SHAPES_LABELS = ("subject", "relation", "caption")


def load_shapes_classes(
    seed: int = 0,
    n_train: int = 6000,
    n_test: int = 500,
    image_size: int = 32,
    label: str = "subject",
) -> Dataset:
    """The captioned shapes as a labelled image `Dataset` (e.g. for a GAN).

    Images become float32 [N, 3, image_size, image_size] in [0, 1] (drawn at 64 x 64, then
    ``cv2.INTER_AREA``); the class is read from the caption: ``subject`` (colour and shape
    of the caption's subject: 9 classes, yellow is never the subject), ``relation`` (left
    of, right of, above, below: 4) or ``caption`` (the 216 canonical captions).
    """
    import cv2

    if label not in SHAPES_LABELS:
        raise ConfigError(f"data.loader.label must be one of {SHAPES_LABELS}, got {label!r}")
    raw = load_shapes(seed=seed, n_train=n_train, n_test=n_test, n_compositional=0)
    subjects = [f"{c} {s}" for c in list(COLOURS)[:3] for s in SHAPES]
    captions = {c: i for i, c in enumerate(all_captions())}
    num_classes = {"subject": len(subjects), "relation": len(RELATIONS), "caption": len(captions)}

    def class_of(caption: str) -> int:
        words = caption.split()
        if label == "subject":
            return subjects.index(f"{words[1]} {words[2]}")
        if label == "relation":
            return RELATIONS.index(" ".join(words[3:-3]))
        return captions[caption]

    def convert(split: CaptionSplit) -> Split:
        imgs = split.images  # [N, 64, 64, 3] uint8
        if imgs.shape[1] != image_size:
            imgs = np.stack(
                [
                    cv2.resize(im, (image_size, image_size), interpolation=cv2.INTER_AREA)
                    for im in imgs
                ]
            )
        x = np.ascontiguousarray(imgs.transpose(0, 3, 1, 2), dtype=np.float32) / np.float32(255)
        return Split(x, np.array([class_of(c) for c in split.captions], np.int64))

    return Dataset(
        train=convert(raw.train),
        test=convert(raw.test),
        num_classes=num_classes[label],
        image_shape=(3, image_size, image_size),
        name=f"shapes-{label}",
    )
