"""A small stand-in for the live server's side of :class:`LiveContext`, for in-process tests
of arena routes (Starlette's TestClient on the routes, the loop on a thread).

``call_soon`` work runs at each step start (:class:`LiveBoundary`, what the server's control
callback does) and inside ``idle_wait``; :class:`KillAt` ends a loop abruptly after a given
step, leaving no checkpoint behind (a SIGKILL as far as the run folder can tell).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from paddlecraft.arenas.engine import Callback


class FakeLive:
    """``arena.live`` for tests: ``call_soon`` queue, ``idle_wait`` / ``wake`` on an event."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.records: list[dict[str, Any]] = []
        self.idle_waits = 0
        self._work: queue.Queue[tuple[Callable[[], Any], Future]] = queue.Queue()
        self._event = threading.Event()

    def call_soon(self, fn: Callable[[], Any]) -> Future:
        fut: Future = Future()
        self._work.put((fn, fut))
        self._event.set()
        return fut

    def drain(self) -> None:
        """Run the queued work (on the calling thread: the training thread)."""
        while True:
            try:
                fn, fut = self._work.get_nowait()
            except queue.Empty:
                return
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 (the caller gets it)
                fut.set_exception(e)

    def idle_wait(self, timeout: float) -> None:
        self.idle_waits += 1
        self.drain()
        self._event.wait(timeout)
        self._event.clear()
        self.drain()

    def wake(self) -> None:
        self._event.set()

    def record(self, command: str, **fields: Any) -> None:
        self.records.append({"command": command, **fields})


class LiveBoundary(Callback):
    """Runs the fake's ``call_soon`` work at each step boundary."""

    def __init__(self, live: FakeLive) -> None:
        self.live = live

    def on_step_start(self, loop: Any) -> None:
        self.live.drain()


class Killed(BaseException):
    """Raised by :class:`KillAt`: the loop dies as if killed (status failed: no checkpoint)."""


class KillAt(Callback):
    """Ends the loop abruptly once ``step`` steps are done (after ``before()`` returns,
    e.g. a wait until more samples were acknowledged)."""

    def __init__(self, step: int, before: Callable[[], None] | None = None) -> None:
        self.step, self.before = step, before

    def on_step_end(self, loop: Any, metrics: dict[str, float]) -> None:
        if loop.step == self.step:
            if self.before is not None:
                self.before()
            raise Killed(f"killed after step {loop.step}")
