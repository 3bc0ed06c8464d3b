"""Shared fixtures: CPU tuning, Hydra compose, unique name scopes, Paddle left in dynamic float32."""

from __future__ import annotations

from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

apply_cpu_tuning()  # what run.py does, before Paddle is imported

import hashlib  # noqa: E402
import itertools  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import paddle  # noqa: E402
import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def _tag(nodeid: str) -> str:
    """Six hex digits of a test's id, which its scope names are made from. An agent's
    initial weights are seeded by its name: with a counter over the session, each test's
    draws depended on how many tests its worker had run before it (one test passed alone
    and failed in CI that way). Now a test draws the same numbers alone, in any order and
    on any worker."""
    return hashlib.blake2s(nodeid.encode(), digest_size=3).hexdigest()


def _check_tags(items: list[pytest.Item]) -> None:
    """Two collected tests must not share a tag (their scope names would be the same)."""
    seen: dict[str, str] = {}
    for item in items:
        tag = _tag(item.nodeid)
        if tag in seen:
            raise pytest.UsageError(
                f"tests {seen[tag]} and {item.nodeid} share the scope tag {tag}: rename one"
            )
        seen[tag] = item.nodeid


@pytest.fixture(scope="session")
def compose_config() -> Callable[..., DictConfig]:
    """``compose_config("arena=gan", "trainer.max_steps=2", config_dir=None)``: run.py's config.

    Registers the built-in schemas first (as run.py does); ``config_dir`` composes from
    another config folder (a user's ``--config-dir``).
    """
    from paddlecraft.arenas import register_configs

    register_configs()

    def _compose(*overrides: str, config_dir: str | Path | None = None) -> DictConfig:
        with initialize_config_dir(config_dir=str(config_dir or CONF), version_base="1.3"):
            return compose("config", overrides=list(overrides))

    return _compose


@pytest.fixture
def scope(request: pytest.FixtureRequest) -> str:
    """A name scope no other live encoder holds, the same in every run of the test."""
    return f"t{_tag(request.node.nodeid)}"


@pytest.fixture
def make_scope(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Call it for as many fresh scopes as a test needs (``prefix``, the test's tag, a
    count within the test)."""
    tag, count = _tag(request.node.nodeid), itertools.count()
    return lambda prefix="t": f"{prefix}{tag}n{next(count)}"


@pytest.fixture(autouse=True)
def _paddle_defaults():
    yield
    if not paddle.in_dynamic_mode():
        paddle.disable_static()
    paddle.set_default_dtype("float32")


#: where a run writes when no ``hydra.run.dir`` is given: a test sends its runs to its own
#: ``tmp_path`` instead, so that tests running side by side (``pytest -n``) never share one
RUN_FOLDERS = ("runs", "multirun", "outputs")
_LEFT_BEFORE = pytest.StashKey[set]()


def _run_folders() -> set[str]:
    return {str(p.relative_to(ROOT)) for top in RUN_FOLDERS for p in (ROOT / top).glob("*/*")}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_LEFT_BEFORE] = _run_folders()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when tests left run folders in the checkout (the controller checks,
    after every xdist worker has finished)."""
    if hasattr(session.config, "workerinput"):
        return
    left = sorted(_run_folders() - session.config.stash.get(_LEFT_BEFORE, set()))
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(
                f"error: tests left run folders in the checkout: {', '.join(left)} "
                "(give each run hydra.run.dir=<tmp_path>/...)",
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: test files that take tens of seconds (benches, sweeps, a namespace of Ray workers, the
#: mistake table, multi-process runs), longest first (wall time of each file alone).
#: `scripts/test.sh` hands files to its workers in collection order
#: (``--no-loadscope-reorder``): these go
#: first, so the many quick files fill in behind them instead of one worker finishing a
#: long file alone at the end (xdist's default order, by test count, puts them last).
HEAVY_FIRST = (
    "test_bench.py",
    "test_summary.py",
    "test_selfplay_ray.py",
    "test_mistakes.py",
    "test_doc_commands.py",
    "test_cli.py",
    "test_live.py",
    "test_reliability.py",
    "test_wheel.py",
    "test_caption.py",
    "test_smoke.py",
    "test_distributed.py",
    "test_live_cli.py",
    "test_config.py",
    "test_plug.py",
    "test_live_dp.py",
    "test_own_arena.py",
    "test_export.py",
    "test_transformer_decoder.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Heavy files (`HEAVY_FIRST`) first, in that order; every other test keeps its place.
    No two tests may share a scope tag."""
    _check_tags(items)
    missing = [f for f in HEAVY_FIRST if not (ROOT / "tests" / f).is_file()]
    if missing:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py HEAVY_FIRST names no such file: {missing}")
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda it: rank.get(it.path.name, len(rank)))  # stable: the rest keep order
