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
        #: raised out of the next ``idle_wait`` (the live control's stop does this)
        self.stop_with: Exception | None = None
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
        if self.stop_with is not None:
            raise self.stop_with
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


class FakeServer:
    """The routes served over real HTTP on 127.0.0.1 (uvicorn on a thread) with a bearer
    token, and the run's ``live.json`` written: what ``paddlecraft feed`` talks to until
    the live server itself is here. A context manager."""

    def __init__(self, routes: list[Any], run_dir: str | Path, token: str = "t0ken") -> None:
        import json
        import socket

        import uvicorn
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.middleware.base import BaseHTTPMiddleware
        from starlette.responses import JSONResponse
        from starlette.routing import Mount

        async def check(request: Any, call_next: Any) -> Any:
            if request.headers.get("authorization") != f"Bearer {token}":
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            return await call_next(request)

        app = Starlette(
            routes=[Mount("/api/arena", routes=routes)],
            middleware=[Middleware(BaseHTTPMiddleware, dispatch=check)],
        )
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        while not self.server.started:
            threading.Event().wait(0.02)
        (Path(run_dir) / "live.json").write_text(json.dumps({"port": self.port, "token": token}))

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()
