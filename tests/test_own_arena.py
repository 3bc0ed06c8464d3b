"""A user's arena from outside the repository: its own package and config folder, run with
``python run.py --config-dir my_conf arena=distill``; checkpoints, resume and multirun."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my_arena"


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """The example copied to a folder outside the repository, as a user would have it."""
    d = tmp_path / "my_project"
    shutil.copytree(EXAMPLE, d)
    assert ROOT not in d.parents
    return d


def _weights(run_dir: Path) -> dict[str, np.ndarray]:
    newest = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    out: dict[str, np.ndarray] = {}
    for f in sorted((newest / "agents").glob("*/weights.safetensors")):
        out.update(load_file(f))
    return out


def test_user_arena_runs_checkpoints_and_resumes_bit_identically(cli, user_dir):
    """Through the command's ``main`` in this process; the user's arena as a real process,
    from an installed wheel, is tests/test_wheel.py's."""
    base = ["arena=distill", "arena.epochs=2", "trainer.progress=false"]
    full = user_dir / "runs" / "full"
    r = cli(*base, f"hydra.run.dir={full}")
    assert r["rc"] == 0, r["stderr"][-3000:]
    results = json.loads((full / "results.json").read_text())
    assert results["status"] == "finished" and results["headline"] == "student_accuracy"
    m = results["metrics"]
    assert m["teacher_accuracy"] > 0.85 and m["student_accuracy"] > 0.7  # 2 epochs (chance: 0.1)
    assert {p.name for p in (full / "checkpoints").glob("step_*/agents/*")} == {
        "teacher",
        "student",
    }

    # stop after 30 steps (a checkpoint is written when a run stops), then resume
    part = user_dir / "runs" / "part"
    r = cli(*base, "trainer.max_steps=30", f"hydra.run.dir={part}")
    assert r["rc"] == 0, r["stderr"][-3000:]
    assert json.loads((part / "results.json").read_text())["step"] == 30
    saved = (part / "config.yaml").read_text()
    (part / "config.yaml").write_text(saved.replace("max_steps: 30", "max_steps: null"))
    r = cli(f"resume={part}", f"hydra.run.dir={user_dir / 'runs' / 'log'}")
    assert r["rc"] == 0, r["stderr"][-3000:]
    resumed = json.loads((part / "results.json").read_text())
    assert resumed["status"] == "finished" and resumed["step"] == results["step"]
    ref, got = _weights(full), _weights(part)
    assert ref.keys() == got.keys() and any(k.startswith("student.") for k in ref)
    for k in ref:
        assert np.array_equal(ref[k], got[k]), k
    assert resumed["metrics"] == results["metrics"]


@pytest.fixture
def cli(user_dir, monkeypatch):
    """``cli(*args)``: ``paddlecraft --config-dir my_conf ARGS`` run in this process from the
    user's folder (what it printed, returned and left: `tests.mistake_driver.run_case`).
    No test here needs a fresh interpreter: the user's arena run as a real process, from
    the installed wheel, is tests/test_wheel.py's."""
    from tests.mistake_driver import run_case

    monkeypatch.setattr(sys, "path", list(sys.path))  # the package folder the command adds
    yield lambda *args: run_case(["--config-dir", "my_conf", *args], str(user_dir))
    for name in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        del sys.modules[name]


def test_user_arena_settings_are_checked_before_work(cli, user_dir):
    r = cli("arena=distill", "+arena.temprature=3", "hydra.run.dir=runs/bad")
    assert r["rc"] == 2
    assert "Traceback" not in r["stderr"]
    assert "arena: unknown setting(s) ['temprature']" in r["stderr"]
    assert "temperature" in r["stderr"]
    assert not (user_dir / "runs").exists()


def test_user_arena_dataclass_is_its_schema_from_config_dir(cli, user_dir):
    """Settings the arena file does not declare are settings (typed, with the dataclass's
    defaults): no leading ``+``; a misspelled one fails while composing, nothing written."""
    yaml_text = (user_dir / "my_conf" / "arena" / "distill.yaml").read_text()
    assert "alpha:" not in yaml_text and "temperature:" not in yaml_text
    r = cli("arena=distill", "arena.alpha=0.3", "--cfg", "job")
    assert r["rc"] == 0, r["stderr"][-3000:]
    arena = re.split(r"\n\S", r["stdout"].split("\narena:\n", 1)[1], maxsplit=1)[0]
    assert "  alpha: 0.3" in arena and "  temperature: 2.0" in arena
    assert "  batch_size: 64" in arena and "  epochs: 5" in arena
    r = cli("arena=distill", "arena.alpa=0.3", "hydra.run.dir=runs/typo")
    assert r["rc"] == 2
    assert r["stderr"].strip().splitlines()[-1].startswith("error: arena.alpa=0.3: no setting")
    assert "Traceback" not in r["stderr"] and not (user_dir / "runs").exists()
    r = cli("arena=distill", "arena.alpha=high", "hydra.run.dir=runs/type")
    assert r["rc"] == 2 and "arena.alpha=high" in r["stderr"] and "Float" in r["stderr"]
    assert not (user_dir / "runs").exists()


def test_user_arena_target_must_be_allowed(cli):
    r = cli("arena=distill", "allow_targets=[]", "hydra.run.dir=runs/refused")
    assert r["rc"] == 2
    assert "mypkg.DistillArena" in r["stderr"] and "allow_targets" in r["stderr"]


def test_user_arena_multirun(cli, user_dir):
    r = cli(
        "-m",
        "arena=distill",
        "arena.alpha=0.2,0.8",
        "trainer.max_steps=3",
        "trainer.progress=false",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={user_dir / 'multirun'}",
    )
    assert r["rc"] == 0, r["stderr"][-3000:]
    jobs = sorted((user_dir / "multirun").glob("*/results.json"))
    assert len(jobs) == 2
    alphas = sorted(
        float(line.split(":")[1])
        for j in jobs
        for line in (j.parent / "config.yaml").read_text().splitlines()
        if line.strip().startswith("alpha:")
    )
    assert alphas == [0.2, 0.8]
    assert all(json.loads(j.read_text())["status"] == "finished" for j in jobs)
    # a user's own arena's sweep ends in a summary too, grouped by what it swept
    summary = json.loads((user_dir / "multirun" / "summary.json").read_text())
    assert summary["group_by"] == ["arena.alpha"]
    assert [g["arena.alpha"] for g in summary["groups"]] == [0.2, 0.8]
    values = sorted(json.loads(j.read_text())["headline_value"] for j in jobs)
    assert sorted(r["value"] for r in summary["runs"]) == values


def test_the_command_line_names_the_config_folder_and_arenas():
    from paddlecraft.own_arena import chosen_arenas, config_dir

    assert config_dir(["--config-dir", "my_conf", "arena=distill"]) == "my_conf"
    assert config_dir(["--config-dir=c", "-m"]) == "c" and config_dir(["-cd", "d"]) == "d"
    assert config_dir(["arena=distill"]) is None
    assert chosen_arenas(["-m", "arena=distill,classify", "arena.alpha=0.2"]) == [
        "distill",
        "classify",
    ]


def test_only_a_target_the_arena_file_allows_is_imported(tmp_path, monkeypatch):
    """A config folder cannot make the command import code its file does not allow."""
    from hydra.core.config_store import ConfigStore

    from paddlecraft.own_arena import register_own_arena_schemas

    (tmp_path / "arena").mkdir()
    (tmp_path / "trap.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "arena" / "a.yaml").write_text("arena:\n  _target_: trap.Arena\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert register_own_arena_schemas(["--config-dir", str(tmp_path), "arena=a"]) == []
    (tmp_path / "broken.py").write_text("raise RuntimeError('a bug in your package')\n")
    (tmp_path / "arena" / "b.yaml").write_text(
        "allow_targets: [broken.Arena]\narena:\n  _target_: broken.Arena\n"
    )  # allowed, but it fails to import: left to the run's own error line
    assert register_own_arena_schemas(["--config-dir", str(tmp_path), "arena=b"]) == []
    monkeypatch.syspath_prepend(str(EXAMPLE))
    (tmp_path / "arena" / "c.yaml").write_text(
        "allow_targets: [mypkg.DistillArena]\narena:\n  _target_: mypkg.DistillArena\n"
    )
    assert register_own_arena_schemas(["--config-dir", str(tmp_path), "arena=c"]) == ["c"]
    node = ConfigStore.instance().repo["schema"]["arena"]["c.yaml"].node
    assert node.alpha == 0.5 and node._target_ == "mypkg.DistillArena"
