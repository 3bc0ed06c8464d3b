"""A replay buffer of search-update samples (``arena.update.replay``).

AlphaZero and its descendants train on a window of recent self-play positions rather than
on each batch of games once: a search target costs ``simulations`` network calls to make
and one gradient step to use, so reusing it is nearly free. With ``arena.update.replay=N``
the search updates keep the last ``N`` samples (mirror images included) and each of their
gradient steps draws its minibatch uniformly from that window; an update makes as many
steps as ``arena.update.epochs`` passes over its own new samples would (at least one).

With ``arena.update.average_duplicates`` every minibatch's targets (``pi``, ``z`` and the
moves-left, opponent-policy and ownership heads') are the means over all the window's
samples of the same position (the Oracle Connect Four series' "position averaging"): an
opening reached in hundreds of games trains toward its average result and search, not
toward one game's. The stored samples stay as played; the means are computed once per
update, from the window as it then is.

With ``arena.update.replay_min=C`` the window grows with the run instead of being full-size
from the start (KataGo's training window, Wu 2019; the Oracle series' growing window): after
``N`` samples have been added it is the newest ``min(N, C * (1 + beta * ((N / C) ** alpha -
1) / alpha))`` of them, alpha 0.75 and beta 0.4 (KataGo's), capped at ``replay``. Early
updates then train on the few recent games of a fast-changing policy rather than on the
stale first ones.

The buffer is part of the arena's checkpointed state (its arrays go to
``arena.safetensors``), so a resumed run draws the same minibatches as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from paddlecraft.errors import ConfigError

#: KataGo's growing-window exponent and slope (`window`)
GROWTH_ALPHA, GROWTH_BETA = 0.75, 0.4

#: the arrays that are targets (averaged over duplicate positions); the rest are inputs
TARGETS = ("pi", "z", "moves_left", "opponent_pi", "ownership")


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


def window(added: int, capacity: int, start: int = 0) -> int:
    """How many of the newest samples the window holds after ``added`` were added: all of
    them up to ``capacity`` where ``start`` is 0, else KataGo's power law from ``start``
    (`GROWTH_ALPHA`, `GROWTH_BETA`), never more than were added or than ``capacity``."""
    if start <= 0 or added <= start:
        return min(added, capacity)
    grown = start * (1 + GROWTH_BETA * ((added / start) ** GROWTH_ALPHA - 1) / GROWTH_ALPHA)
    return int(min(capacity, added, grown))


class ReplayBuffer:
    """The last ``capacity`` samples, a ring of arrays by name (``obs``, ``mask``, ``pi``,
    ``z``): rows are added in order and the oldest are overwritten first. With ``start``
    the minibatches come from a window of the newest samples that grows from ``start``
    (`window`); ``len`` is that window's size."""

    def __init__(self, capacity: int, start: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"ReplayBuffer: capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.start = int(start)
        self.arrays: dict[str, np.ndarray] = {}
        self.size = 0  # rows holding samples
        self.head = 0  # the row the next sample goes to
        self.added = 0  # samples ever added (the growing window's clock)

    def __len__(self) -> int:
        return window(self.added, self.size, self.start)

    def _window_rows(self) -> np.ndarray:
        """Rows of the newest `len` samples, oldest first ([W] int64)."""
        w = len(self)
        return (self.head - w + np.arange(w)) % self.capacity

    def window_sample(self, key: str, k: int, rng: np.random.Generator) -> np.ndarray:
        """``k`` rows of array ``key`` drawn uniformly (with replacement) from the window
        (Go-Exploit's archive starts, `.archive`); the buffer is not changed."""
        if not len(self):
            raise ValueError("ReplayBuffer.window_sample: the window is empty")
        rows = self._window_rows()[rng.integers(0, len(self), k)]
        return self.arrays[key][rows].copy()

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
        ``average`` their targets are the window's means per position
        (`average_duplicates`)."""
        w = len(self)
        size = min(size, w)
        if w == self.size:  # the whole buffer (in storage order, as before windows grew)
            arrays = {k: v[: self.size] for k, v in self.arrays.items()}
        else:
            rows = self._window_rows()
            arrays = {k: v[rows] for k, v in self.arrays.items()}
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
        # a checkpoint from before growing windows (whose window is always the whole
        # buffer): as many added as held
        self.added = int(state.get("added", self.size))
        self.arrays = {}
        for k, v in state["arrays"].items():
            v = np.asarray(v)
            full = np.zeros((self.capacity, *v.shape[1:]), v.dtype)
            full[: self.size] = v
            self.arrays[k] = full
