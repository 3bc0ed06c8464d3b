"""Dataset containers and the scikit-learn 8x8 digits loader (ships with scikit-learn, offline)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Dataset", "Split", "load_digits", "stratified_split"]


@dataclass(frozen=True)
class Split:
    """A pair of aligned arrays: inputs ``x`` (first axis = examples) and int64 labels ``y``."""

    x: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        if len(self.x) != len(self.y):
            raise ValueError(f"Split: x has {len(self.x)} examples but y has {len(self.y)}")

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class Dataset:
    """A train/test pair of splits plus metadata (class count, (C, H, W) image shape, name).

    ``image_shape`` is the per-example image shape even when the splits hold flattened vectors.
    """

    train: Split
    test: Split
    num_classes: int
    image_shape: tuple[int, int, int]
    name: str


def stratified_split(
    x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int
) -> tuple[Split, Split]:
    """Return a deterministic (train, test) split by ``seed``, stratified by label when possible.

    Stratification needs at least two examples per class and room for every class on both sides;
    otherwise the split is a plain seeded shuffle.
    """
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    counts = np.bincount(y) if len(y) else np.zeros(0, dtype=np.int64)
    present = counts[counts > 0]
    n_classes = len(present)
    n_test = int(np.ceil(test_fraction * len(y)))
    can_stratify = (
        n_classes > 0
        and present.min() >= 2
        and n_classes <= n_test
        and n_classes <= len(y) - n_test
    )
    x_tr, x_te, y_tr, y_te = train_test_split(
        x,
        y,
        test_size=test_fraction,
        random_state=seed,
        stratify=y if can_stratify else None,
    )
    return Split(x_tr, y_tr), Split(x_te, y_te)


def load_digits(
    seed: int = 0, test_fraction: float = 0.2, image_size: int = 8, flatten: bool = False
) -> Dataset:
    """Return scikit-learn's 1797 handwritten digits as a stratified, seeded train/test Dataset.

    Pixels are float32 in [0, 1] (raw values 0..16 divided by 16), shaped ``N x 1 x H x W`` or
    ``N x H*W`` when ``flatten``. ``image_size`` other than 8 resizes every image with
    ``cv2.resize(..., INTER_LINEAR)`` (28 gives MNIST-like 784-dim inputs). Labels are int64.
    Nothing is downloaded: the data ships inside scikit-learn.
    """
    from sklearn.datasets import load_digits as _sk_load_digits

    if image_size < 1:
        raise ValueError(f"image_size must be >= 1, got {image_size}")
    bunch = _sk_load_digits()
    images = np.asarray(bunch.images, dtype=np.float32) / np.float32(16.0)
    if image_size != 8:
        import cv2

        images = np.stack(
            [
                cv2.resize(img, (image_size, image_size), interpolation=cv2.INTER_LINEAR)
                for img in images
            ]
        )
        images = np.clip(images, 0.0, 1.0, out=images)
    images = images.astype(np.float32, copy=False)
    x = images.reshape(len(images), -1) if flatten else images[:, None, :, :]
    x = np.ascontiguousarray(x)
    y = np.asarray(bunch.target, dtype=np.int64)
    train, test = stratified_split(x, y, test_fraction, seed)
    return Dataset(
        train=train,
        test=test,
        num_classes=10,
        image_shape=(1, image_size, image_size),
        name="digits",
    )
