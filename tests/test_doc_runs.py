"""Every command the README and docs show starting a run, run end to end from the command line.

The commands are discovered, not listed: every run command of every page (``README.md``,
``docs/**/*.md``: code blocks, marked or not, and complete commands in prose; tests/doc_blocks.py
reads them), so the check follows the pages when they are rewritten. Each distinct command
runs as a reader would start it, ``python run.py <its arguments>``, in a subprocess whose
stdout and stderr go to a file (not a terminal, as in a log, Slurm or CI), at a short budget.

The budget rule (what is added after the command's own arguments, `budget`):

- ``debug=smoke``: two steps, an evaluation and a checkpoint after each, each arena's tiny
  sizes (``conf/debug_arena/``); then the arena's own small settings where its config has
  them and they are on (``TINY_WHERE_PRESENT`` of tests/test_doc_commands.py: epochs, data
  sizes, evaluation games);
- ``trainer.progress=true trainer.progress_every_s=0``: the progress line a log gets is
  written at every step (``debug=smoke`` turns it off; a crash in it is what this catches);
- a sweep (``-m``) runs at its first point, still through Hydra's multirun; an Optuna sweep
  (``+sweep=<file with n_trials>``) with one trial.

A command is run unless (in this order) it is a transcript of a mistake (tested by
tests/test_doc_commands.py), it is not a Hydra run (``summary``, ``live``, ``feed``,
``export=``, ``resume=``: they need a run first), it cannot run as written (a
placeholder), its block's marker says it needs what no test machine has (`NEEDS_OUTSIDE`), or
it is in `SKIP` with the test that runs it instead. Each run must exit 0, leave a
``results.json`` whose headline is the arena's (`expected_headline`) with a finite value, and
have written the progress line. Fast tier: the README's classify commands (seconds each:
what a newcomer runs first); the rest are ``slow``.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import doc_blocks as db
import pytest
from hydra.utils import get_object
from test_doc_commands import compose_command, distinct, one_point, problems, tiny_overrides

ROOT = db.ROOT
#: what the budget adds after the command's own arguments (see the module docstring)
BUDGET = ["debug=smoke", "trainer.progress=true", "trainer.progress_every_s=0"]
#: a block marker's reason that names something no test machine has: its commands are not run
NEEDS_OUTSIDE = re.compile(r"GPU|Ray|Slurm|MLflow server|your own|Pons|weights file", re.I)
#: commands (their arguments) run end to end by another test, and why not here
SKIP = {
    ("arena=classify", "data=stream", "trainer.live=true", "data.loader.classes=10"): (
        "a stream run waits for its samples: tests/test_stream*.py feed it through "
        "`paddlecraft feed ... --end` from the command line (the seams-run side of issue 94)"
    ),
    ("arena=caption", "data=stream", "trainer.live=true", "data.loader.words=shapes"): (
        "a stream run waits for its samples: tests/test_stream*.py feed it"
    ),
}
#: subcommands and settings that need a finished run first: not a command that starts one
NOT_A_START = ("summary", "live", "feed", "tournament")


def starts_a_run(cmd: db.RunCommand) -> bool:
    """Whether the command starts a run this test can make (see the module docstring)."""
    if cmd.expect or not cmd.args or cmd.args[0] in NOT_A_START:
        return False
    if any(a.startswith(("export=", "resume=")) for a in cmd.args):
        return False
    if problems(cmd):
        return False
    return not (cmd.not_run and NEEDS_OUTSIDE.search(cmd.not_run))


CANDIDATES = distinct([c for c in db.all_run_commands() if starts_a_run(c)])
RUNS = [c for c in CANDIDATES if tuple(c.args) not in SKIP]


def budget(cmd: db.RunCommand, cfg) -> list[str]:
    """The arguments to run: the command's (a sweep at its first point), then the budget."""
    own = [a for a in cmd.args if not a.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]
    if cmd.multirun:
        flags = [a for a in own if a.startswith("-") and a not in ("-m", "--multirun")]
        cdir = cmd.flag("--config-dir", "-cd")
        own = [*(["--config-dir", cdir] if cdir else []), "-m", *one_point(cmd)]
        own += [f for f in flags if f not in ("--config-dir", "-cd")]
        for a in cmd.args:
            name = a.split("=", 1)[1] if a.startswith("+sweep=") else None
            sweep = ROOT / "conf" / "sweep" / f"{name}.yaml"
            if name and "n_trials" in sweep.read_text():
                own += ["hydra.sweeper.n_trials=1", "hydra.sweeper.n_jobs=1"]
    extra = [o for o in tiny_overrides(cfg) if o.split("=", 1)[0] not in _BUDGET_KEYS]
    rule = BUDGET if shows_progress(cmd) else BUDGET[:1]  # its own progress setting wins
    return [*own, *rule, *extra]


def shows_progress(cmd: db.RunCommand) -> bool:
    """Whether the budget turns the progress line on (the command sets no progress itself)."""
    return not any(a.startswith("trainer.progress") for a in cmd.args)


#: keys the budget sets itself (the tiny settings' own max_steps/progress are left out)
_BUDGET_KEYS = {"trainer.max_steps", "trainer.progress"}


def expected_headline(cfg) -> str:
    """The headline metric the arena declares (self-play: the one its evaluation plan picks)."""
    cls = get_object(cfg.arena._target_)
    if cls.__name__ != "SelfPlayArena":
        return cls.headline
    ev = cfg.arena.eval
    if ev.headline_metric:
        return ev.headline_metric
    final = {k for k, n in ev.final_games.items() if n}
    return next(
        (h for key, h in (("minimax", "no_loss_rate_vs_minimax"),
                          ("mcts100", "win_rate_vs_mcts100")) if key in final),
        "win_rate_vs_random",
    )  # fmt: skip


def run_from_the_command_line(cmd: db.RunCommand, where: Path) -> tuple[int, str, Path, str]:
    """``python run.py`` with the command's arguments and the budget, output to a file;
    ``(exit code, the log's text, the run folder, the headline it must report)``."""
    from test_doc_commands import user_config_dir, user_package

    with user_package(user_config_dir(cmd)):  # a user's arena class, importable
        cfg = compose_command(cmd, dry_run=False)
        want = expected_headline(cfg)
    args = budget(cmd, cfg)
    out = where / "run"
    if cmd.multirun:  # job folders by number: the budget's overrides make long names
        args += [f"hydra.sweep.dir={out}", "hydra.sweep.subdir=${hydra.job.num}"]
    else:
        args.append(f"hydra.run.dir={out}")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    config_dir = cmd.flag("--config-dir", "-cd")
    if config_dir is not None:  # the example's folder, as PYTHONPATH=. gives a reader
        cdir = user_config_dir(cmd)
        args = [a if a != config_dir else str(cdir) for a in args]
        env["PYTHONPATH"] = str(cdir.parent)
    log = where / "output.txt"
    with log.open("w") as f:  # a file: sys.stderr.isatty() is False in the run
        rc = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), *args],
            cwd=where,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=1500,
        ).returncode
    return rc, log.read_text(), out, want


def _fast(cmd: db.RunCommand) -> bool:
    """The README's classify commands (the default arena; seconds each) with its small
    encoders: the fast tier. Read from the arguments (composing each costs a second)."""
    arena = next((a.split("=", 1)[1] for a in cmd.args if a.startswith("arena=")), "classify")
    heavy = ("resnet", "vit", "pretrained", "experiment", "data=", "mlflow", "visualdl")
    return (
        cmd.where.startswith("README.md")
        and arena == "classify"
        and not cmd.multirun
        and not any(h in a for a in cmd.args for h in heavy)
        and cmd.flag("--config-dir", "-cd") is None
    )


def _param(cmd: db.RunCommand):
    marks = () if _fast(cmd) else (pytest.mark.slow,)
    return pytest.param(cmd, marks=marks, id=f"{cmd.where}:{' '.join(cmd.args)[:60]}")


def test_the_pages_show_commands_to_run_and_the_skips_are_real():
    """The harness finds the pages' run commands (README's first one among them); each
    skip names a command some page still shows, with its reason."""
    assert len(RUNS) > 20
    assert any(c.where.startswith("README.md") and c.args == ["arena=classify"] for c in RUNS)
    shown = {tuple(c.args) for c in db.all_run_commands()}
    assert all(args in shown for args in SKIP), set(SKIP) - shown
    assert all(len(why) > 20 for why in SKIP.values())
    fast = [c for c in RUNS if _fast(c)]  # the fast tier: the README's classify commands only
    assert fast and all(c.where.startswith("README.md") for c in fast)


def test_the_budget_keeps_the_command_and_adds_the_rule():
    """The command's own arguments come first, unchanged; the budget only adds."""
    cmd = db.RunCommand("x.md:1", "", ["-m", "arena=gan", "seed=0,1", "+sweep=gan_optuna"])
    args = budget(cmd, compose_command(cmd, dry_run=False))
    assert args[:4] == ["-m", "arena=gan", "seed=0", "+sweep=gan_optuna"]
    assert "hydra.sweeper.n_trials=1" in args and all(b in args[4:] for b in BUDGET)
    assert not any(a.startswith(("trainer.max_steps=", "trainer.progress=false")) for a in args)


@pytest.mark.parametrize("cmd", [_param(c) for c in RUNS])
def test_every_run_command_of_the_docs_runs_end_to_end(cmd, tmp_path):
    """Exit 0, the progress line in the log, and a results.json with the arena's headline."""
    rc, log, out, want = run_from_the_command_line(cmd, tmp_path)
    assert rc == 0, f"{cmd.where}: {cmd.text}\n{log[-4000:]}"
    if shows_progress(cmd):
        assert re.search(r"step \d+(/\d+)?( \(\d+%\))? [\d.e+-]+ steps/s", log), log[-3000:]
    found = sorted(  # an MLflow store keeps a copy among its artifacts
        p for p in out.rglob("results.json") if not {"mlflow", "mlruns"} & set(p.parts)
    )
    assert len(found) == 1, (found, log[-2000:])  # one run; a sweep at its first point
    results = json.loads(found[0].read_text())
    assert results["status"] == "finished", results
    assert results["headline"] == want
    value = results["metrics"].get(results["headline"], results.get("headline_value"))
    assert isinstance(value, float) and math.isfinite(value), results
