"""Hyper-parameter search: Hydra's Optuna sweeper optimising the arena's headline metric."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from paddlecraft.arenas import register_configs
from paddlecraft.arenas.engine.sweeps import headline_direction

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["trainer.progress=false", "trainer.max_steps=4", "hydra.sweeper.n_trials=3"]


def test_direction_follows_the_arena():
    assert headline_direction("paddlecraft.arenas.ClassifyArena") == "maximize"  # test accuracy
    assert headline_direction("paddlecraft.arenas.GanArena") == "minimize"  # classifier-FID


@pytest.mark.parametrize(
    ("overrides", "direction", "params"),
    [
        (
            ["+sweep=classify_optuna"],
            "maximize",
            {"agents.classifier.lr", "agents.classifier.encoder.hidden_size"},
        ),
        (
            ["arena=gan", "+sweep=gan_optuna"],
            "minimize",
            {"agents.generator.lr", "agents.discriminator.lr", "arena.n_critic"},
        ),
    ],
)
def test_optuna_sweep_files_compose(overrides, direction, params):
    register_configs()
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    assert cfg.hydra.sweeper._target_.endswith("OptunaSweeper")
    assert cfg.hydra.sweeper.direction == direction
    assert set(cfg.hydra.sweeper.params) == params


def _study(sweep_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "run.py"), "-m", "+sweep=classify_optuna", *SMOKE]
    cmd += [f"hydra.sweep.dir={sweep_dir}", *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)


def _check_best(sweep_dir: Path) -> None:
    """optimization_results.yaml names the trial with the highest test accuracy."""
    best = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    trials = []
    for results in sweep_dir.glob("*/results.json"):
        r = json.loads(results.read_text())
        overrides = dict(o.split("=", 1) for o in r["overrides"])
        trials.append((r["headline_value"], overrides))
    assert len(trials) == 3
    top = max(v for v, _ in trials)
    assert best["best_value"] == pytest.approx(top)
    winners = [o for v, o in trials if v == top]
    # the sweep's summary lists every trial and marks the best, with Optuna's own record
    summary = json.loads((sweep_dir / "summary.json").read_text())
    assert sorted(r["job"] for r in summary["runs"]) == [0, 1, 2]
    best_run = [r for r in summary["runs"] if r["best"]]
    assert len(best_run) == 1 and best_run[0]["value"] == pytest.approx(top)
    assert summary["best_run"] == best_run[0]["name"]
    assert summary["optuna"] == {k: best[k] for k in ("best_params", "best_value")}
    assert "**best**" in (sweep_dir / "summary.md").read_text()
    assert any(
        float(o["agents.classifier.lr"])
        == pytest.approx(best["best_params"]["agents.classifier.lr"])
        and int(o["agents.classifier.encoder.hidden_size"])
        == best["best_params"]["agents.classifier.encoder.hidden_size"]
        for o in winners
    )


@pytest.mark.slow
def test_three_trial_study_writes_the_best_trial(tmp_path):
    r = _study(tmp_path / "sweep", "hydra/launcher=basic")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Directions: ['maximize']" in r.stdout + r.stderr
    _check_best(tmp_path / "sweep")


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["local", "slurm_local"])  # joblib, submitit
def test_optuna_study_with_parallel_launchers(tmp_path, launcher):
    r = _study(tmp_path / "sweep", f"hydra/launcher={launcher}")
    assert r.returncode == 0, r.stderr[-3000:]
    _check_best(tmp_path / "sweep")
