"""Pictures of a self-play league: each player's rating over training (a matplotlib chart)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..engine.plots import line_chart, save, to_bgr

__all__ = ["rating_history_chart", "render_rating_history", "save"]


def rating_history_chart(history: list[dict[str, Any]]) -> Figure:
    """Each player's rating (openskill mu) at every evaluation (``{"step", "mu": {name: mu}}``).

    The learner and the fixed opponents are coloured lines; past snapshots of the learner
    (``snap_*``) are thin grey lines under them, with one legend entry.
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
        muted=[n for n in names if n.startswith("snap_")],
        muted_label="snapshots",
    )


def render_rating_history(history: list[dict[str, Any]]) -> np.ndarray:
    """`rating_history_chart` as a BGR picture."""
    return to_bgr(rating_history_chart(history))
