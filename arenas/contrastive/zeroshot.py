"""Zero-shot classification by prompts, beside a linear probe on the same image features.

A labelled image set the towers never trained on is split in two (seeded): the probe
(scikit-learn ``LogisticRegression``) learns from the first half's image embeddings; both
are scored on the second half. Zero-shot: each class name goes into the prompt template
(``"a photo of a {label}"``), the text tower embeds the prompts, and an image takes the
class whose prompt is most similar (cosine) to its embedding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .metrics import cosine

__all__ = ["Labelled", "linear_probe", "split_halves", "zero_shot"]

HALVES_STREAM = 0x25  #: random-stream id: the labelled set's probe / evaluation halves


@dataclass
class Labelled:
    """Images (uint8 [N, H, W, C] or float [N, C, H, W]), class index per image, class names."""

    images: np.ndarray
    labels: np.ndarray  # int64 [N]
    classes: list[str]

    def __len__(self) -> int:
        return len(self.labels)


def split_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded split of ``range(n)``: (probe training indices, evaluation indices)."""
    order = np.random.default_rng([seed, HALVES_STREAM]).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2 :])


def prompts(classes: Sequence[str], template: str) -> list[str]:
    """``template`` with each class name in place of ``{label}``."""
    return [template.replace("{label}", c) for c in classes]


def zero_shot(image_emb: np.ndarray, prompt_emb: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy of taking, for each image [N, D], the class of its most similar prompt [C, D]."""
    if len(labels) == 0:
        return float("nan")
    return float(np.mean(cosine(image_emb, prompt_emb).argmax(axis=1) == labels))


def linear_probe(
    train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray
) -> float:
    """Test accuracy of a logistic regression on (unit-norm) image features."""
    from sklearn.linear_model import LogisticRegression

    if len(test_y) == 0 or len(np.unique(train_y)) < 2:
        return float("nan")

    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    probe = LogisticRegression(max_iter=2000, C=10.0)
    probe.fit(unit(train_x), train_y)
    return float(np.mean(probe.predict(unit(test_x)) == test_y))
