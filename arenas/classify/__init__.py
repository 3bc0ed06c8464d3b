"""Classification: one agent learns labels from a dataset (the seed's case 1 as an arena)."""

from paddlecraft.agents import Classifier

from .arena import ClassifyArena, ClassifyConfig
from .plot import render_confusion

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"classify": ClassifyArena},
    "schema/agent": {"classifier": Classifier},
}

__all__ = ["SCHEMAS", "ClassifyArena", "ClassifyConfig", "render_confusion"]
