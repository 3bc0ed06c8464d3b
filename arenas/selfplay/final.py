"""Which policy a self-play run ends with: the last one, or the best-evaluated one
(``arena.eval.keep_best``, as AlphaGo Zero gated its networks), and the metrics that say so.
"""

from __future__ import annotations

import logging
import math

from .league import Snapshot

log = logging.getLogger("paddlecraft")


def ending_metrics(
    out: dict[str, float],
    last: dict[str, float],
    chosen: Snapshot,
    keep_best: str,
    best_value: float,
) -> dict[str, float]:
    """The final evaluation's metrics ``out`` of the policy a run ends with (``chosen``, the
    best one on the per-epoch metric ``keep_best``, worth ``best_value``), with the last
    policy's ``keep_best`` from its per-epoch evaluation ``last`` as ``last_<keep_best>``
    and the update it was taken at as ``selected_update``."""
    if keep_best in last:
        out[f"last_{keep_best}"] = float(last[keep_best])
    out["selected_update"] = float(chosen.step)
    out[f"selected_{keep_best}"] = best_value
    log.info(
        "final policy: the best one, of update %d (%s=%.3f); the last one had %s=%.3f",
        chosen.step, keep_best, best_value, keep_best, out.get(f"last_{keep_best}", math.nan),
    )  # fmt: skip
    return out
