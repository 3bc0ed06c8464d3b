"""PaddleCraft command line: python run.py arena=<name> [key=value ...] (Hydra).

Thin on purpose: compose (Hydra), validate, instantiate, run, and return the headline
metric so Hydra sweepers can optimise it. The work is in arenas.app.run_from_config.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from arenas.app import run_from_config
from arenas.schema import register_configs

register_configs()


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Run the configured arena; return its headline metric."""
    hc = HydraConfig.get()
    return run_from_config(cfg, run_dir=hc.runtime.output_dir, overrides=list(hc.overrides.task))


if __name__ == "__main__":
    main()
