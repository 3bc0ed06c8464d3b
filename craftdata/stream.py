"""``data=stream``: samples POSTed to a live run while it trains (online learning).

`load_stream` (the ``data.loader`` of ``conf/data/stream.yaml``) reads no data: it
returns a `StreamData`, what the arena needs to know before the first sample
arrives (the image shape, the classes or the caption words) and the rules that say which
samples each training step consumes. The samples themselves arrive over the live server
(``paddlecraft.arenas.stream``) and are logged in the run folder.

The rules, exact so that a run is a function of the stream's content and order only (not
of when samples arrived, of pauses, or of a kill and ``resume=``):

- sample ``i`` (0-based arrival index) is held out for evaluation when ``holdout_every``
  > 0 and ``i % holdout_every == holdout_every - 1``; the others are training samples;
- step ``k`` starts once `StreamData.needed` ``(k) = warmup + (k // repeat) * every``
  samples have arrived, and trains on a minibatch drawn, by a generator seeded with
  ``(seed, k)``, from the newest ``window`` training samples among those first
  ``needed(k)``; a run with fewer arrivals waits (it does not spin);
- after the end of the stream (``total`` samples), steps go on while ``needed(k) <= total``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from paddlecraft.errors import ConfigError

__all__ = ["KINDS", "StreamData", "load_stream"]

DRAW_STREAM = 0x5EED  #: random-stream id: each step's minibatch, ``[seed, step, id]``

KINDS = ("labels", "captions")  #: labelled images (arena=classify), image + caption pairs


@dataclass(frozen=True)
class StreamData:
    """A stream's fixed facts and its consumption rules (see the module docstring)."""

    kind: str  #: labels | captions
    channels: int  #: image planes every sample must have
    image_size: int  #: image side every sample must have
    classes: tuple[str, ...] = ()  #: label names (kind=labels); a label is a name or an index
    words: tuple[str, ...] = ()  #: caption vocabulary (kind=captions); other words are <unk>
    window: int = 1024  #: train on the newest N training samples
    holdout_every: int = 5  #: every k-th sample is held out for evaluation (0: none)
    warmup: int = 64  #: samples before the first step
    every: int = 1  #: new samples per group of steps
    repeat: int = 1  #: steps per ``every`` new samples
    max_request_bytes: int = 4 << 20  #: a bigger POST is refused (413)
    name: str = "stream"

    @property
    def num_classes(self) -> int | None:
        """How many labels (kind=labels; fills the classifier's ``num_classes``)."""
        return len(self.classes) if self.kind == "labels" else None

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of every sample."""
        return (self.channels, self.image_size, self.image_size)

    def needed(self, step: int) -> int:
        """Arrivals step ``step`` (0-based) waits for."""
        return self.warmup + (step // self.repeat) * self.every

    def held_out(self, index: np.ndarray | int) -> np.ndarray | bool:
        """Whether sample ``index`` (arrival order) is held out for evaluation."""
        k = self.holdout_every
        if k <= 0:
            return np.zeros(np.shape(index), bool) if np.ndim(index) else False
        return np.asarray(index) % k == k - 1 if np.ndim(index) else index % k == k - 1

    def train_window(self, arrived: int) -> np.ndarray:
        """Arrival indices of the newest ``window`` training samples among the first
        ``arrived``, oldest first (int64 [<= window])."""
        idx = np.arange(arrived, dtype=np.int64)
        idx = idx[~self.held_out(idx)] if self.holdout_every > 0 else idx
        return idx[-self.window :]

    def draw(self, seed: int, step: int, batch_size: int) -> np.ndarray:
        """The minibatch of step ``step``: arrival indices (int64 [B]), drawn by a generator
        seeded with ``(seed, step)`` from `train_window` of ``needed(step)``, without
        replacement while the window holds a batch (with replacement before)."""
        window = self.train_window(self.needed(step))
        if len(window) == 0:
            return window
        rng = np.random.default_rng([seed, step, DRAW_STREAM])
        take = rng.choice(len(window), size=batch_size, replace=len(window) < batch_size)
        return window[np.sort(take)]


def _classes(classes: int | Sequence[str | int] | None, kind: str) -> tuple[str, ...]:
    if kind != "labels":
        return ()
    if classes is None:
        raise ConfigError(
            "data.loader.classes: data=stream with arena=classify needs the classes before "
            "the first sample (the classifier's size); give a count (data.loader.classes=10: "
            "labels 0..9) or the names (data.loader.classes=[cat,dog])"
        )
    if isinstance(classes, int) and not isinstance(classes, bool):
        names = tuple(str(i) for i in range(classes))
    else:
        names = tuple(str(c) for c in classes)
    if len(names) < 2 or len(set(names)) != len(names):
        raise ConfigError(
            f"data.loader.classes={list(names)}: need at least 2 distinct classes (a count "
            "or a list of names)"
        )
    return names


def load_stream(
    kind: str = "labels",
    channels: int = 1,
    image_size: int = 8,
    classes: int | Sequence[str | int] | None = None,
    words: str | Sequence[str] | None = None,
    window: int = 1024,
    holdout_every: int = 5,
    warmup: int = 64,
    every: int = 1,
    repeat: int = 1,
    max_request_bytes: int = 4 << 20,
    live: object = False,
) -> StreamData:
    """The stream's facts and rules (reads nothing; samples arrive over the live server).

    ``live`` is whether ``trainer.live`` is on (a bool, or its settings with ``enabled``):
    the samples come over the live server, so a stream run without it is refused here,
    before the run folder is made.
    """
    if isinstance(live, Mapping):
        live = live.get("enabled", False)
    if not live:
        raise ConfigError(
            "data=stream: samples arrive over the run's live server, which is off; add "
            "trainer.live=true (then send samples with: paddlecraft feed <run dir> <folder>)"
        )
    if kind not in KINDS:
        raise ConfigError(f"data.loader.kind={kind!r}: expected one of {list(KINDS)}")
    checks = {
        "channels": (channels, channels in (1, 3), "1 or 3"),
        "image_size": (image_size, image_size >= 1, ">= 1"),
        "window": (window, window >= 1, ">= 1"),
        "holdout_every": (holdout_every, holdout_every == 0 or holdout_every >= 2, "0 or >= 2"),
        "warmup": (warmup, warmup >= 1, ">= 1"),
        "every": (every, every >= 1, ">= 1"),
        "repeat": (repeat, repeat >= 1, ">= 1"),
        "max_request_bytes": (max_request_bytes, max_request_bytes >= 1024, ">= 1024"),
    }
    for key, (value, ok, want) in checks.items():
        if not ok:
            where = "data" if key in ("channels", "image_size") else "data.loader"
            raise ConfigError(f"{where}.{key}={value}: expected {want}")
    if kind == "captions" and not words:
        raise ConfigError(
            "data.loader.words: data=stream with arena=caption needs the caption vocabulary "
            "before the first sample (the agents' size); give the words "
            "(data.loader.words=[a,red,circle,...]) or a preset (shapes, digits); other "
            "words become <unk>"
        )
    if kind == "captions":
        from paddlecraft.craftdata.words import resolve_words

        try:
            words = resolve_words(words, "data.loader.words")  # type: ignore[arg-type]
        except ValueError as e:
            raise ConfigError(str(e)) from None
    return StreamData(
        kind=kind,
        channels=int(channels),
        image_size=int(image_size),
        classes=_classes(classes, kind),
        words=tuple(str(w) for w in words or ()),
        window=int(window),
        holdout_every=int(holdout_every),
        warmup=int(warmup),
        every=int(every),
        repeat=int(repeat),
        max_request_bytes=int(max_request_bytes),
    )
