"""Minibatch iteration over in-memory numpy arrays."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["iterate_minibatches"]


def iterate_minibatches(
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    rng: np.random.Generator | None,
    drop_last: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(xb, yb)`` batches covering every example once, shuffled when ``rng`` is given.

    The order is a permutation drawn from ``rng`` (deterministic given its state), or the
    original order when ``rng`` is None. The last, smaller batch is skipped when ``drop_last``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = len(x)
    if len(y) != n:
        raise ValueError(f"x has {n} examples but y has {len(y)}")
    order = rng.permutation(n) if rng is not None else None
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        end = min(start + batch_size, n)
        if order is None:
            yield x[start:end], y[start:end]
        else:
            idx = order[start:end]
            yield x[idx], y[idx]
