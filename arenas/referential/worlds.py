"""What referential games talk about: objects with (or without) known attributes.

- `attribute_world`: every combination of ``n_attributes`` attributes with ``n_values``
  values, seen as concatenated one-hot vectors; a share of the *combinations* is held out
  (every single value still occurs in training).
- `egg_world`: the same objects split by EGG's compo_vs_generalization protocol: value 0
  of every attribute never occurs in training; the test split is the objects with exactly
  one 0, scored on their other attributes; a uniform share of the rest is held out too.
- `load_shape_objects`: one shape per image with its shape, colour, size and position
  (quadrant), drawn with the caption world's OpenCV shapes.
- `load_digit_objects`: scikit-learn's 8x8 digits, the digit as the one attribute.
- `world_from_data`: any dataset with ``.train.x`` / ``.test.x`` (e.g. your image
  folder); its objects have no attributes then, so the attribute measures are left out.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from paddlecraft.agents.settings import ConfigError

__all__ = [
    "ObjectSplit",
    "World",
    "attribute_world",
    "egg_world",
    "load_digit_objects",
    "load_shape_objects",
    "world_from_data",
]

SHAPE_ATTRIBUTES = ("shape", "colour", "size", "position")


ATTRIBUTE_WORLD_STREAM = 0xA77  #: random-stream id: the attribute world's held-out combinations
EGG_WORLD_STREAM = 0xE66  #: random-stream id: EGG split's uniform hold-out
SHAPE_OBJECTS_STREAM = 0x5A9E  #: random-stream id: the shape objects drawn


@dataclass(frozen=True)
class ObjectSplit:
    """Objects ``x`` [N, ...] float32 and their attribute values ``meanings`` int64 [N, A]
    (None when unknown); ``scored`` bool [N, A]: the attributes a reconstruction is judged
    on (None: all of them)."""

    x: np.ndarray
    meanings: np.ndarray | None = None
    scored: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.x)


@dataclass(frozen=True)
class World:
    """A train and a test split of objects, the names of their attributes, and further
    evaluated splits by name (``more``: each reported as ``<name>_accuracy``)."""

    train: ObjectSplit
    test: ObjectSplit
    attributes: tuple[str, ...] = ()
    name: str = "objects"
    more: dict[str, ObjectSplit] = field(default_factory=dict)


def _one_hot(meanings: np.ndarray, n_values: int) -> np.ndarray:
    n, a = meanings.shape
    x = np.zeros((n, a * n_values), np.float32)
    x[np.arange(n)[:, None], np.arange(a) * n_values + meanings] = 1.0
    return x  # [N, A * V]


def attribute_world(n_attributes: int, n_values: int, holdout: float, seed: int) -> World:
    """All ``n_values ** n_attributes`` objects; ``holdout`` of the combinations form the test
    split, chosen by ``seed`` so that every value of every attribute stays in training."""
    if n_attributes < 1 or n_values < 2:
        raise ConfigError(
            f"arena.n_attributes >= 1 and arena.n_values >= 2 needed, got {n_attributes}, {n_values}"
        )
    total = n_values**n_attributes
    if total > 200_000:
        raise ConfigError(
            f"arena.n_values ** arena.n_attributes = {total} objects: too many to enumerate "
            "(keep it under 200000)"
        )
    if not 0.0 <= holdout < 1.0:
        raise ConfigError(f"arena.holdout is a share of combinations in [0, 1), got {holdout}")
    every = np.array(list(itertools.product(range(n_values), repeat=n_attributes)), np.int64)
    rng = np.random.default_rng([seed, ATTRIBUTE_WORLD_STREAM])
    want = max(1, int(round(holdout * total))) if holdout > 0 else 0
    counts = np.zeros((n_attributes, n_values), np.int64)
    for m in every:
        counts[np.arange(n_attributes), m] += 1
    test = []
    for i in rng.permutation(total):
        if len(test) == want:
            break
        m = every[i]
        if np.all(counts[np.arange(n_attributes), m] > 1):  # the value stays in training
            counts[np.arange(n_attributes), m] -= 1
            test.append(i)
    if not test:
        raise ConfigError(
            f"arena.holdout={holdout} holds out no combination of {total} objects (the headline "
            "is held-out accuracy): raise arena.holdout, e.g. 0.1"
        )
    is_test = np.zeros(total, bool)
    is_test[test] = True
    tr, te = every[~is_test], every[is_test]
    return World(
        ObjectSplit(_one_hot(tr, n_values), tr),
        ObjectSplit(_one_hot(te, n_values), te),
        tuple(f"attribute_{i}" for i in range(n_attributes)),
        "attributes",
    )


def egg_world(n_attributes: int, n_values: int, holdout: float, seed: int) -> World:
    """EGG compo_vs_generalization's split (``data.split_holdout`` + ``split_train_test``).

    Objects with no attribute at value 0 are the training pool; ``holdout`` of them, drawn
    by ``seed``, form the ``uniform`` split (unseen combinations of seen values). The test
    split is every object with exactly one attribute at 0 (a value never seen in training),
    judged on its other attributes only (``scored``), as EGG's generalisation hold-out;
    objects with two or more 0s are left out, as there.
    """
    if n_attributes < 2 or n_values < 3:
        raise ConfigError(
            "arena.split=egg needs arena.n_attributes >= 2 and arena.n_values >= 3 (value 0 "
            f"is held out and the other attributes are scored), got {n_attributes}, {n_values}"
        )
    if not 0.0 < holdout < 1.0:
        raise ConfigError(
            f"arena.holdout: with arena.split=egg the uniform hold-out share in (0, 1), e.g. "
            f"0.1 as EGG's, got {holdout}"
        )
    total = n_values**n_attributes
    if total > 200_000:
        raise ConfigError(
            f"arena.n_values ** arena.n_attributes = {total} objects: too many to enumerate "
            "(keep it under 200000)"
        )
    every = np.array(list(itertools.product(range(n_values), repeat=n_attributes)), np.int64)
    zeros = (every == 0).sum(1)  # [N]
    pool, gen = every[zeros == 0], every[zeros == 1]
    rng = np.random.default_rng([seed, EGG_WORLD_STREAM])
    order = rng.permutation(len(pool))
    n_uniform = int(holdout * len(pool))  # EGG: int(p_hold_out * n)
    uni, tr = pool[np.sort(order[:n_uniform])], pool[np.sort(order[n_uniform:])]
    return World(
        ObjectSplit(_one_hot(tr, n_values), tr),
        ObjectSplit(_one_hot(gen, n_values), gen, gen != 0),
        tuple(f"attribute_{i}" for i in range(n_attributes)),
        "attributes (EGG split)",
        {"uniform": ObjectSplit(_one_hot(uni, n_values), uni)},
    )


@dataclass(frozen=True)
class ObjectData:
    """What the loaders here return: a `World` wrapped as a data loader's result."""

    world: World


def _draw_object(m: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    from paddlecraft.craftdata.shapes import COLOURS, SHAPES, _draw_shape

    shape, colour, big, quadrant = (int(v) for v in m)
    img = np.empty((size, size, 3), np.uint8)
    img[:] = np.clip(rng.integers(222, 250) + rng.integers(-6, 7, 3), 0, 255)
    r = size * (0.2 if big else 0.11)
    cx = size * (0.27 if quadrant % 2 == 0 else 0.73) + rng.uniform(-0.04, 0.04) * size
    cy = size * (0.27 if quadrant < 2 else 0.73) + rng.uniform(-0.04, 0.04) * size
    rgb = np.clip(np.array(list(COLOURS.values())[colour]) + rng.integers(-18, 19, 3), 0, 255)
    _draw_shape(img, SHAPES[shape], cx, cy, r, rgb)
    noise = rng.integers(-4, 5, img.shape)
    return np.clip(img.astype(np.int16) + noise, 0, 255).astype(np.uint8)


def load_shape_objects(
    n_train: int = 3000, n_test: int = 600, image_size: int = 32, seed: int = 0
) -> ObjectData:
    """Images [N, 3, S, S] in [0, 1] of one shape each, attributes (shape 3, colour 4,
    size 2, quadrant 4) drawn uniformly by ``seed``; test images are new drawings."""
    rng = np.random.default_rng([seed, SHAPE_OBJECTS_STREAM])
    levels = np.array([3, 4, 2, 4])

    def split(n: int) -> ObjectSplit:
        meanings = (rng.random((n, 4)) * levels).astype(np.int64)  # [N, 4]
        imgs = np.stack([_draw_object(m, rng, image_size) for m in meanings])
        x = imgs.transpose(0, 3, 1, 2).astype(np.float32) / 255.0  # [N, 3, S, S]
        return ObjectSplit(np.ascontiguousarray(x), meanings)

    return ObjectData(World(split(n_train), split(n_test), SHAPE_ATTRIBUTES, "shapes"))


def load_digit_objects(seed: int = 0, image_size: int = 8) -> ObjectData:
    """scikit-learn's digits [N, 1, S, S]; the meaning of an image is its digit."""
    from paddlecraft.craftdata import load_digits

    d = load_digits(seed=seed, image_size=image_size)
    return ObjectData(
        World(
            ObjectSplit(d.train.x, d.train.y[:, None].astype(np.int64)),
            ObjectSplit(d.test.x, d.test.y[:, None].astype(np.int64)),
            ("digit",),
            "digits",
        )
    )


def world_from_data(data: Any) -> World:
    """A `World` from a data loader's result: ours as is; any dataset with ``.train.x``
    and ``.test.x`` (an image folder loaded ``in_memory``) without attributes."""
    if isinstance(data, ObjectData):
        return data.world
    if isinstance(data, World):
        return data
    train, test = getattr(data, "train", None), getattr(data, "test", None)
    if train is None or test is None or not hasattr(train, "x") or not hasattr(test, "x"):
        raise ConfigError(
            "the referential arena needs a data config whose loader gives .train.x and .test.x "
            "arrays (data=referential_shapes, data=referential_digits, or data=image_folder "
            "data.loader.in_memory=true)"
        )
    return World(
        ObjectSplit(np.asarray(train.x, np.float32)),
        ObjectSplit(np.asarray(test.x, np.float32)),
        (),
        getattr(data, "name", "data"),
    )
