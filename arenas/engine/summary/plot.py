"""``summary.png``: the summarised metric against the swept values, with the intervals.

x is the first grouping key (numbers on a log axis when they span a factor of 10 or more,
anything else as categories); one line per value of the other keys. Each group is drawn at
its mean with its 95 % bootstrap interval as an error bar; each run is a small dot beside it,
so two seeds that disagree are seen as two seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from ..plots import new_figure

#: the plot's file name, beside summary.csv
PLOT = "summary.png"


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def summary_chart(
    groups: Sequence[Any],
    by: Sequence[str],
    metric: str,
    mode: str,
    size: tuple[int, int] = (900, 520),
) -> Figure | None:
    """The chart of seed ``groups`` (keyed by the settings ``by``) on ``metric`` (``mode``:
    max or min is better); None when no group has a value to draw."""
    groups = [g for g in groups if g.stats.mean is not None]
    if not groups:
        return None
    fig = new_figure(size)
    ax = fig.add_subplot(1, 1, 1)
    xkey = by[0] if by else None
    xs = [g.key[0] for g in groups] if xkey else ["all runs"] * len(groups)
    numeric = xkey is not None and _numeric(xs)
    cats = list(dict.fromkeys(str(x) for x in xs))
    if numeric and min(xs) > 0 and max(xs) / min(xs) >= 10:
        ax.set_xscale("log")
    series: dict[str, list[Any]] = {}
    for g in groups:
        label = " ".join(f"{k}={v}" for k, v in zip(by[1:], g.key[1:], strict=True))
        series.setdefault(label, []).append(g)
    width = (0.03 if numeric else 0.12) * max(len(series) - 1, 1)
    for i, (label, members) in enumerate(series.items()):
        shift = (i - (len(series) - 1) / 2) * width / max(len(series) - 1, 1)
        pos = [_pos(g.key[0] if xkey else "all runs", numeric, cats, shift) for g in members]
        means = [g.stats.mean for g in members]
        low = [m - (g.stats.ci_low if g.stats.ci_low is not None else m)
               for m, g in zip(means, members, strict=True)]  # fmt: skip
        high = [(g.stats.ci_high if g.stats.ci_high is not None else m) - m
                for m, g in zip(means, members, strict=True)]  # fmt: skip
        line = ax.errorbar(pos, means, yerr=[low, high], marker="o", capsize=4,
                           label=label or None, linestyle="-" if numeric else "none")  # fmt: skip
        for p, g in zip(pos, members, strict=True):
            ys = [r.value(metric) for r in g.runs]
            ys = [y for y in ys if y is not None]
            ax.scatter([p] * len(ys), ys, s=12, alpha=0.5, color=line[0].get_color())
    if not numeric:
        ax.set_xticks(range(len(cats)), cats)
    better = "higher" if mode == "max" else "lower"
    ax.set_xlabel(xkey or "")
    ax.set_ylabel(f"{metric} ({better} is better)")
    n = max(g.stats.n for g in groups)
    ax.set_title(f"{metric}: mean of up to {n} seeds, 95% bootstrap CI; dots: runs")
    if any(series):
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _pos(x: Any, numeric: bool, cats: list[str], shift: float) -> float:
    if numeric:
        return float(x) * (1 + shift) if x else shift
    return cats.index(str(x)) + shift
