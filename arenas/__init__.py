"""Arenas: link agents (chains) or pit them against each other, on the arena engine.

``paddlecraft.arenas.engine`` is the engine (it knows no arena); each family is a package of its own
(``classify``, ``gan``, ``caption``, ``selfplay``, ``referential``, ``marl``) that registers its Hydra schemas the
same way a user's arena package does. `register_configs` registers the built-in ones.
"""

from types import ModuleType

import paddlecraft._needs_paddle  # noqa: F401  (no Paddle: one line naming both installs)
from paddlecraft.craftdata.resolvers import register_resolvers as register_data_resolvers
from paddlecraft.encoders import SCHEMAS as ENCODER_SCHEMAS

from . import caption, classify, contrastive, gan, marl, referential, selfplay
from .caption import CaptionArena
from .classify import ClassifyArena
from .contrastive import ContrastiveArena
from .engine import (
    Arena,
    ArenaCheckError,
    ArenaConfig,
    Callback,
    ConfigError,
    Loop,
    Runner,
    check_arena,
    register_schemas,
    run_arena,
    run_from_config,
    standard_callbacks,
)
from .engine.from_data import register_resolver as register_from_data
from .engine.sweeps import register_resolvers as register_sweep_resolvers
from .gan import GanArena
from .marl import MarlArena
from .referential import ReferentialArena
from .selfplay import SelfPlayArena, search_player

#: the built-in arena families, each a module with a ``SCHEMAS`` dict
FAMILIES: tuple[ModuleType, ...] = (
    classify,
    gan,
    caption,
    selfplay,
    referential,
    contrastive,
    marl,
)


def register_configs() -> None:
    """Register the run schema, the toolkit's encoders and every built-in family with Hydra.

    ``run.py`` calls it before composing; a user's arena package calls
    `paddlecraft.arenas.engine.register_schemas` with its own ``SCHEMAS`` instead (or as well).
    """
    register_data_resolvers()  # ${craft.mul:...}
    register_from_data()  # ${craft.from_data:num_classes}: filled from the built dataset
    register_sweep_resolvers()  # ${headline_direction:...} in Optuna sweep files
    register_schemas(ENCODER_SCHEMAS)
    for family in FAMILIES:
        register_schemas(family.SCHEMAS)


__all__ = [
    "Arena",
    "ArenaCheckError",
    "ArenaConfig",
    "Callback",
    "CaptionArena",
    "ClassifyArena",
    "ContrastiveArena",
    "ConfigError",
    "FAMILIES",
    "GanArena",
    "ReferentialArena",
    "Loop",
    "MarlArena",
    "Runner",
    "SelfPlayArena",
    "check_arena",
    "register_configs",
    "register_schemas",
    "run_arena",
    "run_from_config",
    "search_player",
    "standard_callbacks",
]
