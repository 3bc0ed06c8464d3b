"""Charts with matplotlib: line charts (rating, fine-tuning and loss curves), a run's
training curves, confusion matrices, ratings with intervals. One style for every chart a run writes.

Figures are built on `matplotlib.figure.Figure` with the Agg canvas, never through
``pyplot``: no display, no global figure registry, no backend switch in the user's process.
A chart is ``width x height`` pixels exactly (``size`` at `DPI`). Sample grids and
caption sheets are pictures, not charts, and stay OpenCV images.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # matplotlib is imported where a chart is drawn: every command imports
    from matplotlib.figure import Figure  # this module, few draw (a second per process)

#: pixels per inch of every chart (size is given in pixels)
DPI = 100
#: a point of a curve: (x, y)
Point = tuple[float, float]


def new_figure(size: tuple[int, int] = (900, 520)) -> Figure:
    """An empty ``width x height``-pixel figure on the Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG of exactly its pixel size; return the path."""
    path = Path(path)
    fig.savefig(path, dpi=DPI, format="png", facecolor="white")
    return path


def to_bgr(fig: Figure) -> np.ndarray:
    """``fig`` rendered as a uint8 BGR array ``[height, width, 3]`` (OpenCV's layout)."""
    canvas = fig.canvas
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    return np.ascontiguousarray(rgba[..., 2::-1])


def line_chart(
    series: Mapping[str, Sequence[Point]],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    hlines: Mapping[str, float] | None = None,
    muted: Sequence[str] = (),
    muted_label: str = "",
    ylim: tuple[float, float] | None = None,
    size: tuple[int, int] = (900, 520),
) -> Figure:
    """One line per series (``{label: [(x, y), ...]}``) with markers and a legend.

    ``hlines`` draws dashed reference lines (``{"target 0.85": 0.85}``); series named in
    ``muted`` are thin grey lines drawn first (e.g. a league's past snapshots) and share one
    legend entry, ``muted_label``.
    """
    fig = new_figure(size)
    ax = fig.add_subplot()
    for name in muted:
        pts = series.get(name) or []
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, color="0.78", linewidth=1, marker="o", markersize=2, zorder=1)
    if muted and muted_label and any(series.get(n) for n in muted):
        ax.plot([], [], color="0.78", linewidth=1, label=muted_label)
    for name, pts in series.items():
        if name in muted or not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(xs, ys, linewidth=2, marker="o", markersize=3, label=name, zorder=2)
    for label, y in (hlines or {}).items():
        ax.axhline(y, color="0.4", linestyle="--", linewidth=1)
        ax.annotate(label, (1, y), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                    fontsize=9, color="0.3")  # fmt: skip
    if all(float(x).is_integer() for pts in series.values() for x, _ in pts):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps, updates
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    if not any(series.values()):
        ax.text(0.5, 0.5, "no data yet", transform=ax.transAxes, ha="center", va="center")
    return fig


def rating_history_chart(
    history: Sequence[Mapping[str, Any]],
    snapshot: Callable[[str], bool] = lambda name: name.startswith("snap_"),
) -> Figure:
    """Each player's rating (openskill mu) at every evaluation (``{"step", "mu": {name: mu}}``,
    `paddlecraft.arenas.engine.league.LeagueTable.history`).

    The learners and fixed opponents are coloured lines; the players ``snapshot`` names
    (past snapshots, by default self-play's ``snap_*``) are thin grey lines under them,
    with one legend entry.
    """
    names: list[str] = []
    for e in history:
        names += [k for k in e["mu"] if k not in names]
    series = {n: [(e["step"], e["mu"][n]) for e in history if n in e["mu"]] for n in names}
    return line_chart(
        series,
        title="league ratings (openskill mu)",
        xlabel="update",
        ylabel="mu",
        muted=[n for n in names if snapshot(n)],
        muted_label="snapshots",
    )


def confusion_chart(
    cm: np.ndarray, labels: Sequence[str] | None = None, title: str = "confusion matrix"
) -> Figure:
    """Rows: true class, columns: predicted; cells shaded by the row's share, with counts."""
    cm = np.asarray(cm)
    k = len(cm)
    norm = cm / np.maximum(cm.sum(1, keepdims=True), 1)  # [k, k] share of each true class
    side = int(min(1400, max(420, 45 * k + 160)))
    fig = new_figure((side + 80, side))
    ax = fig.add_subplot()
    im = ax.imshow(norm, cmap="Blues", vmin=0.0, vmax=1.0)
    names = list(labels) if labels is not None else [str(i) for i in range(k)]
    ax.set_xticks(range(k), names, rotation=90 if k > 12 else 0)
    ax.set_yticks(range(k), names)
    ax.set(title=title, xlabel="predicted", ylabel="true")
    if k <= 30:  # counts stay readable up to ~30 classes
        for i in range(k):
            for j in range(k):
                ink = "white" if norm[i, j] > 0.5 else "black"
                ax.text(j, i, str(int(cm[i, j])), ha="center", va="center", color=ink,
                        fontsize=8 if k > 12 else 10)  # fmt: skip
    fig.colorbar(im, ax=ax, shrink=0.8, label="share of the true class")
    return fig


def heatmap_chart(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    vmin: float = 0.0,
    vmax: float = 1.0,
) -> Figure:
    """A matrix of values in [vmin, vmax] shaded cell by cell, each value written in its cell."""
    m = np.asarray(matrix, np.float64)  # [rows, cols]
    r, c = m.shape
    fig = new_figure((int(min(1400, 160 + 80 * c)), int(min(1400, 140 + 70 * r))))
    ax = fig.add_subplot()
    im = ax.imshow(m, cmap="Blues", vmin=vmin, vmax=vmax)
    ax.set_xticks(range(c), list(col_labels))
    ax.set_yticks(range(r), list(row_labels))
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    mid = (vmin + vmax) / 2
    for i in range(r):
        for j in range(c):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center",
                    color="white" if m[i, j] > mid else "black")  # fmt: skip
    fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def interval_chart(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str = "",
    xlabel: str = "",
    reference: float | None = None,
    size_x: int = 900,
) -> Figure:
    """One row per entry (``label``, ``value``, ``lo``, ``hi``): a dot with its interval."""
    fig = new_figure((size_x, 110 + 30 * max(1, len(rows))))
    ax = fig.add_subplot()
    ys = np.arange(len(rows))[::-1]  # the first row on top
    for y, r in zip(ys, rows):
        ax.plot([r["lo"], r["hi"]], [y, y], color="tab:blue", linewidth=2)
        ax.plot([r["value"]], [y], "o", color="tab:red", markersize=6)
    if reference is not None:
        ax.axvline(reference, color="0.6", linewidth=1, linestyle="--")
    ax.set_yticks(ys, [str(r["label"])[:30] for r in rows])
    ax.set(title=title, xlabel=xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def curves_chart(records: Sequence[Mapping[str, Any]], headline: str) -> Figure:
    """A run's curves from its ``metrics.jsonl`` records: the training losses (every key of a
    ``train`` record with ``loss`` in its name) beside the headline metric at each evaluation."""
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval" and headline in r]
    fig = new_figure((1100, 420))
    left, right = fig.subplots(1, 2)
    keys = sorted({k for r in train for k in r if "loss" in k and _number(r[k])})
    for k in keys:
        pts = [(r["step"], r[k]) for r in train if _number(r.get(k))]
        left.plot(*zip(*pts), linewidth=1.5, label=k)
    left.set(title="training losses", xlabel="step")
    if keys:
        left.legend(fontsize=8)
    pts = [(r["step"], r[headline]) for r in evals if _number(r[headline])]
    if pts:
        right.plot(*zip(*pts), marker="o", markersize=4, linewidth=2, color="tab:green")
    right.set(title=f"evaluation: {headline}", xlabel="step")
    for ax, empty in ((left, not keys), (right, not pts)):
        ax.grid(True, alpha=0.3)
        if empty:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center")
    return fig


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
