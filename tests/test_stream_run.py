"""A stream run behind the real live server, in process: its progress line and its status
(a stream has no known length), and its resume from the sample log whatever the checkpoint
settings (nothing acknowledged is lost, also with the defaults)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from live_kit import Client

from paddlecraft.arenas.engine import run_arena, standard_callbacks
from tests.stream_kit import digits_samples, make_arena


class LiveStreamRun:
    """``run_arena`` of a stream arena with the standard callbacks, live on, on a thread;
    ``client`` talks to its real server (live.json)."""

    def __init__(self, arena: Any, run_dir: Path, *, resume: bool = False, **trainer: Any):
        self.run_dir, self.result, self.error = run_dir, None, None
        old = _token(run_dir)
        cbs = standard_callbacks(live=True, **trainer)

        def target() -> None:
            try:
                self.result = run_arena(arena, run_dir, cbs, resume=resume)
            except BaseException as e:  # noqa: BLE001 (the test reads it)
                self.error = e

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while _token(run_dir) in (None, old):
            assert self.thread.is_alive(), f"the run ended before going live: {self.error!r}"
            assert time.monotonic() < deadline, "the run did not go live"
            time.sleep(0.02)
        self.client = Client(run_dir)

    def send(self, samples: list[dict[str, Any]], upto: int) -> None:
        have = self.client.get("/api/arena/stream").json()["count"]
        for i in range(have, upto):
            r = self.client.post("/api/arena/samples", json={**samples[i], "index": i})
            assert r.status_code == 200, r.text

    def join(self, timeout: float = 120.0) -> dict[str, Any] | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the stream run did not finish"
        return self.result


def _token(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "live.json").read_text())["token"]
    except (OSError, ValueError, KeyError):
        return None


def test_progress_lines_and_status_of_a_stream_say_it_has_no_known_total(
    tmp_path, make_scope, caplog
):
    # output not to a terminal: a progress line at every step (every_s=0)
    arena = make_arena(make_scope("s"), warmup=8, holdout_every=4)
    caplog.set_level(logging.INFO, logger="paddlecraft")
    run = LiveStreamRun(arena, tmp_path, progress_every_s=0.0)
    samples = digits_samples(0, 20)
    run.send(samples, 12)
    deadline = time.monotonic() + 30
    while run.client.get("/api/status").json()["step"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    r = run.client.get("/api/status")
    assert r.status_code == 200, r.text
    status = r.json()
    assert status["state"] == "running" and status["step"] >= 1
    assert status["total_steps"] is None and status["eta_s"] is None
    assert status["arena"] == "StreamClassifyArena"
    run.send(samples, 20)
    assert run.client.post("/api/arena/end").status_code == 200
    res = run.join()
    assert run.error is None, run.error
    assert res["status"] == "finished" and res["step"] == 20 - 8 + 1
    lines = [r.getMessage() for r in caplog.records if "steps/s" in r.getMessage()]
    assert lines and all("(no known total)" in line and "ETA" not in line for line in lines)
    assert (tmp_path / "results.json").is_file() and not (tmp_path / "live.json").exists()
