"""Referential games: agents invent a language (speaker -> discrete message -> listener).

Worlds of attribute-value objects (with held-out combinations), shapes and digits images or
your own images; Gumbel-softmax (straight-through) or REINFORCE channels; populations with a
cross-play matrix and a newcomer listener; language analysis (entropy, topographic
similarity, positional and bag-of-symbols disentanglement). See docs/guide/referential.md.
"""

from paddlecraft.agents.channel import (
    RunningBaseline,
    categorical_sample,
    gumbel_softmax_st,
    temperature_at,
)
from paddlecraft.agents.referential import Receiver, Sender

from .arena import ReferentialArena, ReferentialConfig
from .metrics import analyse, bosdis, message_entropy, posdis, topsim
from .worlds import World, attribute_world, egg_world, load_digit_objects, load_shape_objects

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"referential": ReferentialArena},
    "schema/agent": {"sender": Sender, "receiver": Receiver},
}

__all__ = [
    "SCHEMAS",
    "Receiver",
    "ReferentialArena",
    "ReferentialConfig",
    "RunningBaseline",
    "Sender",
    "World",
    "analyse",
    "attribute_world",
    "bosdis",
    "categorical_sample",
    "egg_world",
    "gumbel_softmax_st",
    "load_digit_objects",
    "load_shape_objects",
    "message_entropy",
    "posdis",
    "temperature_at",
    "topsim",
]
