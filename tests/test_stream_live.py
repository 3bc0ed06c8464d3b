"""data=stream through the real command line and live server: a run SIGKILLed mid-stream,
resumed with ``resume=``, fed the rest by a client that asks the count, ends bit-identical
to a run never killed that received the same stream in the same order.

Slow (two runs of ``run.py`` plus a resume), through the live server (``trainer.live``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from paddlecraft.arenas.engine.checkpoint import list_checkpoints
from paddlecraft.feed import LiveRun
from tests.stream_kit import digits_samples

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
RUN = [
    "arena=classify", "data=stream", "trainer.live=true", "data.loader.classes=10",
    "data.loader.warmup=16", "data.loader.window=64", "trainer.progress=false",
    "agents.classifier.encoder.hidden_size=64",
]  # fmt: skip


def _start(
    args: list[str], run_dir: Path, old_token: str | None = None
) -> tuple[subprocess.Popen, LiveRun]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 120
    while True:  # a live.json of this run (a killed run leaves its own behind)
        try:
            token = json.loads((run_dir / "live.json").read_text())["token"]
            if token != old_token:
                return proc, LiveRun(run_dir)
        except (OSError, ValueError, KeyError):
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"the run did not go live: {proc.stderr.read()[-3000:]}")
        time.sleep(0.1)


def _send(run: LiveRun, samples: list[dict], upto: int) -> None:
    for i in range(int(run.call("GET", "stream")["count"]), upto):
        run.call("POST", "samples", {**samples[i], "index": i})


def _final_weights(run_dir: Path) -> dict[str, np.ndarray]:
    return load_file(list_checkpoints(run_dir)[0] / "agents" / "classifier" / "weights.safetensors")


def _finish(proc: subprocess.Popen) -> None:
    assert proc.wait(timeout=300) == 0, proc.stderr.read()[-3000:]


def test_sigkill_mid_stream_then_resume_is_bit_identical(tmp_path):
    samples = digits_samples(3, 150)
    whole = tmp_path / "whole"
    proc, run = _start([*RUN, f"hydra.run.dir={whole}"], whole)
    _send(run, samples, len(samples))
    run.call("POST", "end")
    _finish(proc)

    cut = tmp_path / "cut"
    proc, run = _start([*RUN, "trainer.checkpoint_every=10", f"hydra.run.dir={cut}"], cut)
    _send(run, samples, 100)
    deadline = time.time() + 120
    while len(list_checkpoints(cut)) < 2 and time.time() < deadline:  # trained a while
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    token = json.loads((cut / "live.json").read_text())["token"]
    proc, run = _start([f"resume={cut}"], cut, old_token=token)
    assert int(run.call("GET", "stream")["count"]) == 100  # every acknowledged sample
    _send(run, samples, len(samples))  # the client resends the rest
    run.call("POST", "end")
    _finish(proc)

    a, b = (
        json.loads((whole / "results.json").read_text()),
        json.loads((cut / "results.json").read_text()),
    )
    assert a["step"] == b["step"] == 150 - 16 + 1 and a["metrics"] == b["metrics"]
    wa, wb = _final_weights(whole), _final_weights(cut)
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
