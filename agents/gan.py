"""GAN agents: a `Generator` (an ImageDecoder) and a `Discriminator` (an image encoder).

Each is an ordinary `Agent`: its own scope, optimizer, device and seed. The
GAN arena (``paddlecraft.arenas.gan``) pits them against each other.

Decisions:

- The discriminator's default body is ``paddlecraft.encoders.ImageCNNEncoder(arch="dcgan",
  norm="none")`` (``conf/encoder/dcgan.yaml``): conv k4 s2 + LeakyReLU, twice
  differentiable (WGAN-GP) and free of running statistics, so running it inside the
  generator's step changes nothing of it. ``encoder@agents.discriminator.encoder=cnn``
  uses the classifier CNN (batch norm: not for WGAN-GP); any encoder of the contract fits.
- Conditional discriminator: a projection discriminator (Miyato & Koyama 2018),
  ``logit = critic(h) + <label_projection(y), h>`` with ``h`` the encoder's embedding.
  Conditional generator: the ImageDecoder's own label embedding concatenated to ``z``.
- `no_param_grads` marks an agent's parameters ``stop_gradient`` for the duration
  of the other agent's step (the arena uses it on the discriminator during the
  generator's step), so that backward computes, and leaves, no gradient on them;
  `keep_running_stats` restores batch-norm statistics moved by a train-mode
  forward in the other agent's step (a no-op for a layer without batch norm).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle
from omegaconf import MISSING
from paddle import nn

from paddlecraft.encoders.base import Tensor
from paddlecraft.errors import ConfigError
from paddlecraft.paddle_private import batch_norm_stats

from .base import Agent, AgentConfig
from .plug import image_inputs

__all__ = [
    "Discriminator",
    "DiscriminatorConfig",
    "Generator",
    "GeneratorConfig",
    "keep_running_stats",
    "no_param_grads",
    "running_stats",
]


# ----------------------------------------------------------------------------- helpers
@contextmanager
def no_param_grads(params: nn.Layer | Iterable[Tensor]) -> Iterator[None]:
    """Within the block, these parameters (or a layer's) get no gradient (``stop_gradient``).

    Inputs still receive gradients through them, so a generator can learn through a
    discriminator without computing (or leaving) any gradient on the discriminator.
    The flags are restored exactly, so parameters frozen by the user stay frozen. Pass
    a list (e.g. ``layer.parameters()`` taken once) to skip walking the layer per call.
    """
    source = params.parameters() if isinstance(params, nn.Layer) else params
    flipped = [p for p in source if not p.stop_gradient]
    for p in flipped:
        p.stop_gradient = True
    try:
        yield
    finally:
        for p in flipped:
            p.stop_gradient = False


def running_stats(layer: nn.Layer) -> list[Tensor]:
    """The batch-norm running means and variances inside ``layer`` (empty without batch norm)."""
    return batch_norm_stats(layer)


@contextmanager
def keep_running_stats(stats: nn.Layer | Sequence[Tensor]) -> Iterator[None]:
    """Restore batch-norm running statistics (of a layer, or from `running_stats`) after the block.

    Copies stay on the tensors' device (no host round trip); nothing is copied when
    there is no batch norm.
    """
    tensors = running_stats(stats) if isinstance(stats, nn.Layer) else stats
    if not tensors:
        yield
        return
    with paddle.no_grad():
        saved = [t.clone() for t in tensors]
    try:
        yield
    finally:
        with paddle.no_grad():
            for t, v in zip(tensors, saved):
                paddle.assign(v, output=t)


# ----------------------------------------------------------------------------- settings
@dataclass
class GeneratorConfig(AgentConfig):
    """paddlecraft.agents.Generator settings."""

    encoder: Any = MISSING  #: an image decoder config (conf/decoder/*): ``_target_`` + kwargs


@dataclass
class DiscriminatorConfig(AgentConfig):
    """paddlecraft.agents.Discriminator settings."""

    encoder: Any = MISSING  #: an image encoder config (conf/encoder/*); built headless
    num_classes: Optional[int] = None  #: set for a projection discriminator  # noqa: UP045
    input_shape: Optional[list[int]] = None  # noqa: UP045
    #: ^ [channels, height, width] of the images (from the data); fills the encoder's sizes


# ----------------------------------------------------------------------------- agents
class Generator(Agent):
    """Draws images from latent vectors (and class labels): an `ImageDecoder`.

    Args:
        name: scope; parameters are ``<name>.<logical>.w_0`` ...
        **settings: `GeneratorConfig` fields; ``encoder`` is a decoder config
            (``_target_`` + kwargs, no scope), e.g. ``{"_target_": "paddlecraft.encoders.ImageDecoder",
            "latent_dim": 32, "image_size": 8}``; give it ``num_classes`` for a
            conditional generator.
    """

    Config = GeneratorConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        with self.seeded():
            self.decoder = self.make_encoder(self.cfg.encoder, takes="image decoder")
        if "image" not in self.decoder.output_names or not hasattr(self.decoder, "latent_dim"):
            raise ConfigError(
                f"agents.{name}.encoder: {type(self.decoder).__name__} is not an image decoder "
                "(it needs a latent_dim and an 'image' output); use encoders.ImageDecoder"
            )
        self.finish()

    @property
    def latent_dim(self) -> int:
        """Size of a latent vector."""
        return int(self.decoder.latent_dim)

    @property
    def num_classes(self) -> int | None:
        """Class count when conditional, else None."""
        return getattr(self.decoder, "num_classes", None)

    @property
    def conditional(self) -> bool:
        """Whether the generator takes class labels."""
        return self.num_classes is not None

    def forward(self, z: Tensor, labels: Tensor | None = None) -> Tensor:
        """Images [B, C, H, W] in [0, 1] from ``z`` [B, latent_dim] (and labels [B])."""
        return self.decoder(z, labels) if self.conditional else self.decoder(z)

    def latent(self, n: int) -> Tensor:
        """``n`` latent vectors ~ N(0, 1) from Paddle's global stream (checkpointed)."""
        return paddle.randn([n, self.latent_dim])

    @paddle.no_grad()
    def generate(
        self,
        z: np.ndarray,
        labels: np.ndarray | None = None,
        batch_size: int = 500,
    ) -> np.ndarray:
        """Images float32 [N, C, H, W] in [0, 1] for latent vectors ``z`` [N, latent_dim].

        Eval mode (batch norm uses its running statistics), no gradient, global random
        streams untouched; the training mode is restored afterwards.
        """
        if self.conditional and labels is None:
            raise ValueError(f"generator {self.name!r} is conditional: give labels")
        was_training = self.training
        self.eval()
        out = []
        try:
            for i in range(0, len(z), batch_size):
                zb = self.to_tensor(z[i : i + batch_size].astype(np.float32))
                lb = None if labels is None else self.to_tensor(labels[i : i + batch_size], "int64")
                out.append(self(zb, lb).numpy())
        finally:
            self.train(was_training)
        return np.concatenate(out).astype(np.float32)

    def sample(
        self, n: int, labels: int | Sequence[int] | np.ndarray | None = None, seed: int = 0
    ) -> np.ndarray:
        """``n`` images from ``np.random.default_rng(seed)`` noise; labels cycle 0..K-1 if None."""
        rng = np.random.default_rng(seed)
        z = rng.standard_normal((n, self.latent_dim)).astype(np.float32)
        ids = None
        if self.conditional:
            ids = np.arange(n) % self.num_classes if labels is None else np.asarray(labels)
            ids = np.broadcast_to(ids, (n,)).astype(np.int64)
        elif labels is not None:
            raise ValueError(f"generator {self.name!r} is unconditional: sample() takes no labels")
        return self.generate(z, ids)


class Discriminator(Agent):
    """Scores images as real (high) or generated (low): an image encoder plus a linear critic.

    Args:
        name: scope.
        **settings: `DiscriminatorConfig` fields: ``encoder``, an image encoder
            config, built headless, whose ``pooled`` output gives features ``h`` [B, F] (e.g.
            ``paddlecraft.encoders.ImageCNNEncoder`` with ``arch: dcgan``), and ``num_classes`` for a
            conditional (projection) discriminator: ``logit = critic(h) + <label_projection(y), h>``.
    """

    Config = DiscriminatorConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        num_classes = self.num_classes = self.cfg.num_classes
        with self.seeded():
            self.encoder = self.make_encoder(
                self.cfg.encoder,
                inputs=image_inputs(self.cfg.input_shape),
                headless=True,
                features=True,
            )
            dim = self.encoder.feature_dim
            self.critic = self.make_head("critic", lambda: nn.Linear(dim, 1))
            if num_classes is not None:
                self.label_projection = self.make_head(
                    "label_projection", lambda: nn.Embedding(num_classes, dim)
                )
        self.finish()

    @property
    def conditional(self) -> bool:
        """Whether the discriminator takes class labels."""
        return self.num_classes is not None

    def features(self, x: Tensor) -> Tensor:
        """The encoder's pooled features [B, F]."""
        return self.encoder.forward_all(x)["pooled"]

    def forward(self, x: Tensor, labels: Tensor | None = None) -> Tensor:
        """Logits [B] (real: high) for images [B, C, H, W] (and labels [B] when conditional)."""
        h = self.features(x)  # [B, F]
        logit = self.critic(h).reshape([-1])  # [B]
        if self.conditional:
            if labels is None:
                raise ValueError(f"discriminator {self.name!r} is conditional: give labels")
            proj = self.label_projection(labels.reshape([-1]))  # [B, F]
            logit = logit + (proj * h).sum(axis=1)
        return logit
