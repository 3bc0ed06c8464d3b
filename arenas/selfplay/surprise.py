"""KataGo's policy surprise weighting (``arena.update.surprise_weight``).

A search target that says what the network already believed teaches it little; one that
overturns its prior is where the learning is. KataGo (g170 on, "Policy Surprise Weighting"
in its methods page) writes each self-play position into the training data a number of
times in proportion to how surprising its policy target was: within each game, a share
``1 - w`` of the total frequency is spread uniformly and ``w`` in proportion to the
KL divergence ``KL(pi || prior)`` from the network's root prior to the policy target
(KataGo's ``w`` is 0.5). Each position is then written ``floor(f)`` times and once more
with probability ``f - floor(f)``, so a game keeps its number of samples on average and the
replay window spans as many games as without it. The samples keep their full weight: the
surprising positions are seen more often, not rescaled (KataGo's choice, not importance
sampling).

The prior is the network's before any root noise (KataGo used the noised one, "an
arbitrary implementation choice"); with playout cap randomisation only the full searches
share out the frequency, as in KataGo.
"""

from __future__ import annotations

import numpy as np


def policy_surprise(pi: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """``KL(pi || prior)`` per row, ``float64 [N]`` (``pi``, ``prior``: ``[N, A]``; moves
    where ``pi`` is 0 add nothing, a prior of 0 counts as 1e-12)."""
    pi = np.asarray(pi, np.float64)
    prior = np.maximum(np.asarray(prior, np.float64), 1e-12)
    safe = np.where(pi > 0, pi, 1.0)
    return np.maximum(np.where(pi > 0, pi * (np.log(safe) - np.log(prior)), 0.0).sum(1), 0.0)


def surprise_frequency(
    records: list[dict[str, np.ndarray]], weight: float, keep: np.ndarray | None = None
) -> np.ndarray:
    """Each sample's frequency ``float64 [samples]`` (in `outcome_samples`' order): within
    its game, ``(1 - weight) + weight x`` its surprise over the game's mean surprise, so
    each game's frequencies average 1 (a game whose targets all match the prior: 1 each).
    Only the rows in ``keep`` (``bool [samples]``; None: all) share out their game's
    frequency; the others get 0. The records need the searches' root ``prior``."""
    if records and "prior" not in records[0]:
        raise ValueError(
            "surprise_frequency: the records hold no root 'prior' (a search_controller's "
            "records have one)"
        )
    pi = np.concatenate([r["pi"] for r in records])  # [N, A]
    prior = np.concatenate([r["prior"] for r in records])  # [N, A]
    game = np.concatenate([r["game"] for r in records]).astype(np.int64)  # [N]
    keep = np.ones(len(game), bool) if keep is None else np.asarray(keep, bool)
    kl = np.where(keep, policy_surprise(pi, prior), 0.0)  # [N]
    games = int(game.max()) + 1 if len(game) else 0
    count = np.bincount(game, keep.astype(np.float64), minlength=games)  # [games]
    mean = np.bincount(game, kl, minlength=games) / np.maximum(count, 1)  # [games]
    share = np.where(mean[game] > 0, kl / np.where(mean[game] > 0, mean[game], 1.0), 1.0)
    return np.where(keep, (1.0 - weight) + weight * share, 0.0)


def repeat_by_frequency(
    data: dict[str, np.ndarray], frequency: np.ndarray, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """``data`` (arrays with one row per sample) with each row written ``floor(f)`` times
    and once more with probability ``f - floor(f)`` (``f``: its ``frequency``), in the
    original order; one draw of ``rng`` per row."""
    f = np.asarray(frequency, np.float64)
    whole = np.floor(f)
    times = (whole + (rng.random(len(f)) < f - whole)).astype(np.int64)  # [N]
    return {k: np.repeat(np.asarray(v), times, axis=0) for k, v in data.items()}


def frequency_by_ply(
    records: list[dict[str, np.ndarray]], weight: float, edges: list[int]
) -> list[dict[str, float]]:
    """Where a collection's frequency goes: for each band of plies ``[edges[i],
    edges[i + 1])`` (the last open-ended), its ``samples``, their mean ``surprise`` and
    mean ``frequency`` under ``weight`` (1: as many as without weighting)."""
    ply = np.concatenate([r["ply"] for r in records])
    pi = np.concatenate([r["pi"] for r in records])
    kl = policy_surprise(pi, np.concatenate([r["prior"] for r in records]))
    f = surprise_frequency(records, weight)
    rows = []
    for lo, hi in zip(edges, [*edges[1:], None]):
        band = (ply >= lo) & (ply < (hi if hi is not None else np.inf))
        if band.any():
            rows.append({"plies": f"{lo}-{hi - 1}" if hi is not None else f"{lo}-",
                         "samples": int(band.sum()), "surprise": float(kl[band].mean()),
                         "frequency": float(f[band].mean())})  # fmt: skip
    return rows
