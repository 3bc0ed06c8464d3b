"""A replay buffer of search-update samples (``arena.update.replay``).

AlphaZero and its descendants train on a window of recent self-play positions rather than
on each batch of games once: a search target costs ``simulations`` network calls to make
and one gradient step to use, so reusing it is nearly free. With ``arena.update.replay=N``
the search updates keep the last ``N`` samples (mirror images included) and each of their
gradient steps draws its minibatch uniformly from that window; an update makes as many
steps as ``arena.update.epochs`` passes over its own new samples would (at least one).

With ``arena.update.average_duplicates`` every minibatch's targets (``pi``, ``z``) are the means over all the window's
samples of the same position (the Oracle Connect Four series' "position averaging"): an
opening reached in hundreds of games trains toward its average result and search, not
toward one game's. The stored samples stay as played; the means are computed once per
update, from the window as it then is.

The buffer is part of the arena's checkpointed state (its arrays go to
``arena.safetensors``), so a resumed run draws the same minibatches as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from paddlecraft.errors import ConfigError

#: the arrays that are targets (averaged over duplicate positions); the rest are inputs
TARGETS = ("pi", "z")


def position_ids(obs: np.ndarray) -> tuple[np.ndarray, int]:
    """``(ids int64 [N], count)``: one id per distinct row of ``obs`` ``[N, ...]`` (rows are
    equal when every value is), ids in ``0..count-1``. Exact: binary planes are compared
    packed to bits, other observations byte for byte."""
    flat = np.ascontiguousarray(obs.reshape(len(obs), -1))
    if flat.dtype != np.bool_ and np.array_equal(flat, flat != 0):
        flat = np.packbits(flat != 0, axis=1)  # [N, ceil(D / 8)] uint8, same equality
    rows = np.ascontiguousarray(flat).view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1])))
    _, ids = np.unique(rows.ravel(), return_inverse=True)
    ids = ids.reshape(-1).astype(np.int64)
    return ids, int(ids.max()) + 1 if len(ids) else 0


def average_duplicates(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` with each target (`TARGETS`) replaced by its mean over the rows whose
    ``obs`` are the same position; inputs are returned as they are."""
    ids, count = position_ids(arrays["obs"])
    n = np.bincount(ids, minlength=count).astype(np.float64)  # [positions]
    out = dict(arrays)
    for key in TARGETS:
        if key not in arrays:
            continue
        v = np.asarray(arrays[key])
        cols = v.reshape(len(v), -1).astype(np.float64)  # [N, k]
        means = np.stack(
            [np.bincount(ids, cols[:, j], minlength=count) / n for j in range(cols.shape[1])], 1
        )  # [positions, k]
        out[key] = means[ids].reshape(v.shape).astype(v.dtype)
    return out


class ReplayBuffer:
    """The last ``capacity`` samples, a ring of arrays by name (``obs``, ``mask``, ``pi``,
    ``z``): rows are added in order and the oldest are overwritten first; ``len`` is the
    number of samples held."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"ReplayBuffer: capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.arrays: dict[str, np.ndarray] = {}
        self.size = 0  # rows holding samples
        self.head = 0  # the row the next sample goes to
        self.added = 0  # samples ever added

    def __len__(self) -> int:
        return self.size

    def add(self, samples: Mapping[str, np.ndarray]) -> None:
        """Append ``samples`` (arrays with one row per sample, the same names every time)."""
        n = len(next(iter(samples.values())))
        if not self.arrays:
            self.arrays = {
                k: np.zeros((self.capacity, *np.shape(v)[1:]), np.asarray(v).dtype)
                for k, v in samples.items()
            }
        if set(samples) != set(self.arrays):
            raise ValueError(
                f"ReplayBuffer: samples hold {sorted(samples)}, the buffer {sorted(self.arrays)}"
            )
        if n > self.capacity:  # only the newest fit
            samples = {k: np.asarray(v)[n - self.capacity :] for k, v in samples.items()}
            n = self.capacity
        rows = (self.head + np.arange(n)) % self.capacity
        for k, v in samples.items():
            self.arrays[k][rows] = v
        self.head = int((self.head + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)
        self.added += n

    def minibatches(
        self, steps: int, size: int, rng: np.random.Generator, average: bool = False
    ) -> Iterator[dict[str, np.ndarray]]:
        """``steps`` minibatches of ``size`` samples drawn uniformly (with replacement
        across minibatches, without within one when the buffer holds enough). With
        ``average`` their targets are the buffer's means per position
        (`average_duplicates`)."""
        w = len(self)
        size = min(size, w)
        arrays = {k: v[: self.size] for k, v in self.arrays.items()}  # in storage order
        if average:
            arrays = average_duplicates(arrays)
        for _ in range(steps):
            rows = rng.choice(w, size, replace=False)
            yield {k: v[rows] for k, v in arrays.items()}

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        """The filled rows in ring order and the write position (arrays: the checkpoint
        puts them in ``arena.safetensors``)."""
        return {
            "capacity": self.capacity,
            "size": self.size,
            "head": self.head,
            "added": self.added,
            "arrays": {k: v[: self.size].copy() for k, v in self.arrays.items()},
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore `state`; refuses a buffer saved with another capacity."""
        if int(state["capacity"]) != self.capacity:
            raise ConfigError(
                f"the checkpoint's replay buffer holds {state['capacity']} samples, this run's "
                f"arena.update.replay is {self.capacity}; resume with "
                f"arena.update.replay={state['capacity']}"
            )
        self.size, self.head = int(state["size"]), int(state["head"])
        self.added = int(state.get("added", self.size))
        self.arrays = {}
        for k, v in state["arrays"].items():
            v = np.asarray(v)
            full = np.zeros((self.capacity, *v.shape[1:]), v.dtype)
            full[: self.size] = v
            self.arrays[k] = full
