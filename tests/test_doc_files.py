"""The write-your-own pages' code blocks are whole files, run outside the repository.

A block whose first line is ``# file: <path>`` is a file of a reader's project
(tests/doc_blocks.py). For each page holding such blocks, the test writes all of them into
``<tmp>/my_project/`` (a folder outside the repository), then runs there what the page
says to run, as a reader would, with ``PYTHONPATH=.`` and the installed command:

- every Python file with an ``if __name__ == "__main__":`` guard: ``python <file>``;
- every unmarked block's run command of the page: ``python -m paddlecraft <its arguments>``
  at the budget of tests/test_doc_runs.py (``debug=smoke``, the progress line on, a sweep at
  its first point), output to a file: exit 0 and a ``results.json`` with the headline.

Also: a write-your-own page (``docs/write-*.md``) has no Python excerpt left (every Python
block is a file or marked), and ``examples/my_arena/`` holds docs/write-arena.md's files
line for line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import doc_blocks as db
import pytest
from test_doc_commands import compose_command
from test_doc_runs import budget, expected_headline

ROOT = db.ROOT
BLOCKS = db.all_blocks()
FILE_PAGES = sorted({b.page for b in BLOCKS if b.file})
WRITE_PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("write-*.md"))


def write_project(page: str, root: Path) -> list[db.Block]:
    """The page's file blocks written under ``root``; the blocks, in page order."""
    files = [b for b in BLOCKS if b.page == page and b.file]
    for b in files:
        path = root / b.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(b.file_text)
    return files


def _env(project: Path) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(project)}
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def _run(argv: list[str], project: Path, log: Path) -> tuple[int, str]:
    with log.open("w") as f:  # a file, not a terminal
        rc = subprocess.run(argv, cwd=project, env=_env(project), stdout=f,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            timeout=1200).returncode  # fmt: skip
    return rc, log.read_text()


def test_the_pages_tag_their_files_and_the_write_pages_have_no_excerpts():
    assert {"docs/write-arena.md", "docs/write-agent.md", "docs/write-encoder.md"} <= set(
        FILE_PAGES
    )
    assert "docs/write-game.md" in FILE_PAGES
    excerpts = [
        b.where
        for b in BLOCKS
        if b.page in WRITE_PAGES and b.lang == "python" and not b.file and not b.not_run
    ]
    assert excerpts == [], "tag each with # file: <path> (a whole file) or mark it"
    marked = [b.where for b in BLOCKS if b.page in WRITE_PAGES and b.lang == "python" and b.not_run]
    assert marked == [], "a write-your-own page's Python is a whole file a test runs"


def test_examples_my_arena_is_the_pages_project_line_for_line():
    files = [b for b in BLOCKS if b.page == "docs/write-arena.md" and b.file]
    assert {b.file for b in files} >= {"mypkg/__init__.py", "my_conf/arena/distill.yaml"}
    for b in files:
        example = ROOT / "examples" / "my_arena" / b.file
        if example.exists():
            assert example.read_text() == b.file_text, f"{b.where} differs from {example}"


def test_the_arena_pages_encoder_override_form_composes(tmp_path):
    """docs/write-arena.md's line for another encoder inside the arena file composes (the
    plain second entry it warns about is Hydra's "Multiple values" error)."""
    import re

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException

    text = (ROOT / "docs" / "write-arena.md").read_text()
    (line,) = set(re.findall(r"`(- override /encoder@agents\.teacher\.encoder: cnn)`", text))
    project = tmp_path / "my_project"
    write_project("docs/write-arena.md", project)
    arena = project / "my_conf" / "arena" / "distill.yaml"
    base = arena.read_text()
    (last,) = [ln for ln in base.splitlines(True) if "- /agent@agents.student:" in ln]
    from paddlecraft.arenas import register_configs

    register_configs()
    for entry, works in ((line, True), (line.replace("override ", ""), False)):
        arena.write_text(base.replace(last, f"{last}  {entry}\n"))  # the list's end
        GlobalHydra.instance().clear()
        overrides = ["arena=distill", f"hydra.searchpath=[file://{project / 'my_conf'}]"]
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            if works:
                cfg = compose("config", overrides=overrides)
                assert cfg.agents.teacher.encoder._target_.endswith("ImageCNNEncoder")
                assert cfg.agents.student.encoder._target_.endswith("ImageMLPEncoder")
            else:
                with pytest.raises(ConfigCompositionException, match="Multiple values"):
                    compose("config", overrides=overrides)


def _page_param(page: str):
    """A page whose files only run scripts is fast; one whose commands train is slow."""
    trains = any(db.block_commands(b) for b in BLOCKS if b.page == page and not b.not_run)
    return pytest.param(page, marks=(pytest.mark.slow,) if trains else (), id=page)


@pytest.mark.parametrize("page", [_page_param(p) for p in FILE_PAGES])
def test_a_pages_files_run_outside_the_repository(page, tmp_path):
    project = tmp_path / "my_project"
    assert ROOT not in project.parents
    files = write_project(page, project)
    ran = 0
    for b in files:
        if b.file.endswith(".py") and 'if __name__ == "__main__":' in b.file_text:
            rc, log = _run([sys.executable, b.file], project, tmp_path / f"{ran}.txt")
            assert rc == 0, f"{b.where}: python {b.file}\n{log[-4000:]}"
            ran += 1
    commands = [
        c
        for b in BLOCKS
        if b.page == page and not b.not_run
        for c in db.block_commands(b)
        if not c.expect
    ]
    for n, cmd in enumerate(commands):
        cdir = (
            project / cmd.flag("--config-dir", "-cd") if cmd.flag("--config-dir", "-cd") else None
        )
        sys.path.insert(0, str(project))
        try:
            cfg = compose_command(cmd, dry_run=False, cdir=cdir)
            want = expected_headline(cfg)
        finally:
            sys.path.remove(str(project))
            for name in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
                del sys.modules[name]  # the project's copy; another test imports its own
        args = budget(cmd, cfg)
        out = tmp_path / f"run{n}"
        if cmd.multirun:  # job folders by number: the budget's overrides make long names
            args += [f"hydra.sweep.dir={out}", "hydra.sweep.subdir=${hydra.job.num}"]
        else:
            args.append(f"hydra.run.dir={out}")
        rc, log = _run(
            [sys.executable, "-m", "paddlecraft", *args], project, tmp_path / f"c{n}.txt"
        )
        assert rc == 0, f"{cmd.where}: {cmd.text}\n{log[-4000:]}"
        (found,) = sorted(out.rglob("results.json"))
        results = json.loads(found.read_text())
        assert results["status"] == "finished" and results["headline"] == want
        ran += 1
    assert ran, f"{page}: its files hold no script and it shows no command to run"
