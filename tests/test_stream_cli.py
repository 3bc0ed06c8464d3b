"""The README's stream commands end to end, from the command line, output to a file:
``python run.py arena=classify data=stream trainer.live=true data.loader.classes=10`` fed
by ``paddlecraft feed RUN FOLDER --end`` and steered by ``paddlecraft live RUN ...``; and a
run killed (SIGKILL) before any checkpoint, with the default settings, resumed from its
acknowledged samples. A tiny stream (48 digits as PNG files), so it stays in the fast tier."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from paddlecraft.arenas.engine.checkpoint import list_checkpoints
from paddlecraft.arenas.engine.runlock import LOCK_NAME
from paddlecraft.arenas.stream import SampleLog
from paddlecraft.arenas.stream.store import LOG_FILE
from paddlecraft.feed import LiveRun
from tests.stream_kit import digits_samples

ROOT = Path(__file__).resolve().parents[1]
N, WARMUP, HOLDOUT = 48, 8, 4
#: the README's command, then what keeps it small (a progress line at every step)
README = ["arena=classify", "data=stream", "trainer.live=true", "data.loader.classes=10"]
SMALL = [f"data.loader.warmup={WARMUP}", f"data.loader.holdout_every={HOLDOUT}",
         "agents.classifier.encoder.hidden_size=32", "trainer.progress_every_s=0"]  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _folders(tmp: Path) -> dict[int, Path]:
    """The stream's first n digits as 8-bit PNGs in class folders named by arrival order,
    for n = 20, 36 and 48 (feeding a longer one completes a shorter one)."""
    samples = digits_samples(5, N)
    out = {}
    for n in (20, 36, N):
        root = tmp / f"digits_{n}"
        for i, s in enumerate(samples[:n]):
            (root / str(s["label"])).mkdir(parents=True, exist_ok=True)
            pixels = np.rint(np.asarray(s["pixels"][0]) * 255).astype(np.uint8)
            cv2.imwrite(str(root / str(s["label"]) / f"{i:05d}.png"), pixels)
        out[n] = root
    return out


def _token(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "live.json").read_text())["token"]
    except (OSError, ValueError, KeyError):
        return None


def _start(args: list[str], run_dir: Path, log: Path) -> subprocess.Popen:
    """``run.py args`` with stdout and stderr to ``log``; returns once it serves (a new
    live.json: a killed run leaves its old one)."""
    old = _token(run_dir)
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT,
                                env=ENV, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.time() + 120
    while _token(run_dir) in (None, old):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"the run did not go live (exit {proc.poll()}): {log.read_text()[-3000:]}")
        time.sleep(0.1)
    return proc


def _pc(*args: str) -> subprocess.CompletedProcess:
    """``paddlecraft ARGS`` (the command line), its output captured."""
    return subprocess.run([sys.executable, "-m", "paddlecraft", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return done.stdout


def _status(run_dir: Path) -> dict:
    return json.loads(_ok(_pc("live", str(run_dir), "status", "--json")))


def _finished(proc: subprocess.Popen, log: Path) -> dict:
    assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]
    return json.loads((log.parent / "run" / "results.json").read_text())


def _every_sample_used(run_dir: Path, res: dict) -> None:
    payloads, ended = SampleLog(run_dir / LOG_FILE).open()
    assert ended and len(payloads) == N
    assert res["status"] == "finished" and res["step"] == N - WARMUP + 1
    assert res["metrics"]["train_samples"] == N  # every acknowledged sample was consumed
    assert res["metrics"]["test_samples"] == N // HOLDOUT
    left = {p.name for p in run_dir.iterdir()} & {"live.json", LOCK_NAME}
    assert not left, left


def test_the_readme_stream_command_fed_and_steered_from_the_command_line(tmp_path):
    folders = _folders(tmp_path)
    run_dir, log = tmp_path / "run", tmp_path / "run.log"
    proc = _start([*README, *SMALL, f"hydra.run.dir={run_dir}"], run_dir, log)
    try:
        assert _ok(_pc("feed", str(run_dir), str(folders[20]), "--no-progress")) == (
            "sent 20 samples; the run has 20\n"
        )
        out = _ok(_pc("live", str(run_dir), "status"))
        assert out.startswith("StreamClassifyArena: running  step ")
        assert _status(run_dir)["total_steps"] is None
        assert "(state paused)" in _ok(_pc("live", str(run_dir), "pause"))
        out = _ok(_pc("live", str(run_dir), "set", "agents.classifier.lr=5e-4"))
        assert "agents.classifier.lr: 0.001 -> 0.0005" in out
        for bad, needle in [
            ("agents.classifier.lr=-0.1", "agents.classifier.lr=-0.1: must be >= 0"),
            ("agents.classifier.lr=inf", "must be a finite number"),
            ("trainer.eval_every=2.5", "trainer.eval_every"),
            ("agents.classifier.lrr=0.1", "did you mean agents.classifier.lr?"),
        ]:
            done = _pc("live", str(run_dir), "set", bad)
            assert done.returncode == 2 and done.stdout == "", (bad, done.stdout, done.stderr)
            lines = done.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: set: ") and needle in lines[0]
        assert "(state running)" in _ok(_pc("live", str(run_dir), "resume"))
        out = _ok(_pc("feed", str(run_dir), str(folders[N]), "--end", "--no-progress"))
        assert out == f"sent {N - 20} samples; the run has {N} (stream ended)\n"
        res = _finished(proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
    _every_sample_used(run_dir, res)
    changes = (run_dir / "resume_changes.jsonl").read_text().splitlines()
    assert len(changes) == 1 and "agents.classifier.lr" in changes[0]  # the refused ones: none
    assert "lr: 0.0005" in (run_dir / "config.yaml").read_text()
    lines = [x for x in log.read_text().splitlines() if "steps/s" in x]
    assert lines and all("(no known total)" in x for x in lines)
    done = _pc("live", str(run_dir), "status")
    assert done.returncode == 2 and "the run has ended (status finished)" in done.stderr


@pytest.mark.slow
def test_a_stream_killed_before_any_checkpoint_resumes_from_its_acknowledged_samples(tmp_path):
    """Default settings (trainer.checkpoint_every=0): SIGKILL with 20 acknowledged samples
    and none checkpointed; resume= replays them, takes more, stops; resume= again ends it."""
    folders = _folders(tmp_path)
    run_dir, log = tmp_path / "run", tmp_path / "run.log"
    proc = _start([*README, *SMALL, f"hydra.run.dir={run_dir}"], run_dir, log)
    try:
        _ok(_pc("feed", str(run_dir), str(folders[20]), "--no-progress"))
        deadline = time.time() + 60
        while _status(run_dir)["step"] < 5 and time.time() < deadline:
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not list_checkpoints(run_dir) and (run_dir / "live.json").exists()

        proc = _start([f"resume={run_dir}"], run_dir, log)
        assert LiveRun(run_dir).call("GET", "stream")["count"] == 20  # nothing lost
        out = _ok(_pc("feed", str(run_dir), str(folders[36]), "--no-progress"))
        assert out == "sent 16 samples; the run has 36\n"
        assert "stop: applied" in _ok(_pc("live", str(run_dir), "stop"))
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
        assert json.loads((run_dir / "results.json").read_text())["status"] == "stopped"

        proc = _start([f"resume={run_dir}"], run_dir, log)
        out = _ok(_pc("feed", str(run_dir), str(folders[N]), "--end", "--no-progress"))
        assert out == f"sent {N - 36} samples; the run has {N} (stream ended)\n"
        res = _finished(proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
    _every_sample_used(run_dir, res)
