"""Data parallelism: two processes reach the parameters one process reaches on the combined batch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from paddlecraft.agents import distributed

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["arena=classify", "trainer.max_steps=25", "trainer.progress=false"]


def _weights(run_dir: Path) -> dict[str, np.ndarray]:
    newest = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    return load_file(newest / "agents" / "classifier" / "weights.safetensors")


def test_shard_splits_rows_and_weights_by_share(monkeypatch):
    x = np.arange(10)
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "3")
    monkeypatch.setenv("PADDLE_TRAINER_ID", "1")
    (local,), share = distributed.shard(x)
    assert local.tolist() == [1, 4, 7] and share == pytest.approx(0.3)
    monkeypatch.setenv("PADDLE_TRAINER_ID", "0")
    (local,), share = distributed.shard(x)
    assert local.tolist() == [0, 3, 6, 9] and share == pytest.approx(0.4)


def test_two_processes_match_one_process_on_combined_batch(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *ARGS, f"hydra.run.dir={one}"],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    r = subprocess.run(
        [
            sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
            "--log_dir", str(tmp_path / "logs"), str(ROOT / "run.py"), *ARGS, f"hydra.run.dir={two}",
        ],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("workerlog.*"))
    assert r.returncode == 0, logs[-3000:]
    assert "data-parallel: {'rank': 1, 'world_size': 2}" in logs
    a, b = _weights(one), _weights(two)
    assert a.keys() == b.keys()
    # batches of 64 rows, 32 per process (the last of an epoch is uneven: 29 rows)
    worst = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    assert worst < 1e-5, worst
    moved = max(float(np.abs(a[k]).max()) for k in a)
    assert moved > 0


def test_gan_arena_runs_data_parallel(tmp_path):
    run = tmp_path / "gan"
    r = subprocess.run(
        [
            sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
            "--log_dir", str(tmp_path / "logs"), str(ROOT / "run.py"), "arena=gan",
            "trainer.max_steps=4", "trainer.progress=false", f"hydra.run.dir={run}",
        ],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("workerlog.*"))
    assert r.returncode == 0, logs[-3000:]
    assert "data-parallel: {'rank': 1, 'world_size': 2}" in logs
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "finished" and results["step"] == 4
