"""Populations of speakers and listeners: growing them, cross-play, teaching a newcomer.

Ease of teaching (Li & Bowling 2019): after training, a listener built from scratch learns
from the frozen speakers; the steps it needs to reach 90% of the trained pairs' accuracy are
compared with the steps the first generation (speakers and listeners learning together)
needed to reach the same accuracy. Both are read on a moving average of the batch accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import paddle

from paddlecraft.agents import Agent
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine.rng import capture_rng, restore_rng

__all__ = ["Game", "crossplay_metrics", "grow", "steps_to_reach", "teach_newcomer"]

WINDOW = 20  #: steps in the moving average of batch accuracy
TARGET_SHARE = 0.9  #: the newcomer's goal, as a share of the trained pairs' accuracy
NEWCOMER_STREAM = 0x4E3  #: random-stream id of the newcomer's batches: ``[seed, id, step]``


class Game(Protocol):
    """What teaching a newcomer needs of a referential game: draw a batch, play one pair."""

    def draw(self, rng: np.random.Generator) -> dict[str, Any]:
        """One training batch (``pair``: (speaker, listener) indices, targets...)."""

    def play(
        self, speaker: Agent, listener: Agent, batch: dict[str, Any], speaker_learns: bool = True
    ) -> tuple[paddle.Tensor, paddle.Tensor, dict[str, paddle.Tensor]]:
        """(joint loss, per-target accuracy [B], messages) of one pair on ``batch``."""


def grow(first: Agent, size: int, given: Mapping[str, Agent] | None = None) -> list[Agent]:
    """``first`` plus ``size - 1`` agents ``<name>_1``...: the one configured under that name
    in ``given`` (another encoder family, a frozen loaded tower: a mixed population), else one
    built like ``first`` (same settings, own weights: the seed mixes in the name; own
    optimizer)."""
    out = [first]
    for i in range(1, size):
        name = f"{first.name}_{i}"
        if given is not None and name in given:
            if type(given[name]) is not type(first):
                raise ConfigError(
                    f"agents.{name} is a {type(given[name]).__name__} but agents.{first.name} "
                    f"a {type(first).__name__}: a population's members are of one kind"
                )
            out.append(given[name])
        else:
            out.append(type(first)(name, **first.config))
    return out


def crossplay_metrics(acc: np.ndarray) -> dict[str, float]:
    """Flat metrics of an N x M cross-play accuracy matrix (row: speaker, column: listener):
    ``crossplay_<i>_<j>``, the diagonal and off-diagonal means, and ``crossplay_gap``, the
    largest distance of an off-diagonal pair from the diagonal mean (empty for 1 x 1)."""
    n, m = acc.shape
    if n * m == 1:
        return {}
    out = {f"crossplay_{i}_{j}": float(acc[i, j]) for i in range(n) for j in range(m)}
    diag = np.array([acc[i, i] for i in range(min(n, m))])
    off = np.array([acc[i, j] for i in range(n) for j in range(m) if i != j])
    out["crossplay_diagonal"] = float(diag.mean())
    if off.size:
        out["crossplay_off_diagonal"] = float(off.mean())
        out["crossplay_gap"] = float(np.abs(off - diag.mean()).max())
    return out


def steps_to_reach(history: list[float], goal: float, window: int = WINDOW) -> int | None:
    """First step (1-based) at which the moving average of ``history`` reaches ``goal``."""
    h = np.asarray(history, np.float64)
    if h.size < window:
        return None
    avg = np.convolve(h, np.ones(window) / window, mode="valid")  # avg[k]: steps k..k+w-1
    hit = np.nonzero(avg >= goal)[0]
    return int(hit[0] + window) if hit.size else None


def teach_newcomer(
    game: Game,
    template: Agent,
    speakers: Sequence[Agent],
    history: Sequence[float],
    steps: int,
    seed: int,
) -> tuple[dict[str, float], list[float]]:
    """Train a fresh listener built like ``template`` for ``steps`` steps against the frozen
    ``speakers``; compare with the first generation's batch accuracy ``history``.

    Returns (results, the newcomer's batch accuracy per step)."""
    saved = capture_rng()
    newcomer = type(template)(f"{template.name}_newcomer", **template.config)
    trained = float(np.mean(history[-WINDOW:]))
    goal = TARGET_SHARE * trained
    curve = []
    try:
        for s in range(steps):
            batch = game.draw(np.random.default_rng([seed, NEWCOMER_STREAM, s]))
            speaker = speakers[batch["pair"][0]]
            newcomer.train()
            loss, acc, _ = game.play(speaker, newcomer, batch, speaker_learns=False)
            newcomer.update(loss)
            curve.append(float(acc.mean()))
    finally:
        restore_rng(saved)
    first = steps_to_reach(list(history), goal)
    new = steps_to_reach(curve, goal)
    out = {
        "newcomer_goal_accuracy": goal,
        "newcomer_final_accuracy": float(np.mean(curve[-WINDOW:])) if curve else 0.0,
        # not reached: -1 (JSON-friendly), the budget was too small to tell
        "newcomer_steps_to_goal": float(new if new is not None else -1),
        "first_generation_steps_to_goal": float(first if first is not None else -1),
    }
    if new and first:
        out["ease_of_teaching"] = float(first / new)  # > 1: easier than inventing it
    return out, curve
