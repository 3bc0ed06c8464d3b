"""A sweep's points checked before its first job: a mistake in any of them refuses the
whole sweep, with one line, before a job starts or the sweep folder is made.

Hydra's basic sweeper composes every point before launching (a key or type mistake stops
it there), but the run's own validation (value ranges, settings, devices, targets:
`paddlecraft.arenas.engine.validate.validate`) runs in each job. With the default joblib
launcher the jobs start together, so one refused point used to stop the sweep while the
others were writing their checkpoints. `SweepPrecheck` (a Hydra callback, registered in
``conf/config.yaml``) runs that validation for every point of a basic sweep first. A size
that only fails when the agents are built is still found in its job.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback as HydraCallback
from omegaconf import DictConfig, open_dict, read_write

#: the sweeper whose points are the cartesian product of the command line's lists
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def sweep_points(config: DictConfig) -> list[list[str]]:
    """The overrides of each job a basic sweep of ``config`` runs (its ``params`` and the
    command line's), in Hydra's order; [] for another sweeper (Optuna picks its own)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # Hydra <1.4 (pinned)
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if str(config.hydra.sweeper.get("_target_")) != BASIC_SWEEPER:
        return []
    params = config.hydra.sweeper.get("params") or {}
    arguments = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    overrides = OverridesParser.create().parse_overrides(arguments)
    return [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


class SweepPrecheck(HydraCallback):
    """``-m``: every point of a basic sweep composed and validated before the first job."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra.core.global_hydra import GlobalHydra

        from paddlecraft.arenas.engine.app import USAGE, USER_ERRORS, user_error
        from paddlecraft.arenas.engine.validate import validate

        loader = GlobalHydra.instance().config_loader()
        for job in sweep_points(config):
            try:
                cfg = loader.load_sweep_config(master_config=config, sweep_overrides=job)
                with read_write(cfg), open_dict(cfg):
                    del cfg["hydra"]  # what the job's function gets (as Hydra's run_job does)
                validate(cfg)
            except Exception as e:  # noqa: BLE001 (Hydra's own mistakes: its sweeper says them)
                cause = user_error(e)
                if cause is None or not isinstance(cause, USER_ERRORS):
                    return
                sys.stderr.write(f"error: {' '.join(str(cause).split())}\n")
                raise SystemExit(USAGE) from None
