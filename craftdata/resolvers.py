"""Config interpolations of the data configs: ``${craft.mul:...}`` (pure arithmetic).

Composing a config reads no data: what only the files can tell (class counts, the caption
words, the speech alphabet) comes from the dataset the run builds, through
``${craft.from_data:...}`` (`paddlecraft.arenas.engine.from_data`).
"""

from __future__ import annotations

import math

from omegaconf import OmegaConf

__all__ = ["register_resolvers"]


def register_resolvers() -> None:
    """Register the ``craft.*`` data resolvers with OmegaConf (idempotent)."""
    OmegaConf.register_new_resolver(
        "craft.mul", lambda *xs: math.prod(int(x) for x in xs), replace=True
    )
