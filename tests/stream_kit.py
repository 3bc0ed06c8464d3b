"""Helpers for stream tests: a digits stream arena, its routes behind TestClient, the loop on
a thread (:class:`StreamRun`), the sklearn digits as POSTable samples."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents import Classifier
from paddlecraft.arenas.engine import run_arena, standard_callbacks
from paddlecraft.arenas.engine.rng import seed_everything
from paddlecraft.arenas.stream import StreamClassifyArena
from paddlecraft.craftdata.stream import load_stream
from tests.live_fake import FakeLive, LiveBoundary

MLP = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "hidden_size": 128, "hidden_layers": 1}


def digits_samples(seed: int = 0, n: int | None = None) -> list[dict[str, Any]]:
    """sklearn's digits in a seeded random order, as ``{"pixels": [1][8][8], "label": k}``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))[:n]
    images = (d.images / 16.0).astype(np.float32)
    return [{"pixels": images[i][None].tolist(), "label": int(d.target[i])} for i in order]


def make_arena(name: str, seed: int = 0, lr: float = 0.003, **stream: Any) -> StreamClassifyArena:
    """A digits-shaped stream arena (1x8x8, 10 classes) with a fresh MLP classifier."""
    seed_everything(seed)
    stream.setdefault("classes", 10)
    data = load_stream(kind="labels", channels=1, image_size=8, live=True, **stream)
    agent = Classifier(name, encoder=MLP, input_shape=[1, 8, 8], num_classes=10, seed=seed, lr=lr)
    return StreamClassifyArena({"classifier": agent}, data=data, seed=seed, batch_size=32)


class StreamRun:
    """``arena`` running in ``run_dir`` on a thread, its routes behind a TestClient.

    ``client`` posts to ``/api/arena/...`` as the live server would serve them (no token:
    the server's check is the live server's own, tested there).
    """

    def __init__(
        self,
        arena: StreamClassifyArena,
        run_dir: str | Path,
        *,
        resume: bool = False,
        extra: list[Any] = (),
        checkpoint_every: int = 0,
    ) -> None:
        from starlette.applications import Starlette
        from starlette.routing import Mount
        from starlette.testclient import TestClient

        self.arena, self.run_dir = arena, Path(run_dir)
        self.live = FakeLive(run_dir)
        arena.live = self.live
        arena.setup(str(run_dir))  # the engine binds the folder before serving routes
        app = Starlette(routes=[Mount("/api/arena", routes=arena.live_routes(self.live))])
        self.client = TestClient(app)
        callbacks = [
            *standard_callbacks(progress=False, checkpoint_every=checkpoint_every),
            LiveBoundary(self.live),
            *extra,
        ]
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None

        def target() -> None:
            try:
                self.result = run_arena(arena, run_dir, callbacks, resume=resume)
            except BaseException as e:  # noqa: BLE001 (the test reads it)
                self.error = e

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def post(self, path: str, **kw: Any) -> Any:
        return self.client.post(f"/api/arena/{path}", **kw)

    def count(self) -> int:
        return int(self.client.get("/api/arena/stream").json()["count"])

    def send(self, samples: list[dict[str, Any]], end: bool = True) -> None:
        """Send what the run does not have yet (from its count on), then end the stream."""
        for i in range(self.count(), len(samples)):
            r = self.post("samples", json={**samples[i], "index": i})
            assert r.status_code == 200, r.text
        if end:
            assert self.post("end").status_code == 200

    def join(self, timeout: float = 300.0) -> dict[str, Any] | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the stream run did not finish"
        return self.result
