"""GAN: a generator agent against a discriminator agent (``python run.py arena=gan``).

Modules: `.arena` (the step schedule, evaluation, files), `.losses` (D and G
losses side by side), `.metrics` (FID, PRDC, class histogram), `.featnet` (the
metrics' feature net and its cache), `.render` (sample grids), `.checks`
(set-up errors), `.data` (training batches and the metrics' real images). Data: any
loader of labelled images (``paddlecraft.craftdata.load_digits``, ``paddlecraft.craftdata.load_shapes_classes``...),
or an image folder read lazily (``paddlecraft.craftdata.load_image_folder``).
"""

from paddlecraft.agents import Discriminator, Generator
from paddlecraft.encoders import ImageDecoder

from .arena import GanArena, GanConfig
from .featnet import FeatureNet, FeatureNetCache, FeatureNetConfig, load_feature_net
from .losses import GanLoss
from .render import render_grid

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"gan": GanArena},
    "schema/agent": {"generator": Generator, "discriminator": Discriminator},
    "schema/decoder": {"image_decoder": ImageDecoder},
}

__all__ = [
    "SCHEMAS",
    "FeatureNet",
    "FeatureNetCache",
    "FeatureNetConfig",
    "GanArena",
    "GanConfig",
    "GanLoss",
    "load_feature_net",
    "render_grid",
]
