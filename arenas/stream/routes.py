"""The stream's HTTP routes, served by the live server under ``/api/arena`` with its token
check (Starlette routes; the server mounts what `Arena.live_routes` returns):

- ``GET stream``: ``{count, ended, train, held_out, kind, channels, image_size, classes,
  max_request_bytes}``: what a client sends, and from where it resumes.
- ``POST samples``: one sample (`.samples`); 200 ``{index, count}`` once it is fsynced.
- ``POST end``: ends the stream; the run finishes the steps its samples allow.
- ``POST predict``: ``{"image"|"pixels": ...}`` or ``{"samples": [...]}``: the current
  weights' answers (run on the training thread between steps; no RNG touched).

Every refusal is ``{"error": "..."}`` with a 4xx code and stores nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .samples import SampleError, parse_body, parse_image, parse_sample

if TYPE_CHECKING:
    from paddlecraft.craftdata.stream import StreamData

    from .store import SampleStore

__all__ = ["MAX_PREDICT", "stream_routes"]

MAX_PREDICT = 256  #: images per predict request


async def read_body(request: Any, limit: int) -> bytes:
    """The body, refused with 413 past ``limit`` bytes (by its declared length, or as read)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise SampleError(
            f"the request is {declared} bytes; this run takes at most {limit} "
            "(data.loader.max_request_bytes)",
            413,
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise SampleError(
                f"the request is over {limit} bytes (data.loader.max_request_bytes)", 413
            )
        chunks.append(chunk)
    return b"".join(chunks)


def stream_routes(
    spec: StreamData,
    store: SampleStore,
    answer_images: Callable[[np.ndarray], list[dict[str, Any]]],
    live: Any,
) -> list[Any]:
    """The routes of a stream arena: samples into its open ``store`` (checked against
    ``spec``), its count, the end of the stream, and predictions (``answer_images``, run on the training thread)."""
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def answer(fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Any]:
        async def handler(request: Request) -> JSONResponse:
            try:
                return JSONResponse(await fn(request))
            except SampleError as e:
                return JSONResponse({"error": str(e)}, status_code=e.status)

        return handler

    async def info(request: Request) -> dict[str, Any]:
        return store.info()

    async def samples(request: Request) -> dict[str, Any]:
        obj = parse_body(await read_body(request, spec.max_request_bytes))
        arrays, index = parse_sample(obj, spec)
        # the fsync blocks: off the event loop, so status and other requests go on
        i = await run_in_threadpool(store.add, arrays, index)
        live.wake()
        return {"index": i, "count": i + 1}

    async def end(request: Request) -> dict[str, Any]:
        n = await run_in_threadpool(store.end)
        live.wake()
        return {"count": n, "ended": True}

    async def predict(request: Request) -> dict[str, Any]:
        obj = parse_body(await read_body(request, spec.max_request_bytes))
        items = obj.get("samples", [obj])
        if not isinstance(items, list) or not items or len(items) > MAX_PREDICT:
            raise SampleError(f'"samples" must be a list of 1..{MAX_PREDICT} images')
        for item in items:
            if not isinstance(item, dict):
                raise SampleError(
                    'each of "samples" must be a JSON object with "image" or "pixels"'
                )
        images = np.stack([parse_image(item, spec) for item in items])  # [B, C, H, W]
        try:
            answers = await asyncio.wrap_future(live.call_soon(lambda: answer_images(images)))
        except Exception as e:  # noqa: BLE001 (the run ended or stopped before it ran)
            raise SampleError(f"the run cannot answer now ({type(e).__name__}: {e})", 409) from e
        return {"predictions": answers}

    return [
        Route("/stream", answer(info), methods=["GET"]),
        Route("/samples", answer(samples), methods=["POST"]),
        Route("/end", answer(end), methods=["POST"]),
        Route("/predict", answer(predict), methods=["POST"]),
    ]
