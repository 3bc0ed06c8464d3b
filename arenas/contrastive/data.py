"""What a dual encoder learns from and is tested on: image/caption pairs, a labelled set.

The bundled data (`load_world`) are the captioned shapes (`paddlecraft.craftdata.load_shapes`):
training and held-out test images with their caption, and, for zero-shot classification,
the compositional split: images of (subject colour, subject shape, relation) combinations
that never occur in training, labelled by their caption (classes the towers never saw).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .zeroshot import Labelled

__all__ = ["ContrastiveDataConfig", "PairWorld", "load_world"]


@dataclass
class ContrastiveDataConfig:
    """Split sizes of the bundled captioned shapes."""

    n_train: int = 6000  #: training images (one caption each)
    n_test: int = 500  #: held-out images for retrieval
    n_compositional: int = 400  #: held-out-combination images for zero-shot (half probe-trains)


@dataclass
class PairWorld:
    """Training pairs, held-out images with their captions, and the zero-shot set."""

    train_images: np.ndarray  #: uint8 [M, H, W, C] or float32 [M, C, H, W]
    train_image_of: np.ndarray  #: int64 [P]: the image of each training pair
    train_texts: list[str]  #: [P] the caption of each training pair
    test_images: np.ndarray  #: [N, ...] as train_images
    test_refs: list[list[str]]  #: [N] each test image's own captions
    zeroshot: Labelled | None  #: labelled images the towers never trained on (None: none)

    @property
    def n_pairs(self) -> int:
        return len(self.train_texts)


def load_world(seed: int, data: ContrastiveDataConfig) -> PairWorld:
    """The captioned shapes as a `PairWorld` (deterministic by ``seed``)."""
    from paddlecraft.craftdata.shapes import load_shapes

    d = load_shapes(
        seed, n_train=data.n_train, n_test=data.n_test, n_compositional=data.n_compositional
    )
    comp = d.compositional
    classes = sorted(set(comp.captions))
    zs = Labelled(
        comp.images,
        np.array([classes.index(c) for c in comp.captions], np.int64),
        [c[2:] if c.startswith("a ") else c for c in classes],  # "red circle above a ..."
    )
    return PairWorld(
        train_images=d.train.images,
        train_image_of=np.arange(len(d.train), dtype=np.int64),
        train_texts=list(d.train.captions),
        test_images=d.test.images,
        test_refs=[[c] for c in d.test.captions],
        zeroshot=zs if len(comp) else None,
    )
