"""Docs that cannot drift: what a page asks a reader to run runs (tests/doc_blocks.py reads it).

Fast tier, in this process: every run command of every page (blocks and prose) composes
with Hydra and passes the run's dry validation; an unmarked block's command is complete
(no placeholder, its own config folder found); a transcript's ``error:`` line is what the
command prints; every unmarked ``python`` block executes; every file a page promises in a
run folder is in a real (tiny) run folder of that arena. Every run command runs end to end
from the command line in tests/test_doc_runs.py.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import doc_blocks as db
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

ROOT = db.ROOT
CONF = ROOT / "conf"
COMMANDS = db.all_run_commands()
BLOCKS = db.all_blocks()
#: a transcript a page shows that is wrong today and owned by another change this round;
#: strict: the test fails once the page is right, so the entry is removed then
KNOWN_DRIFT: dict[str, str] = {}  #: page:line -> why a transcript is known to be wrong


# ----------------------------------------------------------------------------- helpers
def user_config_dir(cmd: db.RunCommand) -> Path | None:
    """The folder ``--config-dir`` names: the page's own files (``# file:`` blocks, written to
    a folder outside the repository), else found among the examples."""
    name = cmd.flag("--config-dir", "-cd")
    if name is None:
        return None
    page = cmd.where.split(":", 1)[0]
    if any(b.file and b.file.startswith(f"{name}/") for b in BLOCKS if b.page == page):
        return page_project(page) / name
    found = sorted(p for p in (ROOT / "examples").glob(f"*/{name}") if p.is_dir())
    return found[0] if found else None


@functools.cache
def page_project(page: str) -> Path:
    """The page's ``# file:`` blocks written to a new folder outside the repository, once."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="doc_project_"))
    for b in BLOCKS:
        if b.page == page and b.file:
            (root / b.file).parent.mkdir(parents=True, exist_ok=True)
            (root / b.file).write_text(b.file_text)
    return root


def problems(cmd: db.RunCommand) -> list[str]:
    """Why a command cannot be run as written ([] when it can)."""
    out = []
    # a list value (allow_targets=[mypkg.X]) is a value, not an optional part
    if any(db.PLACEHOLDER.search(re.sub(r"=\[[^\]<>]*\]$", "=", a)) for a in cmd.args):
        out.append("a placeholder (<...>, ..., /your/...) in the command")
    if cmd.flag("--config-dir", "-cd") is not None and user_config_dir(cmd) is None:
        out.append("--config-dir names a folder no example holds")
    first = cmd.args[0] if cmd.args else ""
    if (first and "=" not in first and not first.startswith("-")) or any(
        a.startswith("export=") for a in cmd.args
    ):
        out.append(f"not a Hydra run ({first!r} subcommand or export=): mark the block")
    return out


def one_point(cmd: db.RunCommand) -> list[str]:
    """The overrides of the command; a sweep (``-m``) at its first point."""
    overrides = cmd.overrides()
    if not cmd.multirun:
        return overrides
    out = []
    for o in OverridesParser.create().parse_overrides(overrides):
        if o.is_sweep_override():
            out.append(f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}")
        else:
            out.append(o.input_line)
    return out


@contextlib.contextmanager
def user_package(config_dir: Path | None):
    """The example's package importable, as ``PYTHONPATH=.`` makes it for a reader."""
    if config_dir is None:
        yield
        return
    # the project's packages (two pages both name theirs mypkg): imported from this folder
    own = {p.name for p in config_dir.parent.iterdir() if (p / "__init__.py").is_file()}

    def forget() -> None:
        for name in [m for m in sys.modules if m.split(".", 1)[0] in own]:
            del sys.modules[name]

    forget()
    sys.path.insert(0, str(config_dir.parent))
    try:
        yield
    finally:
        sys.path.remove(str(config_dir.parent))
        forget()


@functools.cache
def _register_configs_once() -> None:
    """The built-in schemas in Hydra's ConfigStore (what the command does first), once."""
    from paddlecraft.arenas import register_configs

    register_configs()


def compose_command(cmd: db.RunCommand, dry_run: bool = True, cdir: Path | None = None):
    """The config the command composes (in this process), after the run's dry validation
    (``dry_run``: left out for a command that needs what this machine lacks, as its block's
    marker says, and for prose, which may show a mistake next to its error line).
    ``cdir``: the ``--config-dir`` folder (default: the example's that the command names)."""
    from paddlecraft.arenas.engine.live.config import expand_shorthand
    from paddlecraft.arenas.engine.validate import validate
    from paddlecraft.own_arena import register_own_arena_schemas

    _register_configs_once()
    overrides = expand_shorthand(one_point(cmd))  # as the command line does (trainer.live=true)
    cdir = cdir or user_config_dir(cmd)
    if cdir is not None:
        overrides.append(f"hydra.searchpath=[file://{cdir}]")
    with user_package(cdir):
        if cdir is not None:
            register_own_arena_schemas(["--config-dir", str(cdir), *cmd.overrides()])
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        if dry_run:
            validate(cfg)
    return cfg


def _id(cmd: db.RunCommand) -> str:
    return f"{cmd.where}:{' '.join(cmd.args)[:60]}"


def distinct(commands: list[db.RunCommand]) -> list[db.RunCommand]:
    """One command per distinct argument list (the first place it is written)."""
    seen, out = set(), []
    for c in commands:
        key = (c.flag("--config-dir", "-cd"), tuple(one_point(c)))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


# ----------------------------------------------------------------------------- the parser
def test_the_reader_finds_blocks_markers_and_commands_of_every_page():
    pages = {p.relative_to(ROOT).as_posix() for p in db.pages()}
    assert {"README.md", "docs/hydra.md", "docs/guide/classify.md"} <= pages
    where = {c.where.split("+")[0]: c for c in COMMANDS if not c.inline}
    assert any(c.args == ["arena=classify"] for c in COMMANDS if c.where.startswith("README"))
    assert any(b.not_run and "GPU" in b.not_run for b in BLOCKS)
    # \ continues a line; a VAR=value prefix and a trailing comment are not arguments
    block = db.Block("x.md", 1, "bash", "OMP_NUM_THREADS=1 python run.py -m a=1,2 \\\n"
                     "    b=3   # why\nray start --head && paddlecraft c=4\npip install x\n",
                     None)  # fmt: skip
    cmds = db.block_commands(block)
    assert [c.args for c in cmds] == [["-m", "a=1,2", "b=3"], ["c=4"]]
    assert cmds[0].multirun and one_point(cmds[0]) == ["a=1", "b=3"]
    sub = db.block_commands(db.Block("z.md", 1, "bash", "paddlecraft tournament --game x\n", None))
    assert problems(sub[0]) and not problems(cmds[1])  # a subcommand must be marked
    transcript = db.Block("y.md", 1, "text", "$ paddlecraft x=1\nerror: no\nplain text\n", None)
    assert [(c.args, c.expect) for c in db.block_commands(transcript)] == [(["x=1"], "error: no")]
    assert where  # blocks were found


# ----------------------------------------------------------------------------- fast tier
def test_every_unmarked_block_command_can_run_as_written():
    """A command a reader copies runs, or its block says why not (``<!-- not run: ... -->``)."""
    bad = [
        f"{c.where}: {c.text!r}: {'; '.join(problems(c))} (add <!-- not run: reason -->)"
        for c in COMMANDS
        if not c.inline and not c.not_run and not c.expect and problems(c)
    ]
    assert bad == []
    reasons = [b.not_run for b in BLOCKS if b.not_run is not None]
    assert all(len(r) >= 8 for r in reasons), reasons  # a reason, not a bare marker


COMPOSABLE = distinct([c for c in COMMANDS if not c.expect and not problems(c)])


def test_the_docs_hold_run_commands_to_check():
    assert len(COMPOSABLE) > 40
    assert any(c.inline for c in COMPOSABLE) and any(c.not_run for c in COMPOSABLE)


@pytest.mark.parametrize("cmd", COMPOSABLE, ids=[_id(c) for c in COMPOSABLE])
def test_every_run_command_of_the_docs_composes(cmd):
    """All of them (blocks, marked or not, and prose), in this process: Hydra's compose, and
    the run's dry validation for an unmarked block's command; a renamed setting, group or
    option fails here."""
    cfg = compose_command(cmd, dry_run=not (cmd.inline or cmd.not_run))
    assert cfg.arena._target_ and cfg.agents


def test_the_docs_sweep_of_their_own_arena_composes_without_a_plus():
    """docs/write-arena.md's sweep, against examples/my_arena: ``arena.alpha`` is a setting
    although the arena file does not declare it (the dataclass is the schema)."""
    sweep = [
        c
        for c in COMMANDS
        if c.where.startswith("docs/write-arena.md:") and "arena.alpha=0.2,0.8" in c.args
    ]
    assert len(sweep) == 1 and not sweep[0].not_run
    cfg = compose_command(sweep[0])
    assert cfg.arena.alpha == 0.2 and cfg.arena.temperature == 2.0


def test_the_docs_own_arena_file_composes_with_their_sweep(tmp_path):
    """The arena file docs/write-arena.md shows (not the example's, which it abridges),
    written to a reader's ``my_conf/arena/distill.yaml`` next to the example's package, runs
    the page's sweep: it composes and passes the run's dry validation."""
    (yaml,) = [
        b
        for b in BLOCKS
        if b.page == "docs/write-arena.md" and b.lang == "yaml" and "mypkg.DistillArena" in b.body
    ]
    assert yaml.lang == "yaml" and not yaml.not_run
    conf = tmp_path / "my_project" / "my_conf"
    (conf / "arena").mkdir(parents=True)
    (conf / "arena" / "distill.yaml").write_text(yaml.body)  # as a reader copies it
    shutil.copytree(ROOT / "examples" / "my_arena" / "mypkg", conf.parent / "mypkg")
    (sweep,) = [
        c
        for c in COMMANDS
        if c.where.startswith("docs/write-arena.md:") and "arena.alpha=0.2,0.8" in c.args
    ]
    try:
        cfg = compose_command(sweep, cdir=conf)
    finally:
        sys.modules.pop("mypkg", None)  # the copy; the example's own is imported elsewhere
    assert cfg.arena._target_ == "mypkg.DistillArena" and cfg.arena.alpha == 0.2
    assert cfg.agents.student.encoder.hidden_size == 32 and cfg.agents.teacher.encoder


def test_every_log_file_a_page_names_is_the_one_a_run_writes(tiny_run):
    """``run.log`` was named in four pages while the command writes ``cli.log``: every bare
    ``*.log`` name in the docs is a file of a real run folder."""
    names = {
        name for page in db.pages() for name in re.findall(r"`([\w.-]+\.log)`", page.read_text())
    }
    assert "cli.log" in names
    run_dir = tiny_run(["arena=classify"])
    assert sorted(n for n in names if not (run_dir / n).is_file()) == []


TRANSCRIPTS = [c for c in COMMANDS if c.expect and not c.not_run]


@pytest.mark.parametrize(
    "cmd",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_DRIFT[c.where]))
        if c.where in KNOWN_DRIFT
        else c
        for c in TRANSCRIPTS
    ],
    ids=[_id(c) for c in TRANSCRIPTS],
)
def test_a_transcript_shows_the_line_the_command_prints(cmd, tmp_path, monkeypatch):
    """``$ command`` then ``error: ...`` on a page: the command line prints exactly that."""
    from paddlecraft import cli

    monkeypatch.chdir(tmp_path)  # a command that wrongly started would write only here
    # the program the page shows: the hints it prints repeat it (`python run.py` / `paddlecraft`)
    prog = "run.py" if "run.py" in cmd.text.split()[:3] else "paddlecraft"
    monkeypatch.setattr(sys, "argv", [prog])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = cli.main([*cmd.args, "trainer.max_steps=1", "trainer.progress=false"])
        except SystemExit as e:  # what the command line exits with
            code = e.code
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]
    assert code == 2 and lines == [cmd.expect]
    assert not list(tmp_path.iterdir())  # refused: nothing written


#: pages with Python blocks that are not whole files (those run in tests/test_doc_files.py)
PYTHON_PAGES = sorted(
    {b.page for b in BLOCKS if b.lang == "python" and not b.not_run and not b.file}
)


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_every_unmarked_python_block_runs(page, tmp_path, monkeypatch):
    """A page's unmarked ``python`` blocks run in order in one module (later blocks use what
    earlier ones define), in an empty folder; nothing is downloaded."""
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("doc_" + re.sub(r"\W", "_", page))
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        for b in BLOCKS:
            if b.page == page and b.lang == "python" and not b.not_run and not b.file:
                exec(compile(b.body, b.where, "exec"), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[module.__name__]
        module.__dict__.clear()
    assert os.getcwd() == str(tmp_path)


# ----------------------------------------------------------------------------- tiny runs
#: small settings per kind of arena, applied where the composed config has the key and it is
#: on (an encoder swapped by the command has other keys; what is off stays off); the
#: engine's own stop after 2 steps
TINY_ALWAYS = ["trainer.max_steps=2", "trainer.progress=false"]
TINY_WHERE_PRESENT = [
    "arena.epochs=1",
    "arena.steps_per_epoch=2",
    "arena.games_per_step=16",
    "arena.eval_samples=300",
    "arena.final_samples=1000",
    "arena.featnet.channels=[16,32]",
    "arena.featnet.embedding_dim=32",
    "arena.featnet.epochs=4",
    "arena.data.n_train=64",
    "arena.data.n_test=12",
    "arena.data.n_compositional=8",
    "arena.hops.captioner.steps=2",
    "arena.hops.listener.steps=2",
    "arena.hops.recognizer.steps=2",
    "arena.speech.n_train=16",
    "arena.speech.n_test=6",
    "arena.speech.n_compositional=4",
    "arena.eval_size=20",
    "arena.newcomer_steps=2",
    "arena.eval.solver_positions=8",
    "arena.search.updates=1",  # the search phase's updates fit in the run's 2 steps
    "data.loader.n_train=128",
    "data.loader.n_test=64",
]


def _set(cfg, key: str) -> bool:
    """Whether ``key`` is in the config and on (not 0, None or off: that stays off)."""
    node = cfg
    for part in key.split("."):
        if not hasattr(node, "keys") or part not in node:
            return False
        node = node[part]
    return bool(node)


def tiny_overrides(cfg) -> list[str]:
    """Overrides that make the composed run tiny: 2 steps, small data and evaluation."""
    out = list(TINY_ALWAYS)
    out += [o for o in TINY_WHERE_PRESENT if _set(cfg, o.split("=", 1)[0])]
    evals = cfg.arena.get("eval") if hasattr(cfg.arena, "get") else None
    for group, games in (evals or {}).items():  # self-play: evaluation games per opponent
        if hasattr(games, "items"):
            for opponent, n in games.items():
                if isinstance(n, int) and "1000" in opponent:
                    out.append(f"~arena.eval.{group}.{opponent}")
                elif isinstance(n, int):
                    out.append(f"arena.eval.{group}.{opponent}=2")
    return out


def run_tiny(cmd: db.RunCommand, run_dir: Path) -> subprocess.CompletedProcess:
    """The command at its first point, tiny, in a subprocess (the command line is the point)."""
    cfg = compose_command(cmd, dry_run=False)
    cdir = user_config_dir(cmd)
    args = [*one_point(cmd), *tiny_overrides(cfg), f"hydra.run.dir={run_dir}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if cdir is not None:
        args = ["--config-dir", str(cdir), *args]
        env["PYTHONPATH"] = str(cdir.parent)
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=run_dir.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """``tiny_run(args)``: the folder of a finished tiny run of ``python run.py <args>``,
    made once per session."""
    made: dict[tuple[str, ...], Path] = {}

    def _make(args: list[str]) -> Path:
        key = tuple(args)
        if key not in made:
            d = tmp_path_factory.mktemp("docrun") / "run"
            cmd = db.RunCommand("marker", " ".join(args), list(args))
            r = run_tiny(cmd, d)
            assert r.returncode == 0, r.stderr[-3000:]
            made[key] = d
        return made[key]

    return _make


PROMISES = [f for p in db.pages() for f in db.folder_promises(p)]
#: run folders cheap enough for the fast tier
FAST_RUNS = {("arena=classify",)}


def test_every_list_of_run_files_names_its_run():
    """A paragraph that says what a run leaves (three run files next to ``runs/.../<time>``)
    carries ``<!-- run folder: <overrides> -->``, so the next test can check it."""
    assert len(PROMISES) >= 4
    unmarked = [f.where for f in PROMISES if f.args is None]
    assert unmarked == [], "add <!-- run folder: arena=<name> ... --> to each"


@pytest.mark.parametrize(
    "promise",
    [
        f if tuple(f.args or ()) in FAST_RUNS else pytest.param(f, marks=pytest.mark.slow)
        for f in PROMISES
    ],
    ids=[f.where for f in PROMISES],
)
def test_every_file_a_page_promises_is_in_a_real_run_folder(promise, tiny_run):
    run_dir = tiny_run(promise.args)
    missing = [
        n for n in promise.names if not (run_dir / n.rstrip("/")).exists() or
        (n.endswith("/") and not (run_dir / n).is_dir())
    ]  # fmt: skip
    assert missing == [], (
        f"{promise.where} promises {missing}; the run left {sorted(os.listdir(run_dir))}"
    )
