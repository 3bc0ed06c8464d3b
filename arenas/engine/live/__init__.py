"""Live runs (``trainer.live=true``): watch, steer and feed a running arena over HTTP.

This module holds the contract between the engine's live server and the arenas; the
server, the control callback and the page live beside it in this package.

Threads: HTTP handlers run on the server's own thread. Anything that reads or changes
agents, arena state or RNG streams goes through `LiveContext.call_soon`, which runs
the function on the training thread at the next step boundary (or at once while the loop
is paused or idle), so a live run stays bit-identical to one that is not.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class LiveContext(Protocol):
    """What an arena sees of a live run (``arena.live``; None when the run is not live)."""

    #: the run folder
    run_dir: Path

    def call_soon(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the training thread at the next step boundary; its result (or
        exception) lands in the returned future (a handler awaits it with
        ``asyncio.wrap_future``)."""
        ...

    def idle_wait(self, timeout: float) -> None:
        """For an arena with nothing to train on yet (a stream waiting for samples), on the
        training thread: apply pending commands (pause, stop, set, call_soon work; a stop
        raises out of here as the loop expects) and block until `wake` or ``timeout``
        seconds, without spinning."""
        ...

    def wake(self) -> None:
        """Wake the training thread from `idle_wait` (new data arrived)."""
        ...

    def record(self, command: str, **fields: Any) -> None:
        """Append ``{"command": ..., "step": ..., **fields}`` to ``control.jsonl``."""
        ...
