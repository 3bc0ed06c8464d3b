"""Hyper-parameter search support: the direction a sweeper optimises, read from the arena.

Sweep files for Hydra's Optuna sweeper (``conf/sweep/*_optuna.yaml``) set
``hydra.sweeper.direction: ${headline_direction:${arena._target_},${allow_targets}}``; this resolver
imports the arena class (through the same allow-list as run configs) and answers
``maximize`` or ``minimize`` from its `headline_mode`, so a GAN's FID
is minimised and a classifier's accuracy maximised without restating it per sweep.
"""

from __future__ import annotations

from collections.abc import Iterable

from hydra.utils import get_object
from omegaconf import OmegaConf

from paddlecraft.agents.instantiate import check_targets

DIRECTIONS = {"max": "maximize", "min": "minimize"}


def headline_direction(arena_target: str, allow: Iterable[str] = ()) -> str:
    """``maximize``/``minimize`` for the arena class named by ``arena_target``."""
    check_targets({"_target_": arena_target}, allow=list(allow or ()))
    arena = get_object(arena_target)
    mode = getattr(arena, "headline_mode", None)
    if mode not in DIRECTIONS:
        raise ValueError(
            f"{arena_target}.headline_mode must be 'max' or 'min', got {mode!r}; set it on the "
            "arena class so sweepers know which way to optimise"
        )
    return DIRECTIONS[mode]


def register_resolvers() -> None:
    """Register ``${headline_direction:<arena target>}`` with OmegaConf (idempotent)."""
    if not OmegaConf.has_resolver("headline_direction"):
        OmegaConf.register_new_resolver("headline_direction", headline_direction)
