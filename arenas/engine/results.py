"""``results.json``: the run's last word (status, headline, overrides, artifacts), strict JSON.

A value that is not a finite number is written as ``null`` with the reason, and a headline
that ended at or below the arena's chance level is flagged (``chance_level``, ``at_chance``,
``warning``). `ResultsWriter` is one of the callbacks that ship
(`.callbacks`); ``finite_or_null`` is also what ``metrics.jsonl`` lines go through.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from paddlecraft.encoders.tensorio import atomic_write_json

from .loop import Callback, Loop

log = logging.getLogger("paddlecraft")


def finite_or_null(obj: Any, path: str = "") -> tuple[Any, dict[str, str]]:
    """``obj`` with every NaN/inf float replaced by ``None`` (strict JSON), and what was
    replaced: ``{"last_train_metrics.loss": "nan"}``."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None, {path: str(obj)}
    if isinstance(obj, dict):
        out, found = {}, {}
        for k, v in obj.items():
            out[k], f = finite_or_null(v, f"{path}.{k}" if path else str(k))
            found.update(f)
        return out, found
    if isinstance(obj, (list, tuple)):
        items = [finite_or_null(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        return [v for v, _ in items], {k: r for _, f in items for k, r in f.items()}
    return obj, {}


class ResultsWriter(Callback):
    """Writes ``results.json`` (strict JSON): status, headline metrics, the command's
    overrides, artifacts, and a warning when the headline ended at or below chance.

    A value that is not a finite number is written as ``null``; ``null_reasons`` says why
    (``{"headline_value": "no evaluation: the run diverged at step 7"}``).
    """

    def __init__(self, overrides: list[str] | None = None, config: dict | None = None) -> None:
        self.overrides = list(overrides or [])
        self.config = config
        self.results: dict[str, Any] = {}

    def on_run_end(self, loop: Loop) -> None:
        results = loop.summary()
        results["overrides"] = self.overrides
        if loop.status in ("finished", "interrupted", "stopped"):
            results["artifacts"] = loop.arena.artifacts(str(loop.run_dir))
        results.update(loop.arena.extra_results())
        warning = _chance_warning(loop, results)
        if warning:
            results["warning"] = warning
        results, replaced = finite_or_null(results)
        if replaced:
            reasons = {k: f"was {v}" for k, v in replaced.items()}
            if "headline_value" in replaced:
                reasons["headline_value"] = (
                    f"no evaluation: the run diverged at step {loop.step}"
                    if loop.status == "diverged"
                    else f"no finite {loop.arena.headline}: it was {replaced['headline_value']} "
                    "or never evaluated"
                )
            results["null_reasons"] = reasons
        self.results = results
        atomic_write_json(Path(loop.run_dir) / "results.json", results)
        head = loop.arena.headline
        value = results["headline_value"]
        log.info(
            "%s: %s=%s  (status %s%s) -> %s%s",
            type(loop.arena).__name__,
            head,
            "n/a" if value is None else f"{value:.4f}",
            loop.status,
            f": {loop.stop_reason}" if loop.stop_reason else "",
            Path(loop.run_dir) / "results.json",
            f"  WARNING: {warning}" if warning else "",
        )


def _chance_warning(loop: Loop, results: dict[str, Any]) -> str | None:
    """A warning (and ``chance_level``/``at_chance`` in ``results``) when the headline
    ended at or below the arena's chance level."""
    chance = loop.arena.chance_level()
    value = results.get("headline_value")
    if chance is None or not isinstance(value, float) or not math.isfinite(value):
        return None
    if loop.status not in ("finished", "stopped"):  # an interrupted run may not be done
        return None
    below = value <= chance if loop.arena.headline_mode == "max" else value >= chance
    results["chance_level"], results["at_chance"] = chance, bool(below)
    if not below:
        return None
    return (
        f"{loop.arena.headline}={value:.4f} is at or below chance ({chance:.4g}): the run "
        "did not learn. Causes to check: the learning rate (far too high or too low "
        "collapses training without NaN), too few steps, a model too small for the task"
    )
