"""Data parallelism: two processes reach the parameters one process reaches on the combined batch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from paddlecraft.craftdata import Split
from paddlecraft.craftdata.loader import BatchLoader, LazySplit, Shard

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["arena=classify", "trainer.max_steps=25", "trainer.progress=false"]


def _weights(run_dir: Path, agent: str = "classifier") -> dict[str, np.ndarray]:
    newest = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    return load_file(newest / "agents" / agent / "weights.safetensors")


def _one_process(args: list[str], run_dir: Path) -> None:
    """The one-process reference run, in this process (the launcher's command line is the
    point of these tests, not this run's)."""
    from tests.mistake_driver import run_case

    r = run_case([*args, f"hydra.run.dir={run_dir}"], str(run_dir.parent))
    assert r["rc"] == 0, r["stderr"][-3000:]


def test_two_processes_match_one_process_on_combined_batch(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    _one_process(ARGS, one)
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


#: WGAN-GP with two critic minibatches per step of an odd size (15: the processes' rows of
#: each minibatch differ from their rows of the stacked 30), a generator without batch norm
#: (each process's BN would normalise only its own rows), cheap evaluation
GAN_ARGS = ["arena=gan", "arena.loss=wgan_gp", "arena.n_critic=2", "arena.batch_size=15",
            "agents.generator.encoder.norm=none", "trainer.max_steps=6", "trainer.progress=false",
            "arena.eval_samples=50", "arena.ref_samples=50", "arena.final_samples=20",
            "arena.featnet.epochs=1"]  # fmt: skip


@pytest.mark.slow
def test_gan_two_processes_match_one_process(tmp_path):
    """The GAN's loader shards each critic minibatch: two processes take the steps one
    process takes (generator and discriminator weights after 6 steps)."""
    one, two = tmp_path / "one", tmp_path / "two"
    _one_process(GAN_ARGS, one)
    r = subprocess.run(
        [
            sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
            "--log_dir", str(tmp_path / "logs"), str(ROOT / "run.py"), *GAN_ARGS,
            f"hydra.run.dir={two}",
        ],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("workerlog.*"))
    assert r.returncode == 0, logs[-3000:]
    assert "data-parallel: {'rank': 1, 'world_size': 2}" in logs
    results = json.loads((two / "results.json").read_text())
    assert results["status"] == "finished" and results["step"] == 6
    for agent in ("generator", "discriminator"):
        a, b = _weights(one, agent), _weights(two, agent)
        assert a.keys() == b.keys() and len(a) > 0
        worst = max(float(np.abs(a[k] - b[k]).max()) for k in a)
        assert worst < 1e-5, (agent, worst)


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


@pytest.mark.parametrize("lazy", [False, True])
def test_the_loader_shards_each_minibatch_of_a_stacked_batch(lazy):
    """``minibatches=k``: a batch is k minibatches read at once (the GAN's n_critic); each
    process gets its rows rank::world of every minibatch, minibatch after minibatch."""
    n, size, k = 40, 6, 2  # batches of 12 = two minibatches of 6
    x, y = np.arange(n * 2, dtype=np.float32).reshape(n, 2), np.arange(n) % 3
    split = _Counted(n) if lazy else Split(x, y)
    whole = list(BatchLoader(split, size * k, seed=4, drop_last=True).epoch(0))
    if lazy:
        split.read.clear()
    got = list(BatchLoader(split, size * k, seed=4, drop_last=True, shard=(1, 4),
                           minibatches=k).epoch(0))  # fmt: skip
    assert len(got) == len(whole) == 3
    for part, full in zip(got, whole):
        assert isinstance(part, Shard) and part.share == pytest.approx(4 / 12)
        for p, f in zip(part, full):  # rows 1 and 5 of each minibatch of 6
            assert np.array_equal(p, np.concatenate([f[1:6:4], f[7:12:4]]))
    if lazy:
        assert sorted(split.read) == sorted(int(r[0]) for b in got for r in b[0])
    with pytest.raises(ValueError, match="multiple of minibatches"):
        BatchLoader(split, 7, minibatches=2)


def test_gan_data_gives_each_process_its_rows_of_every_critic_minibatch():
    from paddlecraft.arenas.gan.data import GanData
    from paddlecraft.craftdata import load_digits

    data = load_digits(seed=0)
    one = next(GanData(data, 3, 5, 2, None).batches(0))
    shards = [next(GanData(data, 3, 5, 2, None, shard=(r, 2)).batches(0)) for r in (0, 1)]
    assert not isinstance(one, Shard) and one[0].shape == (2, 5, 1, 8, 8)
    for r, part in enumerate(shards):
        xs, ys = part
        assert isinstance(part, Shard) and part.share == pytest.approx((3 - r) / 5)
        assert xs.shape == (2, 3 - r, 1, 8, 8) and ys.shape == (2, 3 - r)
        assert np.array_equal(xs, one[0][:, r::2]) and np.array_equal(ys, one[1][:, r::2])
