"""A live data-parallel run: a ``set``, an ``evaluate`` and a ``pause`` applied by rank 0
at step k reach rank 1 at step k, and a pause longer than a collective may wait (gloo:
30 s) ends in a resume, not a crash. Two processes under ``paddle.distributed.launch`` run
``tests/dp_live_run.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
K = 4  # the step the set and the pause apply at (dp_live_run.py --k)


def _run(tmp_path: Path, pause: float, heartbeat: float | None) -> tuple[list[dict], Path]:
    """Launch the two-rank run; return each rank's record and the run folder."""
    out, logs = tmp_path / "out", tmp_path / "logs"
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
           "--log_dir", str(logs), str(ROOT / "tests" / "dp_live_run.py"), str(out),
           "--k", str(K), "--pause", str(pause)]  # fmt: skip
    if heartbeat is not None:
        cmd += ["--heartbeat", str(heartbeat)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    worker_logs = {p.name: p.read_text() for p in logs.glob("workerlog.*")}
    assert r.returncode == 0, "".join(worker_logs.values())[-4000:]
    follower = worker_logs["workerlog.1"]
    assert f"live: set from rank 0 applied at step {K}: " in follower, follower[-2000:]
    assert "{'agents.classifier.lr': {'from': 0.001, 'to': 0.0005}}" in follower
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    return ranks, out


def _check(ranks: list[dict], out: Path, pause: float) -> None:
    zero, one = (r["steps"] for r in ranks)
    # the live evaluate at step k ran on both ranks (the run has no other evaluation)
    assert ranks[0]["evaluations"] == ranks[1]["evaluations"] == [K], ranks
    lrs = [s["lr"] for s in one]
    # rank 1 trained step k with the old rate and every later step with the new one
    assert lrs == [0.001] * K + [0.0005] * 3 == [s["lr"] for s in zero], (zero, one)
    # rank 1 waited out rank 0's pause between steps k and k + 1
    assert one[K]["time"] - one[K - 1]["time"] >= pause - 0.5
    a, b = np.load(out / "weights_0.npz"), np.load(out / "weights_1.npz")
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
    log = [json.loads(x) for x in (out / "run" / "control.jsonl").read_text().splitlines()]
    assert [(c["command"], c["step"]) for c in log] == [
        ("set", K), ("pause", K), ("evaluate", K), ("resume", K)]  # fmt: skip
    results = json.loads((out / "run" / "results.json").read_text())
    assert results["status"] == "finished" and results["step"] == K + 3


@pytest.mark.slow
def test_a_set_at_step_k_reaches_rank_1_at_step_k_through_a_pause(tmp_path):
    """Rank 0 pauses for 3 s, broadcasting every 0.5 s meanwhile (several rounds)."""
    ranks, out = _run(tmp_path, pause=3, heartbeat=0.5)
    _check(ranks, out, pause=3)


@pytest.mark.slow
def test_a_pause_longer_than_a_collective_may_wait_ends_in_a_resume(tmp_path):
    """40 s paused with the default heartbeat: a single 40-s broadcast would time out."""
    ranks, out = _run(tmp_path, pause=40, heartbeat=None)
    _check(ranks, out, pause=40)
