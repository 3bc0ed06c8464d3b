"""Statistics of one group of runs (the seeds of one setting): n, mean, std, IQM, 95 % CIs.

Following rliable (Agarwal et al., NeurIPS 2021), a group reports the interquartile mean
(IQM: the mean of the middle 50 %, ``scipy.stats.trim_mean(x, 0.25)``, rliable's
``aggregate_iqm``) beside the mean, and percentile bootstrap confidence intervals of both
(rliable's default method). rliable's stratified bootstrap resamples runs within each task;
a group here is one task, so that is scipy's plain bootstrap over the group's runs, which
`group_stats` uses (``scipy.stats.bootstrap``, seeded: the same runs give the same
interval). rliable itself is not a dependency: it ships as a source archive that pulls in
``arch``, ``absl-py`` and ``seaborn`` for what is here a few lines of scipy.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

#: coverage of every interval
CONFIDENCE = 0.95
#: bootstrap resamples per interval
RESAMPLES = 10_000
#: bootstrap method (rliable's default)
METHOD = "percentile"
#: seed of the bootstrap's generator: a summary is reproducible
BOOTSTRAP_SEED = 0
#: what the summary files say about the intervals
CI_NOTE = (
    f"{CONFIDENCE:.0%} percentile bootstrap over the group's runs "
    f"(scipy.stats.bootstrap, {RESAMPLES} resamples, seed {BOOTSTRAP_SEED})"
)


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: the mean after cutting 25 % from each end (rliable's IQM)."""
    from scipy import stats  # here, not at import: every command imports this module

    return float(stats.trim_mean(np.asarray(values, dtype=float), proportiontocut=0.25))


def _iqm_axis(x: np.ndarray, axis: int = -1) -> np.ndarray:
    from scipy import stats  # here, not at import: every command imports this module

    return stats.trim_mean(x, proportiontocut=0.25, axis=axis)


def bootstrap_ci(values: Sequence[float], statistic: str = "mean") -> tuple[float, float] | None:
    """The 95 % percentile bootstrap interval of the mean (or ``"iqm"``) of ``values``.

    None for fewer than two values (no spread to resample); ``(v, v)`` when all are equal.
    """
    from scipy import stats  # here, not at import: every command imports this module

    x = np.asarray(values, dtype=float)  # [n]
    if x.size < 2:
        return None
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    func = np.mean if statistic == "mean" else _iqm_axis
    with warnings.catch_warnings():  # few runs: scipy warns the distribution is coarse
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (x,),
            func,
            n_resamples=RESAMPLES,
            confidence_level=CONFIDENCE,
            method=METHOD,
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return low, high


@dataclass
class GroupStats:
    """Aggregate of one metric over a group's runs (None where undefined: n < 2 for std/CI)."""

    n: int
    mean: float | None
    std: float | None  #: sample standard deviation (ddof=1)
    iqm: float | None
    ci_low: float | None  #: 95 % bootstrap interval of the mean
    ci_high: float | None
    iqm_ci_low: float | None  #: 95 % bootstrap interval of the IQM
    iqm_ci_high: float | None
    min: float | None
    max: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def group_stats(values: Sequence[float]) -> GroupStats:
    """n, mean, std, IQM, both intervals, min and max of the finite ``values``."""
    x = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not x:
        return GroupStats(0, *([None] * 9))
    arr = np.asarray(x)  # [n]
    ci = bootstrap_ci(x, "mean") or (None, None)
    ci_iqm = bootstrap_ci(x, "iqm") or (None, None)
    return GroupStats(
        n=len(x),
        mean=float(arr.mean()),
        std=float(arr.std(ddof=1)) if len(x) > 1 else None,
        iqm=iqm(x),
        ci_low=ci[0],
        ci_high=ci[1],
        iqm_ci_low=ci_iqm[0],
        iqm_ci_high=ci_iqm[1],
        min=float(arr.min()),
        max=float(arr.max()),
    )
