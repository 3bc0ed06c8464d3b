"""A summary of runs: one row per run, runs that differ only in ``seed`` grouped.

`build_summary` turns `RunRecord` s into a `Summary`; its
``write`` puts ``summary.csv``, ``summary.json`` and ``summary.md`` (and the plot,
`.plot`) in a folder. The grouping keys are the settings that vary between the runs
(from their overrides, and their ``config.yaml`` for runs that did not override a key),
without ``seed`` and bookkeeping (resume, logging, Hydra's own): jobs that differ only in
``seed`` land in one group. ``by`` names the keys instead (any config key).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecraft.encoders.tensorio import atomic_write_bytes

from .runs import RunRecord, SummaryError, is_bookkeeping
from .stats import CI_NOTE, GroupStats, group_stats

#: the files a summary writes (the plot beside them: `.plot.PLOT`)
FILES = ("summary.csv", "summary.json", "summary.md")
#: statuses whose metric counts in a group's statistics
COUNTED = ("finished", "stopped")
#: final metrics shown per run in summary.md (summary.csv has them all)
MD_METRICS = 8
#: group statistics, in the order of the tables
STAT_KEYS = ("n", "mean", "std", "iqm", "ci_low", "ci_high", "iqm_ci_low", "iqm_ci_high",
             "min", "max")  # fmt: skip


@dataclass
class Group:
    """The runs sharing one value of every grouping key, and their statistics."""

    key: tuple[Any, ...]  #: the grouping keys' values, in `Summary.by` order
    runs: list[RunRecord]
    stats: GroupStats
    best: bool = False

    def statuses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.runs:
            out[r.status] = out.get(r.status, 0) + 1
        return out


@dataclass
class Summary:
    """Rows (runs), groups, the metric summarised and which way is better."""

    metric: str
    mode: str  #: "max" or "min"
    by: list[str]
    runs: list[RunRecord]
    groups: list[Group]
    best_run: RunRecord | None = None
    extra: dict[str, Any] = field(default_factory=dict)  #: e.g. Optuna's best trial

    # ------------------------------------------------------------------ rows
    def metric_names(self) -> list[str]:
        """Every final metric any run has, the summarised one first."""
        names = sorted({k for r in self.runs for k in r.metrics} - {self.metric})
        return [self.metric, *names]

    def run_rows(self) -> list[dict[str, Any]]:
        """One dict per run: name, job, settings, seed, status, value, best, metrics, time."""
        rows = []
        for r in self.runs:
            row: dict[str, Any] = {"kind": "run", "name": r.name, "job": r.job}
            row.update({k: r.setting(k) for k in self.by})
            row.update({"seed": r.seed, "status": r.status, "value": r.value(self.metric)})
            row["best"] = r is self.best_run
            row.update({m: r.value(m) for m in self.metric_names()})
            row["elapsed_s"] = r.elapsed_s
            rows.append(row)
        return rows

    def group_rows(self) -> list[dict[str, Any]]:
        """One dict per group: its key values, seeds, statuses, statistics, best."""
        rows = []
        for g in self.groups:
            row: dict[str, Any] = {"kind": "group", "name": _key_text(self.by, g.key)}
            row.update(dict(zip(self.by, g.key, strict=True)))
            row["seed"] = " ".join(str(r.seed) for r in g.runs)
            row["status"] = " ".join(f"{k}:{v}" for k, v in g.statuses().items())
            row.update(g.stats.as_dict())
            row["best"] = g.best
            rows.append(row)
        return rows

    # ------------------------------------------------------------------ files
    def csv_text(self) -> str:
        """Groups first, then runs; one ``kind`` column tells them apart."""
        rows = self.group_rows() + self.run_rows()
        columns: list[str] = []
        for row in rows:
            columns += [c for c in row if c not in columns]
        out = io.StringIO()
        writer = csv.DictWriter(out, columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_cell(v) for k, v in row.items()})
        return out.getvalue()

    def as_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "group_by": self.by,
            "interval": CI_NOTE,
            "groups": self.group_rows(),
            "runs": self.run_rows(),
            "best_run": self.best_run.name if self.best_run else None,
            **self.extra,
        }

    def markdown(self) -> str:
        """The groups table (the one for a paper), then every run."""
        better = "higher" if self.mode == "max" else "lower"
        lines = [
            f"Metric: `{self.metric}` ({better} is better); {_count(len(self.runs), 'run')}, "
            f"{_count(len(self.groups), 'group')} (by {', '.join(self.by) or 'nothing: all runs'}).",
            f"Intervals: {CI_NOTE}.",
            "",
        ]
        optuna = self.extra.get("optuna")
        if optuna:
            params = ", ".join(f"{k}={v}" for k, v in (optuna.get("best_params") or {}).items())
            lines[-1:] = [
                f"Optuna's best trial (optimization_results.yaml): {optuna.get('best_value')} "
                f"with {params}; the job marked **best** below.",
                "",
            ]
        head = [*self.by, "n", "mean ± std", "IQM", "95% CI (mean)", "95% CI (IQM)",
                "min", "max", "runs"]  # fmt: skip
        body = []
        for g in self.groups:
            s = g.stats
            cells = [_setting(v) for v in g.key]
            cells += [str(s.n), _pm(s.mean, s.std), _fmt(s.iqm), _ci(s.ci_low, s.ci_high),
                      _ci(s.iqm_ci_low, s.iqm_ci_high), _fmt(s.min), _fmt(s.max)]  # fmt: skip
            runs = ", ".join(f"{k} {v}" for k, v in g.statuses().items())
            cells.append(runs + (" **best**" if g.best else ""))
            body.append(cells)
        lines += _table(head, body)
        shown = self.metric_names()[:MD_METRICS]
        more = len(self.metric_names()) - len(shown)
        lines += ["", "Runs" + (f" ({more} more metrics in summary.csv):" if more else ":"), ""]
        # a run is named by its job number only where that tells the runs apart (one
        # sweep); runs of several sweeps (each with a job 0) are named by their folders
        jobs = [r.job for r in self.runs]
        by_job = None not in jobs and len(set(jobs)) == len(jobs)
        head = [
            "job" if by_job else "run",
            *self.by,
            "seed",
            "status",
            *shown,
            "time (s)",
        ]
        body = []
        for r in self.runs:
            cells = [(str(r.job) if by_job else r.name)
                     + (" **best**" if r is self.best_run else "")]  # fmt: skip
            cells += [_setting(r.setting(k)) for k in self.by]
            cells += [_fmt(r.seed), r.status, *(_fmt(r.value(m)) for m in shown)]
            cells.append(_fmt(r.elapsed_s, 1))
            body.append(cells)
        lines += _table(head, body)
        return "\n".join(lines) + "\n"

    def write(self, folder: str | os.PathLike, plot: bool = True) -> list[Path]:
        """Write the three files (and the plot) into ``folder``, each atomically."""
        folder = Path(folder)
        texts = {
            "summary.csv": self.csv_text(),
            "summary.json": json.dumps(self.as_json(), indent=2, default=str) + "\n",
            "summary.md": self.markdown(),
        }
        written = []
        for name, text in texts.items():
            atomic_write_bytes(folder / name, text.encode())
            written.append(folder / name)
        if plot:
            from ..plots import save
            from .plot import PLOT, summary_chart

            fig = summary_chart(self.groups, self.by, self.metric, self.mode)
            if fig is not None:
                written.append(save(fig, folder / PLOT))
        return written


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _key_text(by: Sequence[str], key: Sequence[Any]) -> str:
    return " ".join(f"{k}={_fmt(v)}" for k, v in zip(by, key, strict=True)) or "all"


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)  # every digit: a test can compare exactly
    return v


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _setting(v: Any) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _pm(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "-"
    return _fmt(mean) if std is None else f"{mean:.4f} ± {std:.4f}"


def _ci(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.4f}, {high:.4f}]"


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in body]


def varying_keys(runs: Sequence[RunRecord]) -> list[str]:
    """Override keys whose values differ between runs (not seed, not bookkeeping)."""
    keys: list[str] = []
    for r in runs:
        keys += [k for k in r.overrides if k not in keys and not is_bookkeeping(k)]
    return [k for k in keys if len({repr(r.setting(k)) for r in runs}) > 1]


def _sort_key(key: tuple[Any, ...]) -> tuple:
    """Numbers in order, then everything else by its text, then unset (None) last: runs whose
    overrides differ mix a number, a string and None under one key."""

    def one(v: Any) -> tuple[int, float, str]:
        if v is None:
            return (2, 0.0, "")
        if isinstance(v, (int, float)):
            return (0, float(v), str(v))
        return (1, 0.0, str(v))

    return tuple(one(v) for v in key)


#: words of a metric's name that make a smaller value the better one (`better_way`)
LOWER_IS_BETTER = frozenset(
    "loss losses mistake mistakes error errors fid wer cer perplexity regret nll mse rmse mae "
    "distance diff".split()
)


def better_way(metric: str, runs: Sequence[RunRecord] = ()) -> str:
    """Which way ``metric`` is better, ``"max"`` or ``"min"``: the runs' own word when it is
    their headline (``headline_mode``), else its name's: ``min`` when a word of it (split at
    ``_``, ``-`` and ``.``) is a loss, mistake, error, FID, WER/CER, perplexity, regret, NLL,
    (R)MSE, MAE, distance or diff and
    none is ``no`` (``test_loss``, ``loss_rate_vs_mcts100``, ``pons_beginning-hard_search200_mistake_rate``;
    not ``no_loss_rate_vs_random``), ``max`` otherwise."""
    modes = [r.headline_mode for r in runs if r.headline == metric and r.headline_mode]
    if modes:
        return modes[0]
    words = set(re.split(r"[_\-.]", metric.lower()))
    return "min" if words & LOWER_IS_BETTER and "no" not in words else "max"


def build_summary(
    runs: Sequence[RunRecord],
    metric: str | None = None,
    by: Sequence[str] | None = None,
    mode: str | None = None,
) -> Summary:
    """Group ``runs`` by ``by`` (default: the keys that vary, seed aside) and summarise
    ``metric`` (default: the runs' headline metric); ``mode`` is which way it is better,
    ``"max"`` or ``"min"`` (default: `better_way`)."""
    runs = list(runs)
    if not runs:
        raise SummaryError("summary: no runs found (no results.json under the folders given)")
    heads = [r.headline for r in runs if r.headline]
    metric = metric or (heads[0] if heads else None)
    known = sorted({k for r in runs for k in r.metrics})
    if metric is None or (metric not in known and any(r.status in COUNTED for r in runs)):
        raise SummaryError(
            f"summary: --metric {metric!r} is not a final metric of these runs; choose one of "
            f"{', '.join(known) or '(none: no run finished)'}"
        )
    if mode not in (None, "max", "min"):
        raise SummaryError(f"summary: --mode {mode!r} must be max or min (which way is better)")
    mode = mode or better_way(metric, runs)
    by = list(by) if by is not None else varying_keys(runs)
    unknown = [k for k in by if not any(k in r.overrides or k in r.config for r in runs)]
    if unknown:
        raise SummaryError(
            f"summary: --by {unknown[0]!r} is not a setting of these runs; give a config key "
            f"such as {', '.join(varying_keys(runs)[:3]) or 'arena.epochs'}"
        )
    grouped: dict[tuple, list[RunRecord]] = {}
    for r in runs:
        key = tuple(r.setting(k) for k in by)
        grouped.setdefault(tuple(repr(v) for v in key), []).append(r)
    groups = []
    for members in grouped.values():
        key = tuple(members[0].setting(k) for k in by)
        values = [r.value(metric) for r in members if r.status in COUNTED]
        groups.append(Group(key, members, group_stats([v for v in values if v is not None])))
    groups.sort(key=lambda g: _sort_key(g.key))
    sign = 1 if mode == "max" else -1
    scored = [g for g in groups if g.stats.mean is not None]
    if len(scored) > 1:
        max(scored, key=lambda g: sign * g.stats.mean).best = True
    candidates = [r for r in runs if r.status in COUNTED and r.value(metric) is not None]
    best_run = max(candidates, key=lambda r: sign * r.value(metric)) if candidates else None
    return Summary(metric, mode, by, runs, groups, best_run)
