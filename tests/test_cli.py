"""run.py end to end in subprocesses: smoke runs, SIGKILL/SIGINT + resume, multirun."""

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

ROOT = Path(__file__).resolve().parents[1]
ARENAS = sorted(p.stem for p in (ROOT / "conf" / "arena").glob("*.yaml"))
BASE = ["trainer.progress=false", "arena.epochs=3", "trainer.checkpoint_every=20"]


def _cmd(run_dir: Path, *overrides: str) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), *overrides, f"hydra.run.dir={run_dir}"]


def _final_weights(run_dir: Path) -> dict[str, np.ndarray]:
    newest = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    out = {}
    for f in (newest / "agents").glob("*/weights.safetensors"):
        out.update(load_file(f))
    return out


def _wait_for_checkpoint(proc: subprocess.Popen, run_dir: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if list((run_dir / "checkpoints").glob("step_*")):
            return
        if proc.poll() is not None:
            pytest.fail(f"run ended (rc {proc.returncode}) before its first checkpoint")
        time.sleep(0.01)
    pytest.fail("no checkpoint appeared")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("full") / "run"
    subprocess.run(_cmd(run_dir, *BASE), check=True, cwd=ROOT, capture_output=True)
    return run_dir


# every arena runs two steps, evaluated, checkpointed and resumed, in-process in
# tests/test_smoke.py; here the command line itself, for one arena
@pytest.mark.parametrize("arena", ["classify"])
@pytest.mark.slow
def test_one_step_run_from_the_command_line(arena, tmp_path):
    run_dir = tmp_path / "run"
    r = subprocess.run(
        _cmd(run_dir, f"arena={arena}", "trainer.max_steps=1", "trainer.progress=false"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "2"},  # Paddle's import warns above 1
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # Paddle's import-time notes on settings made on purpose do not reach the user
    assert "OMP_NUM_THREADS WISELY" not in r.stderr and "No ccache found" not in r.stderr
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "finished" and results["step"] == 1
    assert np.isfinite(results["headline_value"])
    assert (run_dir / "metrics.jsonl").exists() and (run_dir / "config.yaml").exists()


def test_importing_the_toolkit_prints_none_of_paddles_import_notes():
    """A user's script (or one of scripts/) that imports the toolkit before Paddle sees
    none of Paddle's import-time notes on settings made on purpose, and loses nothing
    logged later (the logging handlers Paddle's import makes write to the real stderr);
    Paddle imported first, by the user, still says them (the toolkit does not hide what it
    did not cause)."""
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    code = "\n".join([
        "import io, logging, paddlecraft.agents, paddlecraft.arenas.selfplay",
        "loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]",
        "handlers = [h for lg in loggers for h in getattr(lg, 'handlers', ())]",
        "assert handlers and not any(isinstance(getattr(h, 'stream', None), io.StringIO)"
        " for h in handlers)",
        "logging.getLogger('paddle.base.backward').warning('a note Paddle logs later')",
    ])  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "No ccache found" not in r.stderr and "OMP_NUM_THREADS WISELY" not in r.stderr
    assert "a note Paddle logs later" in r.stderr
    first = subprocess.run([sys.executable, "-c", "import paddle, paddlecraft.agents"],
                           capture_output=True, text=True, env=env)  # fmt: skip
    assert first.returncode == 0 and "No ccache found" in first.stderr


def test_sigkill_mid_training_then_resume_matches_uninterrupted(uninterrupted, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _cmd(run_dir, *BASE), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait_for_checkpoint(proc, run_dir)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not (run_dir / "results.json").exists()  # it really died mid-run
    r = subprocess.run(
        _cmd(tmp_path / "resume_log", f"resume={run_dir}"), cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from" in r.stderr + r.stdout
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "finished"
    ref, got = _final_weights(uninterrupted), _final_weights(run_dir)
    assert ref.keys() == got.keys() and ref
    for k in ref:
        assert np.array_equal(ref[k], got[k]), k
    ref_results = json.loads((uninterrupted / "results.json").read_text())
    assert results["metrics"] == ref_results["metrics"]


@pytest.mark.slow
def test_sigint_saves_checkpoint_and_exits_cleanly_then_resumes(uninterrupted, tmp_path):
    run_dir = tmp_path / "run"
    # a checkpoint after every step keeps the run going for seconds after the first one
    # appears, so SIGINT always lands mid-run (checkpoints do not change what is trained)
    args = [*BASE[:-1], "trainer.checkpoint_every=1"]
    proc = subprocess.Popen(
        _cmd(run_dir, *args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    _wait_for_checkpoint(proc, run_dir)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "interrupted" and "SIGINT" in results["stop_reason"]
    assert f"Resume with: python run.py resume={run_dir}" in out
    newest = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    assert newest.name == f"step_{results['step']:08d}"  # saved where it stopped
    r = subprocess.run(
        _cmd(tmp_path / "resume_log", f"resume={run_dir}"), cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    ref, got = _final_weights(uninterrupted), _final_weights(run_dir)
    for k in ref:
        assert np.array_equal(ref[k], got[k]), k


# a bad override, a missing resume folder and an arena's bad setting as one error line: the
# mistake table (tests/test_mistakes.py), in one process, and a few of them as real processes


def test_redirected_output_gets_progress_lines_not_bar_redraws(tmp_path):
    r = subprocess.run(
        _cmd(tmp_path / "run", "arena.epochs=2", "trainer.progress_every_s=0"),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "\r" not in out  # no bar redraws in a log file
    lines = [line for line in out.splitlines() if " steps/s" in line]
    # progress_every_s=0: one line per step (2 epochs of 23 batches), then the final one
    assert len(lines) == 47, lines[:3]
    assert "step 46/46 (100%)" in lines[-1] and "loss=" in lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "local", "slurm_local"])
def test_two_job_multirun(launcher, tmp_path):
    sweep = tmp_path / "sweep"
    r = subprocess.run(
        [
            sys.executable, str(ROOT / "run.py"), "-m", f"hydra/launcher={launcher}",
            "agents.classifier.lr=0.001,0.002", "arena.epochs=1", "trainer.progress=false",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    jobs = sorted(p.name for p in sweep.iterdir() if (p / "results.json").exists())
    # readable names: the job's overrides (trainer.progress is excluded in conf/config.yaml)
    assert jobs == [
        "0_agents.classifier.lr=0.001,arena.epochs=1",
        "1_agents.classifier.lr=0.002,arena.epochs=1",
    ]
    for j, lr in zip(jobs, ("0.001", "0.002")):
        results = json.loads((sweep / j / "results.json").read_text())
        assert f"agents.classifier.lr={lr}" in results["overrides"]
        assert results["status"] == "finished" and results["headline_value"] > 0.5
    # every launcher ends the sweep in its summary (each job updates it in its own process)
    summary = json.loads((sweep / "summary.json").read_text())
    assert sorted(r["name"] for r in summary["runs"]) == jobs


@pytest.mark.parametrize(
    ("argv0", "said"),
    [("run.py", "python run.py"), ("/repo/run.py", "python run.py"),
     ("/venv/bin/paddlecraft", "paddlecraft"), ("", "paddlecraft")],
)  # fmt: skip
def test_suggested_commands_are_the_ones_the_user_typed(argv0, said, monkeypatch):
    """An installed user is told `paddlecraft resume=...`, a checkout `python run.py ...`."""
    from omegaconf import OmegaConf

    from paddlecraft.arenas.engine.validate import validate
    from paddlecraft.errors import ConfigError, command

    monkeypatch.setattr(sys, "argv", [argv0])
    assert command() == said
    with pytest.raises(ConfigError, match=f"choose an arena, e.g. {said} arena=classify"):
        validate(OmegaConf.create({"agents": {}, "arena": {}}))
