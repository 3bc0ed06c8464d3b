"""Config interpolations of the data configs: ``${craft.mul:...}`` (pure arithmetic), and
``${craft.required:<setting>,<what it is>}``, a preset's required setting: resolving it (the
setting was not given) fails naming the setting.

Composing a config reads no data: what only the files can tell (class counts, the caption
words, the speech alphabet) comes from the dataset the run builds, through
``${craft.from_data:...}`` (`paddlecraft.arenas.engine.from_data`).
"""

from __future__ import annotations

import math

from omegaconf import OmegaConf

from paddlecraft.errors import ConfigError

__all__ = ["register_resolvers", "required"]


def required(setting: str, what: str = "a value") -> None:
    """Refuse a required setting that was not given (``${craft.required:setting,what}``)."""
    raise ConfigError(f"{setting} is required: give {what}, e.g. {setting}=/path")


def register_resolvers() -> None:
    """Register the ``craft.*`` data resolvers with OmegaConf (idempotent)."""
    OmegaConf.register_new_resolver(
        "craft.mul", lambda *xs: math.prod(int(x) for x in xs), replace=True
    )
    OmegaConf.register_new_resolver("craft.required", required, replace=True)
