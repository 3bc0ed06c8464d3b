"""The contrastive arena on your own captioned images (``data=captions``).

`FileContrastiveArena` reads its splits with the data config's loader
(`paddlecraft.craftdata.load_captions`, which checks every file before training starts)
and decodes each image once into memory (float32 [C, S, S] after the loader's resize and
normalisation): every (image, caption) line is a training pair; an image with several
captions has several. Retrieval is measured on the first ``arena.data.n_test`` test
images against the test split's distinct captions (an image counts when one of its own
captions is its top-scored). Zero-shot classification needs a labelled folder the towers
never trained on (``arena.zeroshot.folder``: one sub-folder per class, the folder name is
the class name, underscores read as spaces); without one, no zero-shot measure is made.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents.instantiate import safe_instantiate
from paddlecraft.agents.settings import ConfigError
from paddlecraft.craftdata.captions import CaptionFileData
from paddlecraft.craftdata.images import IMAGE_EXTENSIONS, ImageTransform, decode_image

from .arena import ContrastiveArena
from .data import PairWorld
from .zeroshot import Labelled

__all__ = ["FileContrastiveArena", "load_labelled_folder"]

log = logging.getLogger("paddlecraft")


def _decode(paths: list[str], transform: ImageTransform) -> np.ndarray:
    out = np.zeros((len(paths), *transform.shape), np.float32)
    for i, p in enumerate(paths):
        out[i] = transform(decode_image(p, transform.channels), None)  # [C, S, S]
    return out


def load_labelled_folder(folder: str, transform: ImageTransform) -> Labelled:
    """Images of ``folder/<class>/*.png|jpg`` (sorted), decoded with ``transform``."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise ConfigError(
            f"arena.zeroshot.folder={folder!r} is not a folder; give one sub-folder per class"
        )
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    paths, labels = [], []
    for k, c in enumerate(classes):
        files = sorted(f for f in (root / c).iterdir() if f.suffix.lower() in IMAGE_EXTENSIONS)
        paths += [str(f) for f in files]
        labels += [k] * len(files)
    if len(classes) < 2 or len(paths) < 4:
        raise ConfigError(
            f"arena.zeroshot.folder={folder!r}: need at least 2 class sub-folders and 4 images, "
            f"found {len(classes)} classes and {len(paths)} images"
        )
    names = [c.replace("_", " ") for c in classes]
    return Labelled(_decode(paths, transform), np.array(labels, np.int64), names)


class FileContrastiveArena(ContrastiveArena):
    """The contrastive arena on the user's captioned images (``arena.files``).

    Args:
        agents: ``image`` and ``text``.
        seed: run seed.
        source: the dataset ``files`` builds, when already built (the app builds it once:
            the text tower's words come from it); None builds it here.
        **settings: `ContrastiveConfig` fields; ``files`` is required.
    """

    def __init__(
        self, agents: Mapping[str, Any], seed: int = 0, source: Any = None, **settings: Any
    ) -> None:
        self._given_source = source
        super().__init__(agents, seed=seed, **settings)

    def _build_world(self) -> PairWorld:
        c = self.cfg
        if not c.files:
            raise ConfigError("arena.files is not set: use data=captions")
        given, self._given_source = self._given_source, None
        src: CaptionFileData = given if given is not None else safe_instantiate(c.files)
        if not isinstance(src, CaptionFileData):
            raise ConfigError("arena=contrastive reads captioned images: use data=captions")
        self.source = src
        tr, te = src.train, src.test
        n_test = min(int(c.data.n_test), len(te.images))
        if n_test < 2:
            raise ConfigError(
                f"{n_test} test images: raise data.loader.test_fraction (or give data.test_path)"
            )
        refs = te.references()[:n_test]
        transform = tr.transform
        world = PairWorld(
            train_images=_decode([os.fsdecode(p) for p in tr.images], transform),
            train_image_of=np.asarray(tr.y, np.int64),
            train_texts=[tr.caption(i) for i in range(len(tr.y))],
            test_images=_decode([os.fsdecode(p) for p in te.images[:n_test]], transform),
            test_refs=refs,
            zeroshot=None,
        )
        if c.zeroshot.folder:
            zt = ImageTransform(
                channels=transform.channels,
                image_size=int(c.zeroshot.image_size or transform.image_size),
                resize=transform.resize, mean=transform.mean, std=transform.std,
            )  # fmt: skip
            world.zeroshot = load_labelled_folder(c.zeroshot.folder, zt)
        log.info(
            "captions: %d training pairs (%d images), %d test images in memory%s",
            world.n_pairs, len(world.train_images), n_test,
            f", zero-shot on {len(world.zeroshot)} images" if world.zeroshot else "",
        )  # fmt: skip
        return world
