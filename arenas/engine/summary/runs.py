"""Run folders and what a summary reads from each: ``results.json``, ``config.yaml``, Hydra's
``.hydra/overrides.yaml``, ``failed.json`` (a sweep job that raised before the run
could write its results; written by `SweepSummary`) and ``judged.json`` (figures measured
on the finished run afterwards, by a judge outside it: `record_judgement`).

A run folder is any folder holding one of those records; a sweep folder holds run folders
(``multirun/<arena>/<time>/<n>_<overrides>/``). The search does not descend into a run's
own folders (checkpoints, media) nor into an MLflow store's artifact copies.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from paddlecraft.encoders.tensorio import atomic_write_json
from paddlecraft.errors import PaddleCraftError

#: written into a sweep job's folder when the job raised before writing results.json
FAILED = "failed.json"
#: figures judged on a finished run after it ended (`record_judgement`), read as metrics
JUDGED = "judged.json"
#: folders never searched for runs
SKIP_DIRS = {"mlflow", "mlruns", "checkpoints", ".hydra", "__pycache__", "policy", "media"}
#: override keys that say how a run was run, not what it was (never grouped or shown)
BOOKKEEPING = ("seed", "resume", "trainer.progress", "trainer.progress_every_s",
               "trainer.mlflow_uri", "trainer.mlflow_experiment", "trainer.visualdl",
               "trainer.mlflow", "sweep", "allow_targets", "hydra")  # fmt: skip


class SummaryError(PaddleCraftError):
    """A summary asked of folders that hold no runs, or of a metric no run has."""


@dataclass
class RunRecord:
    """One run (one sweep job) as a summary sees it."""

    path: Path  #: the run folder
    name: str  #: its name in the table (the folder, relative to what was searched)
    status: str  #: finished, diverged, failed, stopped, interrupted, aborted
    overrides: dict[str, str]  #: the command line's key=value settings
    config: dict[str, Any]  #: the run's config.yaml, flattened to dotted keys
    headline: str | None
    headline_mode: str | None  #: "max" or "min" (None: an older results.json)
    metrics: dict[str, float]  #: every final metric (numbers only, flattened)
    elapsed_s: float | None
    seed: Any = None
    job: int | None = None  #: the sweep job's number (Optuna: the trial)
    error: str | None = None  #: why it failed, when it did
    extra: dict[str, Any] = field(default_factory=dict)

    def setting(self, key: str) -> Any:
        """The value of ``key`` for this run: its override, else its config, else None."""
        if key in self.overrides:
            return parse_value(self.overrides[key])
        return self.config.get(key)

    def value(self, metric: str) -> float | None:
        """``metric``'s final value, None when absent or not finite."""
        v = self.metrics.get(metric)
        return v if v is not None and math.isfinite(v) else None


def parse_value(text: str) -> Any:
    """An override's value as a number or bool where it reads as one (``1e-3`` -> 0.001)."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists stay values."""
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: tree}


def split_override(item: str) -> tuple[str, str] | None:
    """``+arena.x=1`` -> ``("arena.x", "1")``; None for a deletion or a bare word."""
    if "=" not in item or item.startswith("~"):
        return None
    key, value = item.split("=", 1)
    return key.lstrip("+"), value


def first_overrides(folder: Path) -> list[str]:
    """The command line that started the run in ``folder`` (Hydra's
    ``.hydra/overrides.yaml``; a resume writes none there), or [] when Hydra did not start it."""
    items = _read_yaml(Path(folder) / ".hydra" / "overrides.yaml")
    return [str(i) for i in items] if isinstance(items, list) else []


def is_bookkeeping(key: str) -> bool:
    """Whether ``key`` says how a run was run (seed, resume, logging, Hydra's own)."""
    return any(key == b or key.startswith(b + ".") or key.startswith(b + "/") for b in BOOKKEEPING)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None


def _numbers(metrics: Any) -> dict[str, float]:
    out = {}
    for k, v in flatten(metrics if isinstance(metrics, dict) else {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
    return out


def _hydra(folder: Path) -> dict[str, Any]:
    tree = _read_yaml(folder / ".hydra" / "hydra.yaml")
    out = tree.get("hydra") if isinstance(tree, dict) else None
    return out if isinstance(out, dict) else {}


def _choices(hydra: dict[str, Any]) -> dict[str, Any]:
    """The config groups the run was composed from (``game: connect_four``,
    ``encoder@agents.policy.encoder: lines_256x3``; Hydra's own aside), from its `_hydra`
    record: a run that names a group's default and one that leaves it are the same setting."""
    choices = (hydra.get("runtime") or {}).get("choices") or {}
    return {str(k): v for k, v in choices.items() if not str(k).startswith("hydra/")}


def _job_number(folder: Path, hydra: dict[str, Any]) -> int | None:
    num = (hydra.get("job") or {}).get("num")
    if isinstance(num, int):
        return num
    m = re.match(r"(\d+)_", folder.name)
    return int(m.group(1)) if m else None


def record_judgement(
    folder: str | os.PathLike,
    metrics: dict[str, Any],
    by: str,
    details: dict[str, Any] | None = None,
) -> Path:
    """Add ``metrics``, figures measured on the finished run in ``folder`` after it ended
    (a perfect solver's judgement of its saved policy, a benchmark), to the run's
    ``judged.json``, atomically; ``by`` names the command that measured them. Judgements
    accumulate (a later one replaces only the names it gives), so the summary can group
    and bootstrap them over seeds like the run's own final metrics (`read_run`; a run's
    own metric of the same name wins). Only numbers are read back as metrics; ``details``
    (JSON values that are not figures: the positions where a game was given away, say)
    are kept beside them under ``"details"``, merged the same way, for a reader to look up
    without rerunning the judge."""
    path = Path(folder) / JUDGED
    if not (Path(folder) / "results.json").is_file():
        raise SummaryError(
            f"record_judgement: {str(folder)!r} holds no finished run (no results.json)"
        )
    old = _read_json(path) or {}
    merged = {**(old.get("metrics") or {}), **metrics}
    record: dict[str, Any] = {
        "metrics": merged,
        "by": {**(old.get("by") or {}), **dict.fromkeys([*metrics, *(details or {})], by)},
    }
    kept = {**(old.get("details") or {}), **(details or {})}
    if kept:
        record["details"] = kept
    atomic_write_json(path, record)
    return path


def unreadable(folder: Path) -> str | None:
    """Why ``folder``'s ``results.json`` (or ``failed.json``) cannot be read as a run's
    record (truncated, not JSON, not an object, unreadable); None when it can or is absent."""
    for file in ("results.json", FAILED):
        path = folder / file
        if not path.is_file():
            continue
        try:
            record = json.loads(path.read_text())
        except OSError as e:
            return f"{file} cannot be read ({e.strerror or e})"
        except ValueError as e:
            return f"{file} is not valid JSON ({e})"
        if not isinstance(record, dict):
            return f"{file} holds a JSON {type(record).__name__}, not a run's record"
        return None
    return None


def read_run(folder: Path, name: str) -> RunRecord | None:
    """The run in ``folder``, or None when the folder holds no finished record of one."""
    results = _read_json(folder / "results.json")
    failed = None if results is not None else _read_json(folder / FAILED)
    if results is None and failed is None:
        return None
    record = results if results is not None else failed
    items = record.get("overrides")
    if items is None:
        items = first_overrides(folder)
    elif any(str(i).startswith("resume=") for i in items):  # written before resumed runs
        items = [*first_overrides(folder), *items]  # kept their first command line
    overrides = dict(kv for kv in map(split_override, map(str, items)) if kv)
    hydra = _hydra(folder)
    config = {**_choices(hydra), **flatten(_read_yaml(folder / "config.yaml") or {})}
    judged = (_read_json(folder / JUDGED) or {}).get("metrics") if results else None
    metrics = {**_numbers(judged), **_numbers(record.get("metrics"))}
    headline = record.get("headline")
    if headline and headline not in metrics and isinstance(record.get("headline_value"), float):
        metrics[headline] = record["headline_value"]
    seed = parse_value(overrides["seed"]) if "seed" in overrides else config.get("seed")
    return RunRecord(
        path=folder,
        name=name,
        status=str(record.get("status", "failed")),
        overrides=overrides,
        config=config,
        headline=headline,
        headline_mode=record.get("headline_mode"),
        metrics=metrics,
        elapsed_s=record.get("elapsed_s"),
        seed=seed,
        job=_job_number(folder, hydra),
        error=record.get("error") or (record.get("stop_reason") if results else None),
    )


def find_runs(paths: list[str | os.PathLike]) -> list[RunRecord]:
    """Every run in ``paths`` (run folders, sweep folders, or folders of either), in order:
    by path given, then by job number, then by name. A folder that does not exist is the
    user's mistake (`SummaryError`), and so is a run whose record cannot be read (each is
    named with its reason: a summary never leaves a run out silently)."""
    runs: list[RunRecord] = []
    bad: list[str] = []
    for given in paths:
        root = Path(given)
        if not root.is_dir():
            raise SummaryError(
                f"summary: {str(given)!r} is not a folder; give run or sweep folders "
                "(runs/<arena>/<time>, multirun/<arena>/<time>)"
            )
        found = []
        for folder, dirs, files in os.walk(root):
            here = Path(folder)
            name = root.name if here == root else str(here.relative_to(root))
            if len(paths) > 1 and here != root:
                name = f"{root.name}/{name}"
            has_record = bool({"results.json", FAILED} & set(files))
            why = unreadable(here) if has_record else None
            if why is not None:
                bad.append(f"{here}: {why}")
                dirs[:] = []
                continue
            run = read_run(here, name) if has_record else None
            if run is not None:
                found.append(run)
                dirs[:] = []  # a run's own sub-folders hold no other runs
                continue
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        found.sort(key=lambda r: (r.job is None, r.job or 0, r.name))
        runs += found
    if bad:
        raise SummaryError(
            f"summary: {len(bad)} run(s) cannot be read: {'; '.join(bad)}; repair or move "
            "each away (or give only the other folders), then summarise again"
        )
    return runs
