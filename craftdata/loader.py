"""Minibatches in a (seed, epoch) order, from memory or decoded lazily in worker processes.

`BatchLoader` serves both kinds of split. An in-memory `Split`
is indexed directly (the same batches `iterate_minibatches` gives). A
`LazySplit` (files on disk) is decoded by ``paddle.io.DataLoader`` workers, which
start with each pass (forked: cheap) and prefetch ``prefetch`` batches each; only the file list and
the labels live in memory, so memory does not grow with the number of files.

The order of an epoch is ``np.random.default_rng([seed, epoch]).permutation(n)`` (the
arenas' ``epoch_rng``), cut into batches; ``epoch(e, start=k)`` begins at batch ``k``
without decoding the batches before it, so a resumed run continues exactly where the
interrupted one stopped. Random augmentation draws from ``default_rng([seed, epoch, i])``
per example ``i``: the same in any worker, so workers never change the result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from paddlecraft.craftdata.badfiles import BadDataError, BadFiles
from paddlecraft.errors import ConfigError

__all__ = ["BatchLoader", "LazySplit", "Shard", "describe_skips", "held_out"]

log = logging.getLogger("paddlecraft.data")


class LazySplit:
    """A split read from files on demand: subclasses implement `path` and `load`.

    ``y`` holds one label (or target index) per example, in memory.
    """

    y: np.ndarray
    #: whether `load` draws from its ``rng`` (random augmentation)
    augments: bool = False

    def __len__(self) -> int:
        return len(self.y)

    def path(self, i: int) -> str:
        """The file example ``i`` is read from (for messages)."""
        raise NotImplementedError

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        """Example ``i`` as a tuple of arrays; raise ``ValueError(problem)`` for a bad file.

        ``rng`` (None when not training) is for random augmentation.
        """
        raise NotImplementedError

    def collate(self, items: Sequence[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        """A batch from examples (default: stack each field)."""
        return tuple(np.stack(f) for f in zip(*items))

    def empty_item(self) -> tuple[np.ndarray, ...]:
        """A placeholder for a bad example (dropped from its batch by the loader)."""
        raise NotImplementedError


class _Examples:
    """What the DataLoader workers index: one whole batch per key, (epoch, indices) ->
    (ok [B], *fields); fetching batches, not examples, keeps the per-item traffic low."""

    def __init__(self, split: LazySplit, seed: int, augment: bool) -> None:
        self.split, self.seed = split, seed
        self.augment = augment and split.augments

    def __len__(self) -> int:
        return len(self.split)

    def item(self, epoch: int, i: int) -> tuple[np.ndarray, ...]:
        """(ok, *fields) of example ``i``; a bad file gives ok=0 and a placeholder."""
        rng = np.random.default_rng([self.seed, epoch, i]) if self.augment else None
        try:
            return (np.int8(1), *self.split.load(i, rng))
        except ValueError:  # reported by the main process, which knows the policy
            return (np.int8(0), *self.split.empty_item())

    def __getitem__(self, key: tuple[int, np.ndarray]) -> tuple[np.ndarray, ...]:
        epoch, idx = key
        items = [self.item(epoch, int(i)) for i in idx]
        ok = np.array([it[0] for it in items], np.int8)
        return (ok, *self.split.collate([it[1:] for it in items]))


class _Batches:
    """The batch sampler: one key per batch, (epoch, indices), made as the workers ask."""

    def __init__(self) -> None:
        self.epoch = 0
        self.batches: list[np.ndarray] = []  # index arrays (views of one permutation)

    def __iter__(self) -> Iterator[list[tuple[int, np.ndarray]]]:
        for b in self.batches:
            yield [(self.epoch, b)]

    def __len__(self) -> int:
        return len(self.batches)


class Shard(tuple):
    """One process's part of a global batch (data-parallel): the fields' rows
    ``rank::world`` and ``share``, their number over the global batch's rows (the weight of
    this process's gradient in the all-reduce)."""

    share: float

    def __new__(cls, fields: Sequence[np.ndarray], share: float) -> Shard:
        out = super().__new__(cls, fields)
        out.share = float(share)
        return out


class BatchLoader:
    """Batches of a split in a (seed, epoch) order; lazily decoded by workers for files.

    Args:
        split: an in-memory ``Split`` (``.x``, ``.y``) or a `LazySplit`.
        batch_size: examples per batch (the last one may be smaller unless ``drop_last``).
        seed: the run seed; the order of epoch ``e`` is a function of ``(seed, e)`` only.
        shuffle: permute each epoch (training); False keeps the split's order (evaluation).
        workers: decoding processes for a lazy split (0: decode in this process).
        prefetch: batches each worker prepares ahead.
        bad_files: the ``on_bad_file`` policy and skip log shared with the dataset's scan.
        drop_last: leave out the last, smaller batch.
        shard: ``(rank, world)`` for data-parallel training: each batch is this process's
            rows ``rank::world`` of the global batch, a `Shard` with its ``share``,
            and only those rows are read and decoded. (A bad file left out of a batch lowers
            the share of the process that met it: the step then weights the surviving rows
            as if the batch had its full size.)
        minibatches: each batch is this many equal minibatches read at once (the GAN's
            ``n_critic`` critic updates per step); a shard takes its rows ``rank::world`` of
            each minibatch, so its batch is ``minibatches`` equal local minibatches in turn.
    """

    def __init__(
        self,
        split: Any,
        batch_size: int,
        seed: int = 0,
        shuffle: bool = True,
        workers: int = 0,
        prefetch: int = 2,
        bad_files: BadFiles | None = None,
        drop_last: bool = False,
        shard: tuple[int, int] | None = None,
        minibatches: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if minibatches < 1 or batch_size % minibatches:
            raise ValueError(
                f"batch_size {batch_size} must be a multiple of minibatches {minibatches} (>= 1)"
            )
        if workers < 0:
            raise ConfigError(f"data.workers must be >= 0, got {workers}")
        self.split, self.batch_size, self.seed = split, int(batch_size), int(seed)
        self.shuffle, self.workers, self.prefetch = shuffle, int(workers), int(prefetch)
        self.bad_files = bad_files if bad_files is not None else BadFiles()
        self.drop_last = drop_last
        self.shard = shard if shard is not None and shard[1] > 1 else None
        self.minibatches = int(minibatches)
        self.lazy = isinstance(split, LazySplit)
        self._loader: Any = None
        self._sampler = _Batches()

    def __len__(self) -> int:
        n = len(self.split)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def order(self, epoch: int) -> np.ndarray:
        """The example order of ``epoch`` (a function of ``(seed, epoch)``)."""
        n = len(self.split)
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng([self.seed, epoch]).permutation(n)

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[np.ndarray, ...]]:
        """Batches ``start, start+1, ...`` of ``epoch``; earlier ones are never read."""
        order = self.order(epoch)
        idx = [
            order[b * self.batch_size : (b + 1) * self.batch_size] for b in range(start, len(self))
        ]
        if self.shard is None:
            return self._read(epoch, idx)
        rows = [len(i) for i in idx]  # of each global batch
        mine = self._read(epoch, [self._rows(i) for i in idx])
        return (Shard(f, len(f[0]) / n if n else 0.0) for f, n in zip(mine, rows))

    def _rows(self, idx: np.ndarray) -> np.ndarray:
        """This process's indices of one global batch: ``rank::world`` of each minibatch."""
        r, w = self.shard  # type: ignore[misc]
        if self.minibatches == 1 or len(idx) % self.minibatches:  # a last, smaller batch
            return idx[r::w]
        return np.concatenate([part[r::w] for part in np.split(idx, self.minibatches)])

    def _read(self, epoch: int, idx: list[np.ndarray]) -> Iterator[tuple[np.ndarray, ...]]:
        if not self.lazy:
            return ((self.split.x[i], self.split.y[i]) for i in idx)
        return self._lazy(epoch, idx)

    def _lazy(self, epoch: int, idx: list[np.ndarray]) -> Iterator[tuple[np.ndarray, ...]]:
        examples = _Examples(self.split, self.seed, self.shuffle)
        # starting workers (a fork each, per pass) costs more than a pass of a few batches
        if self.workers == 0 or len(idx) < 2 * self.workers:
            yield from self._checked(idx, (examples[(epoch, b)] for b in idx))
            return
        self._sampler.epoch, self._sampler.batches = epoch, idx
        it = iter(self._worker_loader(examples))
        try:
            yield from self._checked(idx, (tuple(np.asarray(t) for t in out) for out in it))
        finally:
            # a pass left early (a resume test, a stop, an error) would leave paddle's
            # iterator alive until exit: its reader thread references it. Its own __del__
            # does this shutdown; there is no public close.
            shutdown = getattr(it, "_try_shutdown_all", None)
            if shutdown is not None:
                shutdown()

    def _checked(
        self, idx: list[np.ndarray], produced: Iterator[tuple[np.ndarray, ...]]
    ) -> Iterator[tuple[np.ndarray, ...]]:
        """The batches without their bad files (reported), ``(ok, *fields)`` -> fields."""
        for b, out in zip(idx, produced):
            ok, fields = out[0].astype(bool), out[1:]
            if ok.all():
                yield fields
                continue
            for i in b[~ok]:
                self._report(int(i))
            if not ok.any():
                raise BadDataError(
                    f"every file of a batch is bad (e.g. {self.split.path(int(b[0]))}); "
                    "check the data folder"
                )
            yield tuple(f[ok] for f in fields)

    def _report(self, i: int) -> None:
        path = self.split.path(i)
        try:  # decode again here for the reason (rare: bad files only)
            self.split.load(i, None)
            problem = "could not be decoded in a loader worker"
        except ValueError as e:
            problem = str(e)
        self.bad_files.found(path, problem)

    def _worker_loader(self, examples: _Examples) -> Any:
        if self._loader is None:
            from paddle.io import DataLoader

            self._loader = DataLoader(
                examples,
                batch_sampler=self._sampler,
                num_workers=self.workers,
                collate_fn=_only,
                # persistent workers would save the start (a fork) but paddle's reset between
                # epochs polls in 0.5 s sleeps: slower for all but very long epochs
                persistent_workers=False,
                prefetch_factor=self.prefetch,
                # batches travel pickled through the workers' queue: for MNIST-sized batches
                # this beat paddle's shared-memory tensors (bench/data_bench.py throughput)
                use_shared_memory=False,
                return_list=True,
            )
        return self._loader

    def close(self) -> None:
        """Drop the worker loader (its processes end with the pass that started them)."""
        self._loader = None


def _only(items: Sequence[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    return items[0]  # each key already is a whole batch


def held_out(n: int, test_fraction: float, seed: int, salt: int, unit: str) -> np.ndarray:
    """bool [n]: a seeded ``test_fraction`` of ``n`` items (at least one) for the test split,
    used when ``data.test_path`` is not set; ``salt`` keeps each reader's draw its own."""
    if not 0.0 < test_fraction < 1.0 or n < 2:
        raise BadDataError(
            f"data.test_fraction must be in (0, 1) with >= 2 {unit}s when data.test_path "
            f"is not set, got {test_fraction} with {n} {unit}(s)"
        )
    perm = np.random.default_rng([seed, salt]).permutation(n)
    is_test = np.zeros(n, bool)
    is_test[perm[: max(1, int(round(test_fraction * n)))]] = True
    return is_test


def describe_skips(bad: BadFiles) -> str:
    """One line for logs: how many files were skipped and the first few."""
    if not bad.skipped:
        return "no bad files"
    first = ", ".join(list(bad.skipped)[:3])
    return f"{len(bad)} bad file(s) skipped ({first}{', ...' if len(bad) > 3 else ''})"
