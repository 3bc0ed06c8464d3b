"""Runs that can't be spoiled: the run-folder lock, honest divergence, resume that can
change course, and runs that end at chance. In-process unless the command line (its
exit code, its one line) is the point."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas import run_arena
from paddlecraft.arenas.engine.app import DIVERGED, main_entry, run_config
from paddlecraft.arenas.engine.callbacks import standard_callbacks
from paddlecraft.arenas.engine.resume import CHANGES_FILE, may_change
from paddlecraft.arenas.engine.runlock import OWNER_NAME, RunDirError, RunLock
from tests.toy_arenas import Regressor, ToyArena

ROOT = Path(__file__).resolve().parents[1]
QUIET = ("trainer.progress=false",)


def _strict(path: Path) -> dict:
    """Parse JSON the way strict parsers do: NaN/Infinity are errors."""

    def refuse(token: str) -> None:
        raise ValueError(f"{path} holds a bare {token}: not valid JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def _weights(run_dir: Path, step: int | None = None) -> dict[str, np.ndarray]:
    found = sorted((run_dir / "checkpoints").glob("step_*"))
    folder = found[-1] if step is None else run_dir / "checkpoints" / f"step_{step:08d}"
    assert folder in found
    out = {}
    for f in (folder / "agents").glob("*/weights.safetensors"):
        out.update(load_file(f))
    return out


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and bool(a) and all(np.array_equal(a[k], b[k]) for k in a)


def _cli(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args, *QUIET],
        cwd=cwd, capture_output=True, text=True, env=env, **kw,
    )  # fmt: skip


# ----------------------------------------------------------------------------- the lock
_HOLDER = """
import os, sys, time
from paddlecraft.arenas.engine.runlock import RunLock
lock = RunLock(sys.argv[1], resume=True).__enter__()
print("held", flush=True)
if sys.argv[2] == "die":
    os.kill(os.getpid(), 9)
time.sleep(120)
"""


def _hold(run_dir: Path, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run_dir), mode],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    if mode == "hold":
        assert proc.stdout.readline().strip() == "held"
    return proc


def test_live_lock_refuses_a_second_run_naming_the_holder(tmp_path):
    run_dir = tmp_path / "run"
    holder = _hold(run_dir, "hold")
    try:
        with pytest.raises(RunDirError, match=f"in use by a live run \\(pid {holder.pid} on host"):
            RunLock(run_dir, resume=True).__enter__()
        # the command (its main, in this process; the lock is the other process's): one
        # line, exit 2, and Hydra wrote nothing into the live folder
        from tests.mistake_driver import run_case

        before = sorted(p.name for p in run_dir.iterdir())
        r = run_case([f"hydra.run.dir={run_dir}", "arena.epochs=1", *QUIET], str(tmp_path))
        errors = [line for line in r["stderr"].splitlines() if line.startswith("error:")]
        assert r["rc"] == 2 and "Traceback" not in r["stderr"], r["stderr"][-2000:]
        assert len(errors) == 1 and f"pid {holder.pid}" in errors[0]
        assert sorted(p.name for p in run_dir.iterdir()) == before  # no .hydra/, no log
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_a_killed_run_is_taken_over(tmp_path, caplog):
    run_dir = tmp_path / "run"
    dead = _hold(run_dir, "die")
    assert dead.wait() == -signal.SIGKILL
    assert json.loads((run_dir / OWNER_NAME).read_text())["pid"] == dead.pid  # left behind
    with caplog.at_level(logging.WARNING, logger="paddlecraft"):
        with RunLock(run_dir, resume=True):
            owner = json.loads((run_dir / OWNER_NAME).read_text())
            assert owner["pid"] == os.getpid()
    assert f"taking over the lock left by pid {dead.pid}" in caplog.text
    assert not (run_dir / OWNER_NAME).exists()  # released cleanly


def test_finished_run_folder_is_not_reused_by_a_fresh_run(tmp_path):
    arena = ToyArena({"reg": Regressor("reg", seed=1, lr=0.05)}, epochs=1)
    run_arena(arena, tmp_path, standard_callbacks(progress=False))
    with pytest.raises(RunDirError, match="already holds a finished run") as info:
        RunLock(tmp_path, resume=False).__enter__()
    assert f"resume={tmp_path}" in str(info.value)  # the fix is in the message
    with RunLock(tmp_path, resume=True):  # continuing it is what resume= is for
        pass


def test_run_arena_from_python_takes_the_lock_too(tmp_path):
    arena = ToyArena({"reg": Regressor("reg", seed=1, lr=0.05)}, epochs=1)
    with RunLock(tmp_path, resume=True):  # another run (here: this process) holds it
        with pytest.raises(RunDirError, match=f"pid {os.getpid()}"):
            run_arena(arena, tmp_path, standard_callbacks(progress=False))
    assert not (tmp_path / "results.json").exists()  # refused before any work
    assert run_arena(arena, tmp_path, standard_callbacks(progress=False))["status"] == "finished"


# ----------------------------------------------------------------------------- divergence
def test_divergence_message_names_the_kept_checkpoint_and_results_are_strict_json(tmp_path):
    arena = ToyArena({"reg": Regressor("reg", seed=1, lr=0.05)}, epochs=3, nan_at_step=7)
    out = run_arena(arena, tmp_path, standard_callbacks(progress=False, checkpoint_every=5))
    assert out["status"] == "diverged"
    assert "The last good checkpoint is step_00000005" in out["stop_reason"]
    results = _strict(tmp_path / "results.json")
    assert results["headline_value"] is None
    assert results["last_train_metrics"]["loss"] is None
    assert results["null_reasons"]["headline_value"] == "no evaluation: the run diverged at step 7"
    assert results["null_reasons"]["last_train_metrics.loss"] == "was nan"
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda t: pytest.fail(f"bare {t} in metrics.jsonl"))


def test_divergence_without_a_checkpoint_says_none_exists(tmp_path):
    arena = ToyArena({"reg": Regressor("reg", seed=1, lr=0.05)}, epochs=3, nan_at_step=2)
    out = run_arena(arena, tmp_path, standard_callbacks(progress=False))
    assert "No checkpoint was saved before it" in out["stop_reason"]
    assert "The last good checkpoint" not in out["stop_reason"]
    assert not (tmp_path / "checkpoints").exists()


def test_diverged_command_exits_3_with_one_error_line(tmp_path):
    run_dir = tmp_path / "run"
    r = _cli(
        [f"hydra.run.dir={run_dir}", "agents.classifier.optimizer._target_=paddle.optimizer.SGD",
         "agents.classifier.lr=1e6"],
        tmp_path,
    )  # fmt: skip
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == DIVERGED == 3, r.stderr[-2000:]
    assert len(errors) == 1 and "diverged" in errors[0] and "No checkpoint" in errors[0]
    assert _strict(run_dir / "results.json")["status"] == "diverged"


# ----------------------------------------------------------------------------- resume
@pytest.fixture
def classify(compose_config, tmp_path):
    """``run(run_dir, *overrides)``: a digits classify run, in process (run.py's path)."""

    def run(run_dir: Path, *overrides: str) -> dict:
        cfg = compose_config(*overrides, *QUIET)
        return run_config(cfg, run_dir, overrides=list(overrides))

    return run


def test_extending_a_finished_run_matches_an_uninterrupted_longer_one(classify, tmp_path):
    classify(tmp_path / "long", "arena.epochs=2")
    short = tmp_path / "short"
    classify(short, "arena.epochs=1")
    out = classify(short, f"resume={short}", "arena.epochs=2")
    assert out["status"] == "finished" and out["epoch"] == 2
    assert _same(_weights(tmp_path / "long"), _weights(short))
    long_results = _strict(tmp_path / "long" / "results.json")
    assert out["metrics"] == long_results["metrics"]
    record = json.loads((short / CHANGES_FILE).read_text())
    assert record["changes"] == {"arena.epochs": {"from": 1, "to": 2}}
    assert record["step"] == 23  # one epoch of digits at batch 64


def test_resume_applies_a_new_learning_rate_and_records_it(classify, tmp_path, caplog):
    run_dir = tmp_path / "run"
    classify(run_dir, "arena.epochs=1")
    after_one = _weights(run_dir)
    with caplog.at_level(logging.INFO, logger="paddlecraft"):
        # lr=0: if the change is applied, a second epoch leaves every weight where it was
        classify(run_dir, f"resume={run_dir}", "arena.epochs=2", "agents.classifier.lr=0")
    assert _same(after_one, _weights(run_dir))
    assert "resume: agents.classifier.lr changed 0.001 -> 0.0 from step 23" in caplog.text
    assert "ignoring the command line" not in caplog.text
    record = json.loads((run_dir / CHANGES_FILE).read_text())
    assert record["step"] == 23
    assert record["changes"]["agents.classifier.lr"] == {"from": 0.001, "to": 0.0}
    # config.yaml now holds the new value, so a later resume keeps it
    assert "lr: 0.0" in (run_dir / "config.yaml").read_text()


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("agents.classifier.encoder.hidden_size=32", "agents.classifier.encoder.hidden_size"),
        ("encoder@agents.classifier.encoder=cnn", "chooses another encoder"),
        ("seed=1", "seed cannot change"),
        ("data=mnist", "chooses another data"),
        ("arena.batch_size=32", "arena.batch_size cannot change"),
    ],
)
def test_resume_refuses_changes_that_void_the_checkpoint(classify, tmp_path, override, words):
    run_dir = tmp_path / "run"
    classify(run_dir, "arena.epochs=1", "trainer.max_steps=2")
    before = (run_dir / "config.yaml").read_text()
    with pytest.raises(ConfigError, match="resume: ") as info:
        classify(run_dir, f"resume={run_dir}", override)
    assert words in str(info.value)
    assert (run_dir / "config.yaml").read_text() == before
    assert not (run_dir / CHANGES_FILE).exists()


def test_resume_with_the_same_choices_changes_nothing(classify, tmp_path):
    run_dir = tmp_path / "run"
    classify(run_dir, "arena.epochs=1", "trainer.max_steps=2")
    classify(run_dir, f"resume={run_dir}", "arena=classify", "arena.epochs=1")
    assert not (run_dir / CHANGES_FILE).exists()


def test_the_documented_resume_table():
    allowed = ["agents.policy.lr", "agents.a.lr_scheduler.gamma", "agents.a.grad_clip",
               "arena.epochs", "arena.eval_games", "arena.eval.games.random",
               "arena.eval.simulations", "trainer.checkpoint_every", "data.workers"]  # fmt: skip
    refused = ["seed", "arena.batch_size", "agents.a.encoder.hidden_size",
               "agents.a.optimizer._target_", "data.loader.path", "data.num_classes",
               "arena.eval.headline_metric", "arena.search.simulations"]  # fmt: skip
    assert all(may_change(k) for k in allowed)
    assert not any(may_change(k) for k in refused)
    doc = (ROOT / "docs" / "reliability.md").read_text()
    for k in ("`arena.epochs`", "`trainer.*`", "`agents.<name>.lr`", "`seed`"):
        assert k in doc


# ----------------------------------------------------------------------------- chance
def test_collapsed_run_is_flagged_at_chance(classify, tmp_path, caplog):
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="paddlecraft"):
        out = classify(run_dir, "arena.epochs=1", "agents.classifier.lr=1e5")  # collapses
    results = _strict(run_dir / "results.json")
    assert out["status"] == "finished"
    assert results["at_chance"] is True
    assert results["headline_value"] <= results["chance_level"]
    assert results["chance_level"] >= 0.1  # at least 1 / 10 classes
    assert "at or below chance" in results["warning"]
    last = [r.getMessage() for r in caplog.records][-1]
    assert "WARNING:" in last and "at or below chance" in last


def test_a_run_that_learned_is_not_flagged(classify, tmp_path):
    run_dir = tmp_path / "run"
    classify(run_dir, "arena.epochs=1")
    results = _strict(run_dir / "results.json")
    assert results["at_chance"] is False and "warning" not in results
    assert results["headline_value"] > 3 * results["chance_level"]


def test_main_entry_returns_nan_for_a_diverged_sweep_job(compose_config, tmp_path):
    cfg = compose_config("agents.classifier.optimizer._target_=paddle.optimizer.SGD",
                         "agents.classifier.lr=1e6", *QUIET)  # fmt: skip
    value = main_entry(cfg, tmp_path / "job", multirun=True)  # the sweep goes on
    assert value != value  # NaN: the sweeper sees a failed trial
    with pytest.raises(SystemExit) as info:
        main_entry(cfg, tmp_path / "single")
    assert info.value.code == DIVERGED
