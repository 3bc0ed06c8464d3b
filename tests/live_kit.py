"""Helpers for the live-run tests: a step made artificially long, and a client of the run.

:class:`SlowArena` is :class:`~toy_arenas.ToyArena` whose chosen steps draw from the
global RNG streams, then wait (checking for an interruption) before they change anything:
the shape of a self-play collection step, seconds instead of minutes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from toy_arenas import Regressor, ToyArena

from paddlecraft.arenas.engine import Callback
from paddlecraft.arenas.engine.rng import seed_everything


class SlowArena(ToyArena):
    """ToyArena with interruptible steps; steps in ``slow_steps`` (1-based) take
    ``step_seconds`` the first time they run (a re-run after an interruption is quick)."""

    interruptible = True

    def __init__(self, agents, slow_steps=(), step_seconds=0.0, **kw):
        super().__init__(agents, **kw)
        self.slow_steps = set(slow_steps)
        self.step_seconds = step_seconds
        self.attempts = 0  # train_step calls, interrupted ones included

    def train_step(self, batch):
        self.attempts += 1
        x, y = batch
        jitter = np.random.random()  # the global numpy stream, drawn before the wait
        step = self.steps_done + 1
        if step in self.slow_steps:
            self.slow_steps.discard(step)
            end = time.monotonic() + self.step_seconds
            while time.monotonic() < end:
                self.check_interrupt()
                time.sleep(0.01)
        return super().train_step((x * np.float32(1 + 0.01 * jitter), y))


def make_arena(cls=ToyArena, epochs: int = 2, lr: float = 0.05, **kw: Any) -> ToyArena:
    """A fresh toy arena with one Regressor named ``reg``; the global RNG streams are
    seeded as a run from the command line seeds them (same seed every time)."""
    seed_everything(0)
    return cls({"reg": Regressor("reg", seed=1, lr=lr)}, epochs=epochs, **kw)


def weights(arena: ToyArena) -> dict[str, np.ndarray]:
    """The arena's agents' parameters by physical name (copies)."""
    return {p.name: p.numpy().copy() for agent in arena.agents.values() for p in agent.parameters()}


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Bit-identical parameter sets."""
    return a.keys() == b.keys() and bool(a) and all(np.array_equal(a[k], b[k]) for k in a)


class Client:
    """An HTTP client of the live run in ``run_dir`` (reads live.json)."""

    def __init__(self, run_dir: Path) -> None:
        info = json.loads((Path(run_dir) / "live.json").read_text())
        self.info = info
        self.url = f"http://{info['host']}:{info['port']}"
        self.headers = {"Authorization": f"Bearer {info['token']}"}

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers, timeout=30, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.post(self.url + path, headers=self.headers, timeout=30, **kw)


class AtSteps(Callback):
    """Calls ``fn(loop, client)`` at the end of the given steps (on the training thread,
    before the live control's own step end: a command sent here applies at this step).

    With ``paused=True`` it queues a pause (applied at this very step) and runs ``fn`` on
    a thread of its own, which finds the run paused at the step and resumes it when done.
    """

    def __init__(self, steps, fn, paused: bool = False) -> None:
        self.steps, self.fn, self.paused = set(steps), fn, paused
        self.threads: list = []

    def on_step_end(self, loop, metrics) -> None:
        if loop.step not in self.steps:
            return
        client = Client(loop.run_dir)
        if not self.paused:
            self.fn(loop, client)
            return
        import threading

        assert client.post("/api/pause?wait=0").status_code == 202

        def run() -> None:
            try:
                self.fn(loop, client)
            finally:
                try:
                    client.post("/api/resume")
                except httpx.HTTPError:  # the run has ended (a stop or a signal)
                    pass

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)
