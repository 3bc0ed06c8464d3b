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
from paddlecraft.craftdata import Split
from paddlecraft.craftdata.loader import BatchLoader, LazySplit, Shard

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


class _Counted(LazySplit):
    """A lazy split that records which examples were decoded."""

    def __init__(self, n: int) -> None:
        self.y = np.arange(n) % 3
        self.read: list[int] = []

    def path(self, i: int) -> str:
        return f"item_{i}"

    def load(self, i: int, rng: np.random.Generator | None) -> tuple[np.ndarray, ...]:
        self.read.append(i)
        return (np.full(2, i, np.float32), np.int64(self.y[i]))

    def empty_item(self) -> tuple[np.ndarray, ...]:
        return (np.zeros(2, np.float32), np.int64(0))


@pytest.mark.parametrize("lazy", [False, True])
def test_the_loader_shards_once_and_reads_only_its_rows(lazy):
    """Each process's batch is its rows rank::world of the global batch, with their share;
    a lazy split decodes only those rows."""
    n, size = 23, 8
    x, y = np.arange(n * 2, dtype=np.float32).reshape(n, 2), np.arange(n) % 3
    split = _Counted(n) if lazy else Split(x, y)
    whole = list(BatchLoader(split, size, seed=4).epoch(1))
    if lazy:
        split.read.clear()
    got = list(BatchLoader(split, size, seed=4, shard=(1, 3)).epoch(1))
    assert len(got) == len(whole) == 3
    for part, full in zip(got, whole):
        assert isinstance(part, Shard)
        assert all(np.array_equal(p, f[1::3]) for p, f in zip(part, full))
        assert part.share == pytest.approx(len(full[0][1::3]) / len(full[0]))
    if lazy:  # only this process's rows were decoded
        assert sorted(split.read) == sorted(int(r[0]) for b in got for r in b[0])
    # one process (or none asked): whole batches, no Shard
    plain = list(BatchLoader(split, size, seed=4, shard=(0, 1)).epoch(1))
    assert not isinstance(plain[0], Shard)
    assert all(np.array_equal(a, b) for p, w in zip(plain, whole) for a, b in zip(p, w))
