"""Smoke-test arenas in one command: two steps each, evaluated and checkpointed, resumed.

    python -m paddlecraft.smoke                     # every built-in arena
    python -m paddlecraft.smoke gan selfplay        # some of them
    python -m paddlecraft.smoke --out /tmp/smoke    # where the runs go (default: a temp folder)

For each arena, as ``python run.py arena=<name> debug=smoke`` would (the ``debug=smoke``
preset: ``conf/debug/smoke.yaml`` and the arena's tiny sizes in
``conf/debug_arena/smoke_<name>.yaml``), in this process: the first step (evaluated,
checkpointed), then ``resume=<run> trainer.max_steps=2`` from that checkpoint for the
second. A run passes when it finished at step 2, evaluated at steps 1 and 2 (``metrics.jsonl``)
with a headline in ``results.json``, and kept checkpoints of both steps. One line per arena; exit 1 when one failed (its traceback is
logged), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("paddlecraft")


def config_dir() -> Path:
    """The built-in config folder (``conf/`` of a checkout, ``paddlecraft/conf`` installed)."""
    from paddlecraft import conf

    return Path(conf.__file__).resolve().parent


def arenas() -> list[str]:
    """The built-in arenas (``conf/arena/*.yaml``), sorted."""
    return sorted(p.stem for p in (config_dir() / "arena").glob("*.yaml"))


@dataclass
class SmokeResult:
    """One arena's smoke run: where it ran, whether it passed, why not, how long."""

    arena: str
    run_dir: Path
    ok: bool
    detail: str
    seconds: float


def _compose(overrides: Sequence[str]):
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def _check(run_dir: Path) -> str:
    """What is missing from a finished smoke run ("" when nothing is)."""
    results = json.loads((run_dir / "results.json").read_text())
    steps = sorted(int(p.name.split("_")[-1]) for p in (run_dir / "checkpoints").glob("step_*"))
    problems = []
    if results.get("status") != "finished":
        problems.append(f"status {results.get('status')!r}")
    if results.get("step") != 2:
        problems.append(f"ended at step {results.get('step')}")
    if results.get("headline_value") is None or not results.get("metrics"):
        problems.append("no evaluation in results.json")
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    evaluated = sorted({r["step"] for r in map(json.loads, lines) if r.get("kind") == "eval"})
    if evaluated != [1, 2]:
        problems.append(f"evaluations at steps {evaluated}, not [1, 2]")
    if steps != [1, 2]:
        problems.append(f"checkpoints of steps {steps}, not [1, 2]")
    return "; ".join(problems)


def smoke_arena(
    arena: str, out: Path, extra: Sequence[str] = (), compose: Callable | None = None
) -> SmokeResult:
    """Run ``arena`` for one step, resume it for the second, check the run (see module)."""
    from paddlecraft.arenas.engine.app import run_config

    compose = compose or _compose
    run_dir = out / arena
    base = [f"arena={arena}", "debug=smoke", *extra]
    start = time.perf_counter()
    try:
        run_config(compose([*base, "trainer.max_steps=1"]), run_dir)
        resume = ["trainer.max_steps=2"]
        run_config(compose([*base, f"resume={run_dir}", *resume]), run_dir, resume)
        detail = _check(run_dir)
    except Exception as e:  # a smoke run reports every arena, whatever one of them raised
        log.error("smoke %s failed:\n%s", arena, traceback.format_exc())
        detail = f"{type(e).__name__}: {' '.join(str(e).split())}"
    return SmokeResult(arena, run_dir, not detail, detail, time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit code."""
    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    parser = argparse.ArgumentParser(prog="python -m paddlecraft.smoke", description=__doc__)
    parser.add_argument("arena", nargs="*", help="arenas to run (default: every built-in one)")
    parser.add_argument("--out", type=Path, help="folder for the runs (default: a temp one)")
    args = parser.parse_args(argv)
    known = arenas()
    unknown = [a for a in args.arena if a not in known]
    if unknown:
        parser.exit(2, f"error: no arena {', '.join(unknown)}; choose from {', '.join(known)}\n")
    apply_cpu_tuning()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    out = args.out or Path(tempfile.mkdtemp(prefix="paddlecraft-smoke-"))
    failed = 0
    for name in args.arena or known:
        r = smoke_arena(name, out)
        failed += not r.ok
        sys.stdout.write(
            f"{'ok  ' if r.ok else 'FAIL'} {name:<20} {r.seconds:6.1f} s  {r.detail or r.run_dir}\n"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
