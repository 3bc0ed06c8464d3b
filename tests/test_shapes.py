"""Captioned shapes: deterministic by seed, grammar, canonical captions, geometry, compositional split."""

from __future__ import annotations

import numpy as np
import pytest

from paddlecraft.craftdata.shapes import (
    COLOURS,
    RELATIONS,
    SHAPES,
    all_captions,
    canonical_caption,
    compositional_holdout,
    draw_scene,
    load_shapes,
    parse_caption,
    shapes_vocabulary,
)


@pytest.fixture(scope="module")
def data():
    return load_shapes(seed=3, n_train=300, n_test=60, n_compositional=60)


def test_generator_is_deterministic_by_seed(data):
    again = load_shapes(seed=3, n_train=300, n_test=60, n_compositional=60)
    for a, b in ((data.train, again.train), (data.test, again.test)):
        assert np.array_equal(a.images, b.images) and a.captions == b.captions
    assert np.array_equal(data.compositional.images, again.compositional.images)
    other = load_shapes(seed=4, n_train=300, n_test=60, n_compositional=60)
    assert not np.array_equal(data.train.images, other.train.images)
    assert data.train.images.dtype == np.uint8 and data.train.images.shape == (300, 64, 64, 3)


def test_captions_follow_the_grammar_and_are_canonical():
    caps = all_captions()
    assert len(caps) == len(set(caps)) == 6 * 9 * 4  # colour pairs x shape pairs x relations
    order = list(COLOURS)
    for c in caps:
        scene = parse_caption(c)
        assert scene is not None, c
        c1, s1, rel, c2, s2 = scene
        assert order.index(c1) < order.index(c2)  # the subject's colour comes first
        assert c == f"a {c1} {s1} {rel} a {c2} {s2}"
    flipped = canonical_caption(("blue", "square", "right of", "red", "circle"))
    assert flipped == "a red circle left of a blue square"
    assert parse_caption("a red circle near a blue square") is None
    assert set(shapes_vocabulary()) == {
        "a",
        *COLOURS,
        *SHAPES,
        *(w for r in RELATIONS for w in r.split()),
    }


def test_compositional_split_is_never_seen_in_training(data):
    held = set(compositional_holdout(3))
    assert len(held) == len(RELATIONS) and {h[2] for h in held} == set(RELATIONS)
    seen = set(data.train.captions) | set(data.test.captions)
    for c in data.compositional.captions:
        assert parse_caption(c)[:3] in held
        assert c not in seen
    for c in seen:
        assert parse_caption(c)[:3] not in held
    train_words = {w for c in data.train.captions for w in c.split()}
    assert {w for c in data.compositional.captions for w in c.split()} <= train_words


def _extent(img: np.ndarray, rgb) -> tuple[np.ndarray, np.ndarray]:
    d = np.abs(img.astype(int) - np.array(rgb)).max(axis=-1)
    ys, xs = np.nonzero(d < 40)
    return xs, ys


def test_objects_never_overlap_along_the_named_axis():
    rng = np.random.default_rng(0)
    caps = all_captions()
    for i in range(120):
        scene = parse_caption(caps[(i * 37) % len(caps)])
        img = draw_scene(scene, rng)
        (x1, y1), (x2, y2) = _extent(img, COLOURS[scene[0]]), _extent(img, COLOURS[scene[3]])
        assert len(x1) > 20 and len(x2) > 20, scene  # both objects visible
        rel = scene[2]
        if rel == "left of":
            assert x1.max() < x2.min(), scene
        elif rel == "right of":
            assert x1.min() > x2.max(), scene
        elif rel == "above":
            assert y1.max() < y2.min(), scene
        else:
            assert y1.min() > y2.max(), scene
        # across the named axis the objects are nearly aligned: the caption is the obvious reading
        along = (
            (x1.mean() - x2.mean()) if rel in ("left of", "right of") else (y1.mean() - y2.mean())
        )
        across = (
            (y1.mean() - y2.mean()) if rel in ("left of", "right of") else (x1.mean() - x2.mean())
        )
        assert abs(across) < abs(along), scene
