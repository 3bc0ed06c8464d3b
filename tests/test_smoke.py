"""The ``debug=smoke`` preset and ``python -m paddlecraft.smoke``: every arena for two
steps, evaluated and checkpointed at each, resumed from the first checkpoint. In-process
(the command line's own checks are in tests/test_cli.py); the one-command run of every
arena, as a user types it, is slow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from paddlecraft import smoke

ROOT = Path(__file__).resolve().parents[1]
ARENAS = sorted(p.stem for p in (ROOT / "conf" / "arena").glob("*.yaml"))


def test_every_arena_composes_with_the_preset_and_no_size_file_is_orphaned(compose_config):
    # a misspelt conf/debug_arena/smoke_<arena>.yaml would be skipped silently (optional)
    sizes = sorted(p.stem for p in (ROOT / "conf" / "debug_arena").glob("*.yaml"))
    assert sizes and all(s.startswith("smoke_") and s[6:] in ARENAS for s in sizes)
    assert smoke.arenas() == ARENAS
    for arena in ARENAS:
        cfg = compose_config(f"arena={arena}", "debug=smoke")
        t = cfg.trainer
        assert (t.max_steps, t.eval_every, t.checkpoint_every, t.progress) == (2, 1, 1, False)
    plain = compose_config("arena=classify")
    assert plain.trainer.max_steps is None and plain.arena.epochs == 20  # the preset is opt-in


@pytest.mark.parametrize("arena", ARENAS)
def test_every_arena_runs_two_steps_evaluates_checkpoints_and_resumes(
    arena, compose_config, tmp_path
):
    r = smoke.smoke_arena(arena, tmp_path, compose=lambda o: compose_config(*o))
    assert r.ok, r.detail
    run = tmp_path / arena
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "finished" and np.isfinite(results["headline_value"])
    evals = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert sorted(e["step"] for e in evals if e["kind"] == "eval") == [1, 2]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "step_00000001",
        "step_00000002",
    ]
    # the second step came from the first one's checkpoint, not from a fresh start
    changes = [json.loads(x) for x in (run / "resume_changes.jsonl").read_text().splitlines()]
    assert [c["step"] for c in changes] == [1]
    assert results["step"] == 2 and (run / "config.yaml").is_file()


def test_a_broken_run_is_reported_not_raised(compose_config, tmp_path):
    r = smoke.smoke_arena(
        "classify", tmp_path, ["arena.batch_size=0"], compose=lambda o: compose_config(*o)
    )
    assert not r.ok and "arena.batch_size" in r.detail and "\n" not in r.detail


def test_an_unknown_arena_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as e:
        smoke.main(["chess"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no arena chess; choose from caption")


@pytest.mark.slow
def test_every_arena_smokes_in_one_command(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "paddlecraft.smoke", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    lines = r.stdout.strip().splitlines()
    assert [ln.split()[1] for ln in lines] == ARENAS
    assert all(ln.startswith("ok") for ln in lines), lines
