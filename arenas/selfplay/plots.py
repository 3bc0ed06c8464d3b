"""Pictures of a self-play league: each player's rating over training (a matplotlib chart,
`paddlecraft.arenas.engine.plots.rating_history_chart`, shared with marl's team league)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.plots import rating_history_chart, save, to_bgr

__all__ = ["rating_history_chart", "render_rating_history", "save"]


def render_rating_history(history: list[dict[str, Any]]) -> np.ndarray:
    """`rating_history_chart` as a BGR picture."""
    return to_bgr(rating_history_chart(history))
