"""A stream run behind the real live server, in process: its progress line and its status
(a stream has no known length), and its resume from the sample log whatever the checkpoint
settings (nothing acknowledged is lost, also with the defaults)."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from live_kit import Client

from paddlecraft.arenas.engine import Callback, run_arena, standard_callbacks
from paddlecraft.arenas.engine.callbacks import Progress
from paddlecraft.arenas.engine.checkpoint import list_checkpoints
from paddlecraft.arenas.stream.store import LOG_FILE
from tests.live_fake import KillAt, Killed
from tests.stream_kit import StreamRun, digits_samples, make_arena


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


def _params(arena: Any) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in arena.classifier.state_dict().items()}


STREAM = {"warmup": 16, "window": 48, "holdout_every": 5}


def test_default_settings_killed_before_any_checkpoint_resume_by_replaying_the_log(
    tmp_path, make_scope
):
    """trainer.checkpoint_every=0 (the default): killed mid-stream, nothing checkpointed;
    resume= replays the sample log from step 0 and ends bit-identical to a run never killed."""
    samples = digits_samples(4, 60)
    scope = make_scope("s")
    whole = StreamRun(make_arena(scope, **STREAM), tmp_path / "whole")
    whole.send(samples)
    res_whole = whole.join()
    assert whole.error is None and res_whole["status"] == "finished"

    cut_dir = tmp_path / "cut"
    cut = StreamRun(make_arena(scope, **STREAM), cut_dir, extra=[KillAt(20)])
    cut.send(samples[:40], end=False)  # 40 acknowledged; killed after step 20
    cut.thread.join(60)
    assert isinstance(cut.error, Killed) and not list_checkpoints(cut_dir)
    cut.client.close()
    cut.arena.close()
    again = make_arena(scope, **STREAM)
    run2 = StreamRun(again, cut_dir, resume=True)
    assert run2.count() == 40  # every acknowledged sample, from the log
    run2.send(samples)
    res_cut = run2.join()
    assert run2.error is None and res_cut["status"] == "finished"
    assert res_cut["step"] == res_whole["step"] == 60 - 16 + 1
    assert res_cut["metrics"] == res_whole["metrics"]
    a, b = _params(whole.arena), _params(again)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    # metrics.jsonl holds one run's records, not the killed one's and the replay's
    steps = [json.loads(x)["step"] for x in (cut_dir / "metrics.jsonl").read_text().splitlines()]
    kinds = [json.loads(x)["kind"] for x in (cut_dir / "metrics.jsonl").read_text().splitlines()]
    whole_lines = (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()
    assert steps == [json.loads(x)["step"] for x in whole_lines]
    assert kinds == [json.loads(x)["kind"] for x in whole_lines]
    assert (cut_dir / LOG_FILE).is_file()


def test_resume_of_a_stream_without_checkpoints_passes_validation(compose_config, tmp_path):
    from paddlecraft.arenas.engine.validate import validate
    from paddlecraft.errors import ConfigError

    (tmp_path / "config.yaml").write_text("")
    stream = compose_config("data=stream", "data.loader.classes=10", f"resume={tmp_path}")
    validate(stream)  # its sample log is what it resumes from
    plain = compose_config("arena=classify", f"resume={tmp_path}")
    with pytest.raises(ConfigError, match="no checkpoints"):
        validate(plain)


class SigtermAt(Callback):
    """At the end of step ``step``, what a SIGTERM does (the loop's own handler)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, loop: Any, metrics: dict) -> None:
        if loop.step == self.step:
            loop._on_signal(signal.SIGTERM, None)


def test_a_sigterm_to_a_stream_run_checkpoints_and_its_resume_uses_every_sample(
    tmp_path, make_scope, caplog
):
    """Output not to a terminal (a progress line at every step, and one at the end)."""
    caplog.set_level(logging.INFO, logger="paddlecraft")
    samples = digits_samples(6, 40)
    scope = make_scope("s")
    run = StreamRun(make_arena(scope, **STREAM), tmp_path,
                    extra=[Progress(every_s=0.0, tty=False), SigtermAt(5)])  # fmt: skip
    run.send(samples[:30], end=False)
    res = run.join()
    assert run.error is None and res["status"] == "interrupted" and res["step"] == 5
    assert [c.name for c in list_checkpoints(tmp_path)] == ["step_00000005"]
    assert any("Resume with" in r.getMessage() for r in caplog.records)
    run.client.close()
    run.arena.close()
    again = StreamRun(make_arena(scope, **STREAM), tmp_path, resume=True)
    assert again.count() == 30
    again.send(samples)
    res = again.join()
    assert again.error is None and res["status"] == "finished" and res["step"] == 40 - 16 + 1
    assert res["metrics"]["train_samples"] == 40 and res["metrics"]["test_samples"] == 8


def test_feeding_a_stream_run_that_is_not_running_advises_its_resume(tmp_path):
    from paddlecraft.feed import SAMPLE_LOG, FeedError, LiveRun

    assert SAMPLE_LOG == LOG_FILE
    (tmp_path / LOG_FILE).parent.mkdir()
    (tmp_path / LOG_FILE).write_bytes(b"paddlecraft-stream-1\n")
    with pytest.raises(FeedError) as e:
        LiveRun(tmp_path)
    assert f"resume it with python run.py resume={tmp_path}" in str(e.value)
    assert "data=stream trainer.live=true" not in str(e.value)  # not a new run
