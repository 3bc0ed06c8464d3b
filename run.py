"""PaddleCraft command line: python run.py arena=<name> [key=value ...] (Hydra).

Thin on purpose: tune the CPU (before Paddle loads), register the schemas, compose
(Hydra), validate, instantiate, run, and return the headline metric so Hydra sweepers can
optimise it. The work is in arenas.engine.app.run_from_config.
"""

from __future__ import annotations

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
    main()
