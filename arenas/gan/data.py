"""The GAN arena's real images: per-step training batches and a bounded evaluation sample.

Any dataset whose splits are labelled images works: in-memory arrays (``.x`` float32
[N, C, H, W] in [0, 1], ``.y``: digits, MNIST, shapes, ``data.loader.in_memory=true``) or
`LazySplit` files (``paddlecraft.craftdata.load_image_folder``), decoded by
``data.workers`` processes only when a batch asks for them.

Training: one step takes ``n_critic * batch_size`` images from
``default_rng([seed, epoch]).permutation(n)`` (the arenas' ``epoch_rng``), through a
`BatchLoader`; ``batches(epoch, start)`` begins at step ``start`` without
decoding the steps before it. In-memory and lazy data give the same batches (unless
``data.loader.hflip``: in-memory arrays are decoded once, unflipped). A file that fails to
decode in a worker (``on_bad_file=skip``) leaves its step short: the step is refilled
from its own good images, so every step keeps ``batch_size`` rows.

Data-parallel (``shard=(rank, world)``): the loader shards each of a step's ``n_critic``
minibatches, so each process reads and decodes only its rows ``rank::world`` of every
critic minibatch; a step is then a `Shard` with its ``share``.

Evaluation (feature net, FID reference, recall, ``fid_real``) needs real images as
arrays. In-memory data is used whole. Lazy data is decoded once, in file order
without augmentation, from a seeded sample of at most ``eval_images`` files per split
(all of them when a split is smaller: then the arrays equal the in-memory ones). Peak
memory is bounded by ``2 * eval_images * C * H * W * 4`` bytes, whatever the folder size.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from paddlecraft.agents.settings import ConfigError
from paddlecraft.craftdata.loader import BatchLoader, LazySplit, Shard

log = logging.getLogger("paddlecraft")

__all__ = ["GanData", "SampledSplit", "eval_sample"]

#: salt of the evaluation sample's seed (per split: train 0, test 1)
_SAMPLE_SALT = 11
#: random-stream id of the real images the metrics compare with: ``[seed, id]``
REFERENCE_STREAM = 7


def eval_sample(n: int, limit: int | None, seed: int, split: int) -> np.ndarray:
    """Sorted indices of at most ``limit`` of ``n`` examples, a function of (seed, split)."""
    if limit is None or n <= limit:
        return np.arange(n)
    rng = np.random.default_rng([seed, _SAMPLE_SALT, split])
    return np.sort(rng.permutation(n)[:limit])


class SampledSplit(LazySplit):
    """The examples ``idx`` of a lazy ``split`` (no augmentation), read on demand."""

    def __init__(self, split: LazySplit, idx: np.ndarray) -> None:
        self.split, self.idx = split, np.asarray(idx, np.int64)
        self.y = np.asarray(split.y)[self.idx]

    def path(self, i: int) -> str:
        return self.split.path(int(self.idx[i]))

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        return self.split.load(int(self.idx[i]), None)

    def collate(self, items: Sequence[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        return self.split.collate(items)

    def empty_item(self) -> tuple[np.ndarray, ...]:
        return self.split.empty_item()


class GanData:
    """Real images for the GAN arena, in memory or decoded lazily by loader workers.

    Args:
        data: the instantiated dataset (``.train``, ``.test``, ``.num_classes``; lazy
            datasets also ``workers``, ``prefetch``, ``bad_files``, ``use_run_dir``).
        seed: run seed (training order, evaluation sample).
        batch_size: images per critic update; a step takes ``n_critic`` of them.
        n_critic: critic updates per step.
        eval_images: lazy data: at most this many images per split are decoded for
            evaluation (None: all).
        shard: ``(rank, world)`` of a data-parallel launch: each step holds this process's
            rows of each critic minibatch (None or world 1: all of them).
    """

    def __init__(
        self,
        data: Any,
        seed: int,
        batch_size: int,
        n_critic: int,
        eval_images: int | None,
        shard: tuple[int, int] | None = None,
    ) -> None:
        self.data, self.seed = data, int(seed)
        self.shard = shard if shard is not None and shard[1] > 1 else None
        self.batch_size, self.n_critic = int(batch_size), int(n_critic)
        self.eval_images = None if eval_images is None else int(eval_images)
        if self.eval_images is not None and self.eval_images < 1:
            raise ConfigError(
                f"arena.eval_images must be >= 1 (or null for every image), got {eval_images}"
            )
        self.lazy = isinstance(data.train, LazySplit)
        if len(data.train) < self.batch_size * self.n_critic:
            raise ConfigError(
                f"arena.batch_size={batch_size} x arena.n_critic={n_critic} is more than the "
                f"{len(data.train)} training images; lower them"
            )
        self._bound_to: str | None = None
        self._loader: BatchLoader | None = None
        self._real: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def image_shape(self) -> tuple[int, ...]:
        """(C, H, W) of the real images."""
        if self.lazy:
            return tuple(int(s) for s in self.data.image_shape)
        return tuple(int(s) for s in self.data.train.x.shape[1:])

    @property
    def bad_files(self) -> Any:
        """The dataset's skip log (files read from disk), or None for in-memory data."""
        return getattr(self.data, "bad_files", None)

    def bind(self, run_dir: str | None) -> None:
        """Record the split in ``run_dir`` (or adopt the recorded one) for lazy data."""
        use = getattr(self.data, "use_run_dir", None)
        if use is None or run_dir is None or self._bound_to == run_dir:
            return
        use(run_dir)
        self._bound_to = run_dir
        self.close()  # the splits may have changed: new loaders, new evaluation sample
        self._real = {}

    # ------------------------------------------------------------------ training
    def loader(self) -> BatchLoader:
        """The training loader: one batch per step, ``n_critic * batch_size`` images."""
        if self._loader is None:
            self._loader = BatchLoader(
                self.data.train,
                self.batch_size * self.n_critic,
                seed=self.seed,
                shuffle=True,
                workers=getattr(self.data, "workers", 0),
                prefetch=getattr(self.data, "prefetch", 2),
                bad_files=self.bad_files,
                drop_last=True,
                shard=self.shard,
                minibatches=self.n_critic,
            )
        return self._loader

    def steps_per_epoch(self) -> int:
        """Steps in one pass (the last, incomplete step's images are left out)."""
        return len(self.loader())

    def local_rows(self) -> int:
        """Rows of each critic minibatch this process trains on (``batch_size`` unsharded)."""
        if self.shard is None:
            return self.batch_size
        r, w = self.shard
        return len(range(r, self.batch_size, w))

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Steps ``start, ...`` of ``epoch``: x [n_critic, b, C, H, W] float32, y [n_critic, b]
        with ``b`` = `local_rows`; sharded, each step is a ``Shard`` with its share."""
        b = self.local_rows()
        per = b * self.n_critic
        for batch in self.loader().epoch(epoch, start):
            x, y = batch
            share = getattr(batch, "share", None)
            if len(x) < per:  # files that failed to decode (on_bad_file=skip) were left out
                if share is not None:  # the refilled rows count as the full shard
                    share = share * per / len(x)
                keep = np.arange(per) % len(x)  # refill from the batch's good images
                x, y = x[keep], y[keep]
            step = (
                x.reshape(self.n_critic, b, *x.shape[1:]),  # [n_critic, b, C, H, W]
                np.asarray(y).astype(np.int64).reshape(self.n_critic, b),  # [n_critic, b]
            )
            yield step if share is None else Shard(step, share)

    # ------------------------------------------------------------------ evaluation
    def arrays(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """Real images x [N, C, H, W] float32 and labels y [N] of ``split`` (train | test).

        In-memory data: the whole split. Lazy data: the evaluation sample, decoded once.
        """
        if split not in self._real:
            s = getattr(self.data, split)
            if not self.lazy:
                self._real[split] = (s.x, s.y)
            else:
                self._real[split] = self._decode(s, ("train", "test").index(split))
        return self._real[split]

    def reference(self, n: int) -> np.ndarray:
        """``n`` (at most) real training images [n, C, H, W] for the metrics, seeded, in order."""
        x = self.arrays("train")[0]
        order = np.random.default_rng([self.seed, REFERENCE_STREAM]).permutation(len(x))
        return x[np.sort(order[: min(n, len(x))])]

    def _decode(self, split: LazySplit, salt: int) -> tuple[np.ndarray, np.ndarray]:
        idx = eval_sample(len(split), self.eval_images, self.seed, salt)
        sample = SampledSplit(split, idx)
        x = np.empty((len(idx), *self.image_shape), np.float32)  # [N, C, H, W]
        y = np.empty(len(idx), np.int64)
        loader = BatchLoader(sample, 256, seed=self.seed, shuffle=False,
                             workers=getattr(self.data, "workers", 0),
                             prefetch=getattr(self.data, "prefetch", 2),
                             bad_files=self.bad_files)  # fmt: skip
        n = 0
        for xb, yb in loader.epoch(0):  # bad files (on_bad_file=skip) are left out
            x[n : n + len(xb)], y[n : n + len(xb)] = xb, yb
            n += len(xb)
        if len(idx) < len(split):
            log.info(
                "GAN evaluation: %d of %d images decoded (arena.eval_images=%d)",
                n, len(split), self.eval_images,
            )  # fmt: skip
        return x[:n], y[:n]

    # ------------------------------------------------------------------ skipped files
    def metrics(self) -> dict[str, float]:
        """``bad_files_skipped`` for files read from disk (on_bad_file=skip); else nothing."""
        bad = self.bad_files
        return {} if bad is None else {"bad_files_skipped": float(len(bad))}

    def state(self) -> dict:
        """For checkpoints: the files skipped so far (a resumed run keeps counting them)."""
        bad = self.bad_files
        return {} if bad is None else {"bad_files": dict(bad.skipped)}

    def load_state(self, state: dict) -> None:
        """Restore `state`."""
        if self.bad_files is not None:
            self.bad_files.skipped.update(state.get("bad_files", {}))

    def close(self) -> None:
        """Drop the training loader (its worker processes end with their pass)."""
        if self._loader is not None:
            self._loader.close()
            self._loader = None
