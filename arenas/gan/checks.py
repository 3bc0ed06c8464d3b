"""The GAN arena's set-up checks: one clear error naming the setting and the fix."""

from __future__ import annotations

from typing import Any

import numpy as np

from paddlecraft.agents.gan import Discriminator, Generator
from paddlecraft.agents.settings import ConfigError
from paddlecraft.errors import command
from paddlecraft.paddle_private import is_batch_norm

from .losses import GanLoss

__all__ = ["check_agents", "check_classes", "check_data"]


def check_agents(g: Any, d: Any, conditional: bool, loss: GanLoss) -> None:
    """Raise unless ``g``/``d`` are a Generator/Discriminator fit for this loss and conditioning."""
    if not isinstance(g, Generator) or not isinstance(d, Discriminator):
        raise ConfigError(
            "GanArena needs agents.generator: agents.Generator and agents.discriminator: "
            f"paddlecraft.agents.Discriminator, got {type(g).__name__} and {type(d).__name__}"
        )
    want = "conditional" if conditional else "unconditional"
    for agent, where in (
        (g, "agents.generator.encoder.num_classes"),
        (d, "agents.discriminator.num_classes"),
    ):
        if agent.conditional != conditional:
            raise ConfigError(
                f"arena.conditional={conditional} but {agent.name!r} is "
                f"{'conditional' if agent.conditional else 'unconditional'}: set {where} "
                f"{'to the class count' if conditional else 'to null'} for a {want} "
                f"GAN ({command()} arena=gan_conditional sets both)"
            )
    if loss is GanLoss.wgan_gp:
        bn = [n for n, sub in d.named_sublayers() if is_batch_norm(sub)]
        if bn:
            raise ConfigError(
                f"arena.loss=wgan_gp penalises each sample's gradient, which batch norm in "
                f"the discriminator mixes across the batch ({bn[0]}); use "
                "encoder@agents.discriminator.encoder=dcgan with "
                "agents.discriminator.encoder.norm=none (or instance)"
            )


def check_data(data: Any, image_shape: tuple[int, ...], lazy: bool, generator: Generator) -> None:
    """Raise unless the dataset holds float32 [N, C, H, W] images the generator can draw.

    ``image_shape``: (C, H, W) of the data; ``lazy``: files decoded on demand (their
    decoder makes float32 [C, H, W], so only the shape is checked).
    """
    x = None if lazy else data.train.x
    if x is not None and (x.ndim != 4 or x.dtype != np.float32):
        raise ConfigError(
            f"GanArena needs images float32 [N, C, H, W] in [0, 1]; the data loader gave "
            f"{x.dtype} {list(x.shape)} (for digits do not set flatten=true)"
        )
    want = tuple(image_shape)
    dec = generator.decoder
    got = (dec.out_channels, dec.image_size, dec.image_size)
    if got != want:
        raise ConfigError(
            f"the generator draws {list(got)} images but the data holds {list(want)}; set "
            "agents.generator.encoder.out_channels/image_size (the configs use "
            "${data.channels} and ${data.image_size})"
        )


def check_classes(agents: Any, num_classes: int) -> None:
    """Raise unless every (conditional) agent is built for the data's ``num_classes``."""
    for agent in agents:
        if agent.num_classes != num_classes:
            raise ConfigError(
                f"{agent.name!r} is built for {agent.num_classes} classes but the data "
                f"has {num_classes}; use num_classes: ${{craft.from_data:num_classes}}"
            )
