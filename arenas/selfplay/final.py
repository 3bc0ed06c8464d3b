"""Which policy a self-play run ends with: the last one, the best-evaluated one
(``arena.eval.keep_best``) or the mean of its last epochs' weights (``arena.eval.average_last``).

Weight averaging is stochastic weight averaging over epoch ends (Izmailov et al. 2018;
KataGo publishes such averaged networks): training is unchanged, the final evaluation
plays the average and the run saves it. The idea: between epochs the weights wander
around a region the decaying learning rate narrows, and their mean may sit nearer its
centre than any one of them. On Connect Four it moved the solver's judgement by no more
than its noise (docs/guide/selfplay-scale-and-solver.md, "Weight averaging").
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.agents.settings import ConfigError

from .league import Snapshot, snapshot_from_state, snapshot_state, weights_of

log = logging.getLogger("paddlecraft")

#: the final evaluation's metrics also reported for the last policy (``last_<key>``)
COMPARED = (
    "perfect_move_rate",
    "good_move_rate",
    "search_perfect_move_rate",
    "search_good_move_rate",
)


class EpochAverage:
    """The weights at the ends of the last ``epochs`` epochs, and their mean.

    Args:
        epochs: how many epoch ends the mean covers (>= 1).
    """

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs
        self.kept: list[Snapshot] = []  # oldest first, at most ``epochs``

    def record(self, policy: Any, update: int) -> None:
        """Keep a copy of ``policy``'s weights at this epoch end (``update``); drop the
        oldest beyond ``epochs``. Recording the same update twice keeps one copy."""
        if self.kept and self.kept[-1].step == update:
            self.kept.pop()
        self.kept.append(Snapshot(f"epoch_end_{update}", update, weights_of(policy)))
        del self.kept[: -self.epochs]

    def average(self) -> Snapshot:
        """The mean of the kept weights, key by key (floating-point arrays; any other,
        such as a counter, is the newest one's). A normalisation layer's running
        statistics are averaged too: exact for the MLPs of the board games, which have
        none, an approximation for a trunk with batch norm."""
        if not self.kept:
            raise RuntimeError("EpochAverage.average: no epoch end recorded yet")
        newest = self.kept[-1].weights
        mean: dict[str, np.ndarray] = {}
        for key, last in newest.items():
            if np.issubdtype(last.dtype, np.floating):
                stack = np.stack([s.weights[key].astype(np.float64) for s in self.kept])
                mean[key] = stack.mean(axis=0).astype(last.dtype)  # [K, *shape] -> shape
            else:
                mean[key] = last.copy()
        steps = [s.step for s in self.kept]
        return Snapshot(f"average_{steps[0]}_{steps[-1]}", steps[-1], mean)

    def state(self) -> dict:
        """Arena state: the kept snapshots (their arrays go to ``arena.safetensors``)."""
        return {"epochs": self.epochs, "kept": [snapshot_state(s) for s in self.kept]}

    def load_state(self, state: dict | None) -> None:
        """Restore `state`; a checkpoint from before averaging (``None``) keeps nothing, so
        a resumed run averages the epoch ends it sees from there on."""
        self.kept = [snapshot_from_state(s) for s in (state or {}).get("kept", [])]
        del self.kept[: -self.epochs]


def ending_metrics(
    out: dict[str, float],
    last: dict[str, float],
    chosen: Snapshot,
    keep_best: str | None,
    best_value: float,
    headline: str,
    averaged: int,
) -> dict[str, float]:
    """The final evaluation's metrics ``out`` of the policy a run ends with (``chosen``:
    the best one under ``keep_best``, else the mean of ``averaged`` epoch ends), with the
    last policy's figures from its per-epoch evaluation ``last`` as ``last_<metric>``
    (the ``keep_best`` metric; or the headline and the solver's rates)."""
    compared = [keep_best] if keep_best else [headline, *COMPARED]
    for key in compared:
        if key in last:
            out[f"last_{key}"] = float(last[key])
    if keep_best:
        out["selected_update"] = float(chosen.step)
        out[f"selected_{keep_best}"] = best_value
        what = f"the best one, of update {chosen.step} ({keep_best}={best_value:.3f})"
    else:
        out["averaged_epochs"] = float(averaged)
        what = f"the mean of the weights at the last {averaged} epoch ends ({chosen.name})"
    key = keep_best or headline
    log.info(
        "final policy: %s; the last one had %s=%.3f", what, key, out.get(f"last_{key}", math.nan)
    )
    return out


def average_of_run(run_dir: str | Path, epochs: int) -> Snapshot:
    """The mean of a finished run's weights at its last ``epochs`` epoch ends, rebuilt from
    the opponent pool of its newest good checkpoint: what ``arena.eval.average_last=epochs``
    would have ended it with (training is the same either way). Needs a pool snapshot at
    each of those epoch ends (``league.snapshot_every`` dividing ``steps_per_epoch``, a
    pool that still holds them), as the Connect Four default takes; raises `ConfigError`
    (a ``ValueError``) naming what is missing otherwise."""
    from omegaconf import OmegaConf

    from ..engine.checkpoint import arena_state_of, latest_good_checkpoint

    run = Path(run_dir)
    if epochs < 1:
        raise ValueError(f"average_of_run: epochs must be >= 1, got {epochs}")
    found = latest_good_checkpoint(run)
    if found is None or not (run / "config.yaml").is_file():
        raise ValueError(f"{run} holds no finished self-play run (config.yaml and a checkpoint)")
    path, state = found
    arena = arena_state_of(path, state)
    per_epoch = int(OmegaConf.load(run / "config.yaml").arena.steps_per_epoch)
    last = int(arena["updates"])
    want = [last - per_epoch * i for i in range(epochs - 1, -1, -1)]
    snaps = {int(s["step"]): s for s in arena["pool"]["snapshots"]}
    if want[0] <= 0:
        raise ConfigError(f"{run}: it has {last // per_epoch} epochs; average at most that many")
    missing = [u for u in want if u not in snaps]
    if missing:
        raise ConfigError(
            f"{path}: the pool holds no snapshot of updates {missing} (epoch ends; it holds "
            f"{sorted(snaps)}): average fewer epochs, or train with arena.league.snapshot_every "
            "dividing arena.steps_per_epoch"
        )
    average = EpochAverage(epochs)
    average.kept = [snapshot_from_state(snaps[u]) for u in want]
    return average.average()
