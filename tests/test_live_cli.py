"""``paddlecraft live RUN_DIR ...`` through a real run, and the config path of a live ``set``
(config.yaml, resume_changes.jsonl) against a stop and ``resume=`` with that learning rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from live_kit import AtSteps
from safetensors.numpy import load_file

from paddlecraft.arenas.engine import app as engine_app
from paddlecraft.arenas.engine.app import run_config
from paddlecraft.arenas.engine.live.control import CONTROL_FILE
from paddlecraft.livecli import main as live_main

ROOT = Path(__file__).resolve().parents[1]
QUIET = ("trainer.progress=false",)


def _live(capsys, *args: str) -> tuple[int, str, str]:
    code = live_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _wait(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def test_the_live_command_steers_a_real_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "run.py"), "arena=classify", "trainer.live=true",
           "arena.epochs=400", f"hydra.run.dir={run_dir}", *QUIET]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait(lambda: (run_dir / "live.json").exists() or proc.poll() is not None, 120, "live")
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        code, out, _ = _live(capsys, str(run_dir), "status")
        assert code == 0 and out.startswith("ClassifyArena: running  step ")
        assert "/9200 (epoch " in out  # 400 epochs of 23 steps

        code, out, _ = _live(capsys, str(run_dir), "pause")
        assert code == 0 and "pause: applied at step " in out and "(state paused)" in out
        step = int(out.split("applied at step ")[1].split()[0])
        code, out, _ = _live(capsys, str(run_dir), "status", "--json")
        status = json.loads(out)
        assert status["state"] == "paused" and status["step"] == step
        time.sleep(0.5)
        assert json.loads(_live(capsys, str(run_dir), "status", "--json")[1])["step"] == step

        code, out, _ = _live(capsys, str(run_dir), "set", "agents.classifier.lr=5e-4")
        assert code == 0 and "agents.classifier.lr: 0.001 -> 0.0005" in out
        code, _, err = _live(capsys, str(run_dir), "set", "agents.classifier.hidden=7")
        assert code == 2 and err.startswith("error: set: no setting agents.classifier.hidden in")
        code, out, _ = _live(capsys, str(run_dir), "checkpoint")
        assert code == 0 and f"checkpoints/step_{step:08d}" in out
        code, out, _ = _live(capsys, str(run_dir), "evaluate")
        assert code == 0 and "test_accuracy=" in out
        code, out, _ = _live(capsys, str(run_dir), "resume")
        assert code == 0 and "(state running)" in out
        code, out, _ = _live(capsys, str(run_dir), "open")
        token = json.loads((run_dir / "live.json").read_text())["token"]
        assert out.strip().endswith(f"/#token={token}") and out.startswith("http://127.0.0.1:")

        code, out, _ = _live(capsys, str(run_dir), "stop")
        assert code == 0 and "stop: applied" in out
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-2000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "stopped" and not (run_dir / "live.json").exists()
    commands = [
        json.loads(x)["command"] for x in (run_dir / CONTROL_FILE).read_text().split("\n") if x
    ]
    assert commands == ["pause", "set", "checkpoint", "evaluate", "resume", "stop"]
    saved = (run_dir / "config.yaml").read_text()
    assert "lr: 0.0005" in saved  # a resume keeps the live change
    assert token not in stderr  # never in a log line
    code, _, err = _live(capsys, str(run_dir), "status")
    assert code == 2 and err == (
        f"error: {run_dir} is not live: the run has ended (status stopped); resume it with "
        f"paddlecraft resume={run_dir} trainer.live=true\n"
    )


def test_live_command_mistakes_are_one_line(tmp_path, capsys):
    code, _, err = _live(capsys, str(tmp_path / "nope"), "status")
    assert code == 2 and err.startswith("error: ") and "no such run folder" in err
    code, _, err = _live(capsys, str(tmp_path), "status")
    assert code == 2 and "no live.json" in err and "trainer.live=true" in err
    (tmp_path / "live.json").write_text(json.dumps({"host": "127.0.0.1", "port": 9, "token": "t"}))
    code, _, err = _live(capsys, str(tmp_path), "pause")
    assert code == 2 and "does not answer" in err and err.count("\n") == 1
    code, _, err = _live(capsys, str(tmp_path), "jump")
    assert code == 2 and "unknown live command 'jump'" in err
    code, _, err = _live(capsys, str(tmp_path), "set", "lr")
    assert code == 2 and "is not key=value" in err


def test_the_command_line_dispatches_live(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), "live", str(tmp_path), "status"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: ") and "no live.json" in r.stderr


def _final(run_dir: Path) -> dict[str, np.ndarray]:
    newest = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    out = {}
    for f in (newest / "agents").glob("*/weights.safetensors"):
        out.update(load_file(f))
    return out


def test_set_lr_in_a_config_run_equals_stop_and_resume_with_that_lr(
    compose_config, tmp_path, monkeypatch
):
    k = 10
    real = engine_app.trainer_callbacks

    def with_set(cfg, overrides=()):
        def set_lr(loop, c):
            assert c.post("/api/set?wait=0", json={"agents.classifier.lr": 5e-4}).status_code == 202

        return [*real(cfg, overrides), AtSteps([k], set_lr)]

    def run(run_dir: Path, *overrides: str) -> dict:
        cfg = compose_config(*overrides, *QUIET)
        return run_config(cfg, run_dir, overrides=list(overrides))

    monkeypatch.setattr(engine_app, "trainer_callbacks", with_set)
    out = run(tmp_path / "set", "trainer.live.enabled=true", "arena.epochs=2")
    monkeypatch.setattr(engine_app, "trainer_callbacks", real)
    assert out["status"] == "finished" and out["step"] == 46
    run(tmp_path / "stop", f"trainer.max_steps={k}", "arena.epochs=2")
    resumed = run(tmp_path / "stop", f"resume={tmp_path / 'stop'}", "trainer.max_steps=null",
                  "agents.classifier.lr=5e-4")  # fmt: skip
    assert resumed["step"] == 46
    a, b = _final(tmp_path / "set"), _final(tmp_path / "stop")
    assert a.keys() == b.keys() and all(np.array_equal(a[n], b[n]) for n in a)
    assert out["metrics"] == resumed["metrics"]
    change = json.loads((tmp_path / "set" / "resume_changes.jsonl").read_text())
    assert change["step"] == k and change["changes"]["agents.classifier.lr"]["to"] == 5e-4
    # the live run's own resume= from its step-k checkpoint would keep the new rate
    assert (tmp_path / "set" / "checkpoints" / f"step_{k:08d}").is_dir()


@pytest.mark.slow
def test_data_parallel_rank_0_serves_and_every_rank_stops_at_the_same_step(tmp_path, capsys):
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
           "--log_dir", str(tmp_path / "logs"), str(ROOT / "run.py"), "arena=classify",
           "trainer.live=true", "arena.epochs=400", f"hydra.run.dir={run_dir}", *QUIET]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait(lambda: (run_dir / "live.json").exists() or proc.poll() is not None, 180, "live")
        assert proc.poll() is None
        code, out, _ = _live(capsys, str(run_dir), "set", "agents.classifier.lr=5e-4")
        assert code == 0, out
        code, out, _ = _live(capsys, str(run_dir), "stop")
        assert code == 0 and "stop: applied at step " in out
        step = int(out.split("applied at step ")[1].split()[0])
        proc.communicate(timeout=180)  # a rank that missed the stop would hang here
    finally:
        if proc.poll() is None:
            proc.kill()
    logs = {p.name: p.read_text() for p in (tmp_path / "logs").glob("workerlog.*")}
    assert proc.returncode == 0, "".join(logs.values())[-3000:]
    assert len(logs) == 2  # both ranks ended: rank 1 left its loop at rank 0's step
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "stopped" and results["step"] == step
