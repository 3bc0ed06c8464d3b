"""The live run's event stream: step and evaluation metrics for Server-Sent Events clients.

The training thread publishes (one small dict per step); each connected client owns an
`asyncio.Queue` on the server's event loop, fed through ``call_soon_threadsafe``,
so publishing never blocks training. A new client first gets the recent history.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

#: events kept for a client that connects mid-run (the page's curves so far)
HISTORY = 2000
#: events a slow client may fall behind before the oldest are dropped
BACKLOG = 10000


class EventHub:
    """Fan-out of events from the training thread to SSE clients (copy-on-write list)."""

    def __init__(self, history: int = HISTORY) -> None:
        self.history: deque[dict[str, Any]] = deque(maxlen=history)
        self._clients: tuple[tuple[asyncio.AbstractEventLoop, asyncio.Queue], ...] = ()
        self._lock = threading.Lock()

    def publish(self, event: dict[str, Any]) -> None:
        """Record ``event`` and hand it to every client (any thread; never blocks)."""
        self.history.append(event)
        for loop, q in self._clients:
            try:
                loop.call_soon_threadsafe(_offer, q, event)
            except RuntimeError:  # the server's loop has closed
                pass

    def subscribe(self) -> asyncio.Queue:
        """A queue of events from now on, for a client on the running event loop."""
        q: asyncio.Queue = asyncio.Queue(maxsize=BACKLOG)
        with self._lock:
            self._clients = (*self._clients, (asyncio.get_running_loop(), q))
        return q

    def unsubscribe(self, q: asyncio.Queue) -> None:
        """Forget a client's queue."""
        with self._lock:
            self._clients = tuple(c for c in self._clients if c[1] is not q)

    @property
    def clients(self) -> int:
        """How many clients are connected."""
        return len(self._clients)


def _offer(q: asyncio.Queue, event: dict[str, Any]) -> None:
    if q.full():  # a client that stopped reading loses its oldest events, not the run
        q.get_nowait()
    q.put_nowait(event)
