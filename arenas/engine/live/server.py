"""The live run's HTTP server: a Starlette app served by uvicorn on a daemon thread.

Why Starlette and uvicorn: both are maintained ASGI pieces already installed with the
tracking extra, small enough to read (explicit routes, one app object), with an
in-process test client; FastAPI would add pydantic models for a handful of JSON routes.

Every ``/api/*`` route needs ``Authorization: Bearer <token>`` (401 JSON otherwise,
nothing done or shown); ``GET /`` (the page) loads without it. The server binds
127.0.0.1 on a free port unless ``trainer.live.host`` says otherwise (a warning), writes
``live.json`` (port and token, mode 0600) into the run folder and removes it when the run
ends. uvicorn's access log is off, so no request line (and no token) is logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, StreamingResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from paddlecraft.agents.settings import ConfigError

from .config import COMMANDS, LOOPBACK, LiveConfig, RunEnded, write_live_json


class ServedRun(Protocol):
    """What the server reads of a live run (the training thread's `LiveControl`)."""

    token: str  #: the bearer token every /api/* request carries
    state: str  #: running | paused | stopping, then the run's end status
    events: Any  #: the event hub the SSE stream subscribes to
    loop: Any  #: the engine's loop (None before the run starts)

    @property
    def run_dir(self) -> Path: ...
    def status(self) -> dict[str, Any]: ...
    def submit(self, name: str, args: dict[str, Any] | None = None) -> Any: ...
    def call_soon(self, fn: Callable[[], Any]) -> Future[Any]: ...


log = logging.getLogger("paddlecraft")

#: the run folder's record of a live endpoint (port, token; 0600), removed at the end
LIVE_FILE = "live.json"
#: the page livepage ships (served at /), and its assets (/static)
STATIC = Path(__file__).with_name("static")
#: seconds a GET /api/view answer is reused (the view is drawn on the training thread)
VIEW_TTL = 1.0
#: seconds a command request waits for the training thread to apply it (?wait= overrides)
DEFAULT_WAIT = 10.0
#: largest request body taken (a ``set`` is a few keys)
MAX_BODY = 64 * 1024


class TokenGate:
    """ASGI middleware: ``/api/*`` needs ``Authorization: Bearer <token>``; 401 otherwise."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (
            scope["path"] == "/api" or scope["path"].startswith("/api/")
        ):
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not secrets.compare_digest(given, self.expected):
                response = JSONResponse(
                    {"error": "missing or wrong token: send 'Authorization: Bearer <token>' "
                              "(the token is in the run folder's live.json)"},
                    status_code=401,
                )  # fmt: skip
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class ViewCache:
    """The arena's `live_view`, drawn on the training thread at most
    once per `VIEW_TTL` seconds however many clients ask."""

    def __init__(self, control: ServedRun) -> None:
        self.control = control
        self._at = -1e9
        self._value: dict[str, Any] | None = None
        self._pending: asyncio.Future | None = None

    async def get(self) -> dict[str, Any]:
        """The cached view, or a fresh one (awaits the next step boundary)."""
        if self._value is not None and time.monotonic() - self._at < VIEW_TTL:
            return self._value
        if self._pending is None:
            loop = self.control.loop
            if loop is None:
                return {}
            self._pending = asyncio.wrap_future(self.control.call_soon(loop.arena.live_view))
        pending = self._pending
        try:
            value = await asyncio.shield(pending)
        finally:
            if self._pending is pending and pending.done():
                self._pending = None
        self._value, self._at = value, time.monotonic()
        return value


def build_app(control: ServedRun) -> Starlette:
    """The live app: the page, the control API, the event stream and the arena's routes."""

    views = ViewCache(control)

    async def page(request: Request) -> Any:
        index = STATIC / "index.html"
        if index.is_file():
            return FileResponse(index)
        return HTMLResponse("<!doctype html><title>PaddleCraft live</title><p>live run</p>")

    async def status(request: Request) -> JSONResponse:
        return JSONResponse(control.status())

    async def events(request: Request) -> StreamingResponse:
        return StreamingResponse(
            _sse(control, request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def view(request: Request) -> JSONResponse:
        try:
            return JSONResponse(await views.get())
        except RunEnded as e:
            return JSONResponse({"error": str(e)}, status_code=409)

    async def command(request: Request) -> JSONResponse:
        name = request.path_params["command"]
        if name not in COMMANDS:
            return JSONResponse(
                {"error": f"unknown command {name!r}; one of {list(COMMANDS)}"}, status_code=404
            )
        args: dict[str, Any] = {}
        if name == "set":
            body = await request.body()
            try:
                args = _set_body(body)
                from .changes import check_keys

                check_keys(args, control.loop)
            except ConfigError as e:
                return _refused(e)
        try:
            wait = float(request.query_params.get("wait", DEFAULT_WAIT))
        except ValueError:
            return JSONResponse({"error": "wait must be a number of seconds"}, status_code=400)
        cmd = control.submit(name, args)
        try:
            result = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(cmd.future)), wait)
        except asyncio.TimeoutError:
            return JSONResponse(
                {"queued": name, "state": control.state, "step": control.status()["step"]},
                status_code=202,
            )
        except RunEnded as e:
            return JSONResponse({"error": str(e)}, status_code=409)
        except ConfigError as e:
            return _refused(e)
        return JSONResponse(result)

    routes = [
        Route("/", page),
        Route("/api/status", status),
        Route("/api/events", events),
        Route("/api/view", view),
        Route("/api/{command}", command, methods=["POST"]),
    ]
    if control.loop is not None:
        extra = control.loop.arena.live_routes(control)
        if extra:
            routes.insert(1, Mount("/api/arena", routes=extra))
    if STATIC.is_dir():
        from starlette.staticfiles import StaticFiles

        routes.append(Mount("/static", app=StaticFiles(directory=STATIC), name="static"))
    app = Starlette(routes=routes)
    app.add_middleware(TokenGate, token=control.token)
    return app


def _refused(e: ConfigError) -> JSONResponse:
    """A refused ``set``: 400, ``{"error", "setting"}`` (the key it names, when one does)."""
    return JSONResponse({"error": str(e), "setting": getattr(e, "key", None)}, status_code=400)


def _set_body(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_BODY:
        raise ConfigError(f"set: the request body is over {MAX_BODY} bytes")
    try:
        args = json.loads(body or b"{}")
    except ValueError as e:
        raise ConfigError(f'set: the body is not JSON ({e}); send {{"key": value}}') from e
    if not isinstance(args, dict) or not args:
        raise ConfigError(
            'set: send a JSON object of settings, e.g. {"agents.classifier.lr": 1e-4}'
        )
    return args


async def _sse(control: ServedRun, request: Request) -> AsyncIterator[bytes]:
    """History first, then each event as ``data: {json}``; ends with the run."""
    q = control.events.subscribe()
    try:
        for event in list(control.events.history):
            yield _frame(event)
        while True:
            try:
                event = await asyncio.wait_for(q.get(), 15.0)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    return
                yield b": keep-alive\n\n"
                continue
            yield _frame(event)
            if event.get("kind") == "state" and control.state not in ("running", "paused",
                                                                        "stopping"):  # fmt: skip
                return
    finally:
        control.events.unsubscribe(q)


def _frame(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event, default=str)}\n\n".encode()


class QuietServer(uvicorn.Server):
    """uvicorn's server waking once a second instead of ten times: each wake-up takes the
    GIL from the training thread, which on a busy machine can cost it a time slice."""

    async def main_loop(self) -> None:
        while not await self.on_tick(0):  # tick 0: refreshes the Date header too
            await asyncio.sleep(1.0)


class LiveServer:
    """uvicorn serving `build_app` on a daemon thread; ``live.json`` while it runs."""

    def __init__(self, control: ServedRun, cfg: LiveConfig) -> None:
        self.control = control
        self.cfg = cfg
        self.port = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._file: Path | None = None

    def start(self) -> None:
        """Bind, serve, write ``live.json``; returns once the server accepts connections."""

        if self.cfg.host != LOOPBACK:
            log.warning(
                "trainer.live.host=%s: the live endpoint is reachable from other machines "
                "(anyone with the token in live.json can steer the run)",
                self.cfg.host,
            )
        family = socket.AF_INET6 if ":" in self.cfg.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.cfg.host, self.cfg.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            build_app(self.control),
            log_level="warning",
            access_log=False,  # a request line would carry paths; never log tokens
            lifespan="off",
            loop="asyncio",
            timeout_graceful_shutdown=0.25,  # s: a run that ends does not wait for its page's streams
        )
        self._server = QuietServer(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="live-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                raise RuntimeError("the live server did not start within 10 s")
            time.sleep(0.01)
        run_dir = self.control.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self._file = run_dir / LIVE_FILE
        url_host = "127.0.0.1" if self.cfg.host in ("0.0.0.0", "::") else self.cfg.host
        write_live_json(
            self._file,
            {"host": url_host, "port": self.port, "token": self.control.token,
             "pid": os.getpid(), "started": time.time()},
        )  # fmt: skip
        log.info(
            "live: serving http://%s:%d (token in %s; `paddlecraft live %s open`)",
            url_host, self.port, self._file, run_dir,
        )  # fmt: skip

    def stop(self) -> None:
        """Remove ``live.json``, end the server and wait (briefly) for its thread."""
        if self._file is not None:
            self._file.unlink(missing_ok=True)
            self._file = None
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
