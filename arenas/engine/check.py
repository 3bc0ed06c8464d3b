"""``check_arena``: test a custom arena the way PettingZoo's ``api_test`` tests an environment."""

from __future__ import annotations

import math
import tempfile
from contextlib import nullcontext
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents import Agent

from .base import Arena
from .checkpoint import latest_good_checkpoint, restore_checkpoint
from .loop import Callback, Loop, takes_start


class ArenaCheckError(AssertionError):
    """``check_arena`` found problems; ``problems`` lists them in plain words."""

    def __init__(self, arena: Arena, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{type(arena).__name__} failed check_arena:\n{lines}")


class _Recorder(Callback):
    def __init__(self, tag: str, events: list[str]) -> None:
        self.tag, self.events = tag, events
        self.key = f"_check_{tag}"

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("on_"):
            events, tag = (
                object.__getattribute__(self, "events"),
                object.__getattribute__(self, "tag"),
            )
            return lambda loop, *a: events.append(f"{tag}:{name[3:]}")
        return object.__getattribute__(self, name)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except Exception:
        return a == b


def _params(arena: Arena) -> dict[str, np.ndarray]:
    return {p.name: p.numpy().copy() for a in arena.agents.values() for p in a.parameters()}


def check_arena(arena: Arena, steps: int = 4, run_dir: str | None = None) -> list[str]:
    """Run ``arena`` for a few steps and check the contract the engine relies on.

    Checks: agents are `Agent` objects keyed by their names; ``batches``
    is deterministic for an epoch; ``train_step`` returns finite float metrics;
    ``evaluate`` returns the headline metric; callbacks fire in onion order; and a run
    resumed from a mid-run checkpoint ends with bit-identical parameters. Returns the
    list of checks passed; raises `ArenaCheckError` listing every problem.
    The arena is trained for ``2 * steps`` steps (twice from the midpoint).
    """
    problems: list[str] = []
    passed: list[str] = []
    name = type(arena).__name__

    if not isinstance(getattr(arena, "agents", None), dict) or not arena.agents:
        raise ArenaCheckError(arena, ["arena.agents must be a non-empty dict {name: Agent}"])
    for key, agent in arena.agents.items():
        if not isinstance(agent, Agent):
            problems.append(f"agents[{key!r}] is a {type(agent).__name__}, not an agents.Agent")
        elif agent.name != key:
            problems.append(
                f"agents[{key!r}] is named {agent.name!r}; key and agent name must match"
            )
    if problems:
        raise ArenaCheckError(arena, problems)

    first = list(islice(iter(arena.batches(0)), 2))
    again = list(islice(iter(arena.batches(0)), 2))
    if not first:
        problems.append("batches(0) yielded nothing: an epoch needs at least one batch")
    elif not _same(first, again):
        problems.append(
            "batches(0) gave a different order the second time: derive data order only from "
            "(seed, epoch), e.g. self.epoch_rng(epoch), so a resumed run replays it"
        )
    else:
        passed.append("batches are deterministic per epoch")
        if takes_start(arena) and len(first) == 2:
            later = list(islice(iter(arena.batches(0, start=1)), 1))
            if not later or not _same(first[1:], later):
                problems.append(
                    "batches(0, start=1) did not begin with the second batch of batches(0): "
                    "start must skip exactly that many batches of the same order"
                )
            else:
                passed.append("batches(epoch, start) resumes mid-epoch")

    with tempfile.TemporaryDirectory() if run_dir is None else nullcontext(run_dir) as d:
        events: list[str] = []
        from .callbacks import Checkpointer, Evaluator

        half = max(1, steps)
        # recorders innermost: their end phases run first, then evaluation, then the save
        cbs = [
            Checkpointer(every=half, keep=5),
            Evaluator(every=half),
            _Recorder("outer", events),
            _Recorder("inner", events),
        ]
        loop = Loop(arena, cbs, Path(d) / "a", max_steps=2 * half, handle_signals=False)
        try:
            loop.run()
        except Exception as e:  # report, do not crash the user's test with a bare trace
            raise ArenaCheckError(
                arena, [*problems, f"training raised {type(e).__name__}: {e}"]
            ) from e
        metrics = loop.last_metrics
        if not metrics or not all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()
        ):
            problems.append(f"train_step should return finite float metrics, got {metrics!r}")
        else:
            passed.append("train_step returns finite metrics")
        if arena.headline not in loop.last_eval:
            problems.append(
                f"evaluate() returned {sorted(loop.last_eval)} without the headline metric "
                f"{arena.headline!r} (set {name}.headline to one of them)"
            )
        else:
            passed.append("evaluate returns the headline")
        problems += _onion_problems(events)
        if not any(p.startswith("callbacks") for p in problems):
            passed.append("callbacks fire in onion order")

        final = _params(arena)
        found = latest_good_checkpoint(Path(d) / "a")
        ckpts = sorted((Path(d) / "a" / "checkpoints").glob("step_*"))
        mid = next((c for c in ckpts if c.name == f"step_{half:08d}"), None)
        if found is None or mid is None:
            problems.append("no checkpoint was written: arena state could not be saved")
        else:
            from .checkpoint import verify_checkpoint

            loop2 = Loop(
                arena,
                [Checkpointer(every=0, keep=5), Evaluator(every=half)],
                Path(d) / "b",
                max_steps=2 * half,
                handle_signals=False,
            )
            restore_checkpoint(loop2, mid, verify_checkpoint(mid))
            loop2.run()
            resumed = _params(arena)
            diff = {
                k: float(np.abs(final[k] - resumed[k]).max())
                for k in final
                if not np.array_equal(final[k], resumed[k])
            }
            if diff:
                worst = max(diff, key=diff.get)
                problems.append(
                    f"resuming from the checkpoint at step {half} does not reproduce the run: "
                    f"{len(diff)} parameter(s) differ (worst {worst}: {diff[worst]:.3g}). State that "
                    "changes during training is not saved: return it from arena_state() and restore "
                    "it in load_arena_state(); draw randomness from paddle/numpy/random global "
                    "streams or self.epoch_rng(epoch), not from generators the arena keeps"
                )
            else:
                passed.append("resume from a checkpoint is bit-identical")
    if problems:
        raise ArenaCheckError(arena, problems)
    return passed


def _onion_problems(events: list[str]) -> list[str]:
    problems = []
    if not events or events[0] != "outer:run_start" or events[1] != "inner:run_start":
        problems.append("callbacks: run_start did not fire first, outer before inner")
    if events[-2:] != ["inner:run_end", "outer:run_end"]:
        problems.append("callbacks: run_end did not fire last, inner before outer")
    for i, e in enumerate(events):
        if e == "outer:step_start" and (
            i + 1 >= len(events) or events[i + 1] != "inner:step_start"
        ):
            problems.append("callbacks: step_start did not reach the inner callback")
            break
        if e == "inner:step_end" and (i + 1 >= len(events) or events[i + 1] != "outer:step_end"):
            problems.append("callbacks: step_end did not unwind inner -> outer")
            break
    if "outer:eval_start" not in events:
        problems.append("callbacks: evaluation never ran")
    return problems
