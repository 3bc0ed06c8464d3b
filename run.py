"""PaddleCraft command line: python run.py arena=<name> [key=value ...] (Hydra).

Thin on purpose: tune the CPU (before Paddle loads), register the schemas, compose
(Hydra), validate, instantiate, run, and return the headline metric so Hydra sweepers can
optimise it. The work is in arenas.engine.app.run_from_config.
``python run.py export=<run dir> export.agent=<name>`` exports a trained agent instead
(arenas.engine.export; no config is composed).
"""

from __future__ import annotations

import sys

from encoders.cpu_tuning import apply_cpu_tuning

apply_cpu_tuning()  # first: before anything imports paddle

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from arenas import register_configs  # noqa: E402
from arenas.engine.app import main_entry  # noqa: E402

register_configs()


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Run the configured arena; return its headline metric."""
    hc = HydraConfig.get()
    return main_entry(cfg, run_dir=hc.runtime.output_dir, overrides=list(hc.overrides.task))


if __name__ == "__main__":
    from arenas.engine.export import is_export_command
    from arenas.engine.export import main as export_main

    if is_export_command(sys.argv[1:]):  # python run.py export=<run dir> export.agent=<name>
        sys.exit(export_main(sys.argv[1:]))
    main()
