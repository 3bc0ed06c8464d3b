"""Config interpolations that read the data: ``${craft.num_classes:${.path}}``, ``${craft.mul:...}``.

They let ``conf/data/image_folder.yaml`` size the encoder from the folder itself, so
``python run.py arena=classify data=image_folder data.path=...`` needs nothing else.
"""

from __future__ import annotations

import math

from omegaconf import OmegaConf

from craftdata.badfiles import BadDataError
from craftdata.image_folder import class_names

__all__ = ["register_resolvers"]


def _num_classes(path: str | None) -> int:
    if path is None:
        raise BadDataError(
            "data.path is not set: python run.py ... data=image_folder data.path=/your/images"
        )
    return len(class_names(path))


def register_resolvers() -> None:
    """Register the ``craft.*`` resolvers with OmegaConf (idempotent)."""
    OmegaConf.register_new_resolver("craft.num_classes", _num_classes, replace=True)
    OmegaConf.register_new_resolver(
        "craft.mul", lambda *xs: math.prod(int(x) for x in xs), replace=True
    )
