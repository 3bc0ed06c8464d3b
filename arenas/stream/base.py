"""What every stream arena shares: the sample store, the wait for arrivals, the step rule,
the held-out share and the HTTP routes (mixed in before the arena class it streams to)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from paddlecraft.craftdata.stream import StreamData
from paddlecraft.errors import ConfigError

from .log import StreamLogError
from .store import SampleStore

__all__ = ["IDLE_WAIT_S", "StreamSource"]

IDLE_WAIT_S = 1.0  #: longest sleep between looks at the store while no sample arrives


class StoppedWaiting:
    """A "batch" that stands for a stop that came while the loop waited for samples: the
    live control raises out of ``idle_wait``; `StreamSource.step_indices` yields this
    instead of letting the error end the epoch's generator (which the loop would take for a
    finished epoch), and the arena's ``train_step`` raises it again, so the engine discards
    the step as any interrupted one and a resume re-runs it."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class StreamSource:
    """A mixin for an `Arena` whose ``data`` is a
    `StreamData` (set by the arena's constructor)."""

    #: a stop while waiting is re-raised by ``train_step`` before any state changed
    interruptible = True
    #: every acknowledged sample is in the run's log: a resume with no checkpoint replays it
    replays_from_start = True
    data: StreamData
    seed: int
    epochs: int
    live: Any
    #: the run's samples (opened by `open_store` when the engine binds the run folder)
    store: SampleStore
    #: arrivals the last step consumed (``needed(step)``; the whole stream once it ended)
    consumed: int = 0

    def check_stream(self, kind: str) -> None:
        """Refuse data that is not a stream of ``kind`` samples, or more than one epoch."""
        if not isinstance(self.data, StreamData) or self.data.kind != kind:
            got = getattr(self.data, "kind", type(self.data).__name__)
            raise ConfigError(
                f"{type(self).__name__} needs data=stream of {kind} (data.loader.kind={kind}), "
                f"got {got}"
            )
        if self.epochs != 1:
            raise ConfigError(
                f"arena.epochs={self.epochs}: a stream is one pass (data=stream); the run ends "
                "when the stream ends (POST /api/arena/end, or paddlecraft feed --end). "
                "Leave arena.epochs at 1"
            )

    def steps_per_epoch(self) -> None:
        """None: a stream has no known length (it ends when its client ends it), so the
        progress line and ``GET /api/status`` show the step without a total or an ETA."""
        return None

    def open_store(self, run_dir: str) -> None:
        """Bind the sample log of ``run_dir`` (every acknowledged sample comes back)."""
        old = getattr(self, "_store_dir", None)
        if old == str(run_dir):
            return
        if old is not None:
            self.store.close()
        self.store = SampleStore(self.data, run_dir)
        self._store_dir = str(run_dir)

    def wait_for(self, n: int) -> bool:
        """Block (without spinning) until ``n`` samples arrived or the stream ended; whether
        ``n`` arrived. Pause, stop and ``call_soon`` work are served meanwhile."""
        while self.store.count < n and not self.store.ended:
            if self.live is None:
                raise ConfigError(
                    "data=stream: samples arrive over the run's live server, which is off; "
                    "add trainer.live=true"
                )
            self.live.idle_wait(IDLE_WAIT_S)
        return self.store.count >= n

    def step_indices(self, start: int, batch_size: int) -> Iterator[np.ndarray | StoppedWaiting]:
        """Arrival indices (int64 [B]) of each step's minibatch from step ``start`` on: step
        ``k`` waits for ``needed(k)`` arrivals; the steps end when the stream ended short of
        them. A stop while waiting yields a `StoppedWaiting`."""
        k = start
        while True:
            try:
                arrived = self.wait_for(self.data.needed(k))
            except Exception as e:  # noqa: BLE001 (the live control's stop: re-raised by train_step)
                yield StoppedWaiting(e)
                return
            if not arrived:
                break
            self.consumed = self.data.needed(k)
            yield self.data.draw(self.seed, k, batch_size)
            k += 1
        self.consumed = self.store.count  # ended: evaluation sees every held-out sample

    def held_out_indices(self) -> np.ndarray:
        """Arrival indices (int64) of the held-out samples among those consumed."""
        idx = np.arange(min(self.consumed, self.store.count), dtype=np.int64)
        return idx[self.data.held_out(idx)] if self.data.holdout_every > 0 else idx[:0]

    def arena_state(self) -> dict:
        """The arrivals consumed (a resumed run checks its log still holds them)."""
        return {**super().arena_state(), "stream_consumed": int(self.consumed)}  # type: ignore[misc]

    def load_arena_state(self, state: dict) -> None:
        super().load_arena_state(state)  # type: ignore[misc]
        consumed = int(state.get("stream_consumed", 0))
        if self.store.count < consumed:
            raise StreamLogError(
                f"{self.store.log.path} holds {self.store.count} samples but the checkpoint "
                f"consumed {consumed}: the log lost acknowledged samples (restore it, or start "
                "a new run)"
            )
        self.consumed = consumed

    def live_view(self) -> dict[str, Any]:
        """The live page's panels: the stream's counts in a table first, then the arena's
        own (a confusion matrix...)."""
        view = dict(super().live_view())  # type: ignore[misc]
        info = self.store.info()
        counts = {
            "received": info["count"],
            "training": info["train"],
            "held out": info["held_out"],
            "consumed by the last step": int(self.consumed),
            "ended": "yes" if info["ended"] else "no",
        }
        panel = {
            "kind": "table",
            "label": "stream",
            "columns": list(counts),
            "rows": [list(counts.values())],
        }
        view["panels"] = [panel, *view.get("panels", [])]
        return view

    def predict(self, images: np.ndarray) -> list[dict[str, Any]]:
        """The current weights' answers for float32 [B, C, H, W] images (the arena's own)."""
        raise NotImplementedError

    def live_routes(self, live: Any) -> list[Any]:
        """POST samples, end, predict; GET stream (see `.routes`)."""
        from .routes import stream_routes

        return stream_routes(self.data, self.store, self.predict, live)

    def close(self) -> None:
        """Close the sample log, then what the arena itself holds."""
        if getattr(self, "_store_dir", None) is not None:
            self.store.close()
            self._store_dir = None
        super().close()  # type: ignore[misc]
