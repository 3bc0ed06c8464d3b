"""GAN agents: a :class:`Generator` (an ImageDecoder) and a :class:`Discriminator` (an image encoder).

Each is an ordinary :class:`~agents.Agent`: its own scope, optimizer, device and seed. The
GAN arena (``arenas.gan``) pits them against each other.

Decisions:

- The discriminator's default encoder is :class:`CriticCNNEncoder` (DCGAN-style conv k4 s2
  + LeakyReLU, no normalisation by default). It reshapes instead of ``paddle.flatten``
  because Paddle 3.3.1 has no double gradient for ``flatten`` (nor for ``layer_norm``,
  ``group_norm`` or ``gelu``), and WGAN-GP needs one. Measured on Paddle 3.3.1 CPU: the
  double gradient of conv2d + batch/instance norm + (leaky) relu matches central finite
  differences in float64 to ~1e-10. Without normalisation the discriminator has no
  running statistics, so running it inside the generator's step changes nothing of it.
- Conditional discriminator: a projection discriminator (Miyato & Koyama 2018),
  ``logit = critic(h) + <label_projection(y), h>`` with ``h`` the encoder's embedding.
  Conditional generator: the ImageDecoder's own label embedding concatenated to ``z``.
- :func:`no_param_grads` marks an agent's parameters ``stop_gradient`` for the duration
  of the other agent's step (the arena uses it on the discriminator during the
  generator's step), so that backward computes, and leaves, no gradient on them;
  :func:`keep_running_stats` restores batch-norm statistics moved by a train-mode
  forward in the other agent's step.
- ``CriticCNNEncoder`` is an :class:`~encoders.Encoder` (logical names, save/load,
  freeze...) kept in this module beside the agent that uses it; ``encoders.ImageCNNEncoder``
  also works as a discriminator body (``critic@agents.discriminator.encoder=cnn``) but
  not for WGAN-GP (batch norm, ``paddle.flatten``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from encoders.base import Encoder, InputSpec, LayerSpec, Tensor

from .base import Agent

__all__ = [
    "CriticCNNEncoder",
    "Discriminator",
    "Generator",
    "keep_running_stats",
    "no_param_grads",
]


# ----------------------------------------------------------------------------- encoder
class CriticBlock(nn.Layer):
    """Conv (k4 s2 p1, or k3 s1 p1) [-> norm] -> LeakyReLU (``conv``, ``norm``)."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str, slope: float) -> None:
        super().__init__()
        k = 4 if stride == 2 else 3
        self.conv = nn.Conv2D(c_in, c_out, k, stride=stride, padding=1, bias_attr=norm == "none")
        if norm == "batch":
            self.norm = nn.BatchNorm2D(c_out)
        elif norm == "instance":
            self.norm = nn.InstanceNorm2D(c_out)
        else:
            self.norm = None
        self.slope = slope

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv(x)
        if self.norm is not None:
            h = self.norm(h)
        return F.leaky_relu(h, self.slope)


def _critic_block(c_in: int, c_out: int, stride: int, norm: str, slope: float) -> LayerSpec:
    return LayerSpec(
        lambda: CriticBlock(c_in, c_out, stride, norm, slope),
        ("critic_block", c_in, c_out, stride, norm),
    )


def _linear(n_in: int, n_out: int) -> LayerSpec:
    return LayerSpec(lambda: nn.Linear(n_in, n_out), ("linear", n_in, n_out))


class CriticCNNEncoder(Encoder):
    """A DCGAN discriminator body: conv blocks -> ``embedding`` (LeakyReLU), twice-differentiable.

    Logical layers: ``conv_1`` .. ``conv_n`` (one :class:`CriticBlock` per entry of
    ``channels``: conv k4 s2 while the image is larger than ``min_spatial``, then conv k3
    s1; normalisation ``norm`` on every block but the first, as in DCGAN; LeakyReLU) and
    ``embedding`` (linear to ``embedding_dim``, LeakyReLU). Input ``input``
    [B, C, H, W] float32; output ``embedding`` [B, embedding_dim].

    ``norm``: ``none`` (default; needed for an exact WGAN-GP penalty, and keeps the
    critic free of running statistics), ``batch`` or ``instance``.
    """

    default_watch = ()

    def __init__(
        self,
        scope: str,
        in_channels: int = 1,
        image_size: int | Sequence[int] = 8,
        channels: Sequence[int] = (64, 128),
        embedding_dim: int = 128,
        norm: str = "none",
        slope: float = 0.2,
        min_spatial: int = 4,
    ) -> None:
        super().__init__(scope)
        if norm not in ("none", "batch", "instance"):
            raise ValueError(
                f"CriticCNNEncoder({scope!r}): norm must be none, batch or instance, got {norm!r}"
            )
        h, w = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        self.in_channels, self.image_size = in_channels, (h, w)
        self.embedding_dim, self.norm = embedding_dim, norm
        c = in_channels
        for i, c_out in enumerate(channels, start=1):
            stride = 2 if min(h, w) > min_spatial else 1
            self.declare(
                f"conv_{i}", _critic_block(c, c_out, stride, norm if i > 1 else "none", slope)
            )
            h, w, c = (h + stride - 1) // stride, (w + stride - 1) // stride, c_out
        self.feature_shape = (c, h, w)
        self.slope = slope
        self.declare("embedding", _linear(c * h * w, embedding_dim))
        self.declare_input("input", InputSpec((in_channels, *self.image_size)))
        self.declare_outputs("embedding")
        self._n_blocks = len(channels)

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        c, (h, w) = self.in_channels, self.image_size
        return f"Give images as [B, {c}, {h}, {w}] float32 (channels first), or set in_channels/image_size."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        h = x  # [B, C, H, W]
        for i in range(1, self._n_blocks + 1):
            h = self.layers[f"conv_{i}"](h)  # [B, c_i, H_i, W_i]
        h = h.reshape([h.shape[0], -1])  # not paddle.flatten: it has no double gradient
        return {"embedding": F.leaky_relu(self.layers["embedding"](h), self.slope)}


# ----------------------------------------------------------------------------- helpers
@contextmanager
def no_param_grads(agent: nn.Layer) -> Iterator[None]:
    """Within the block, ``agent``'s parameters get no gradient (``stop_gradient=True``).

    Inputs still receive gradients through it, so a generator can learn through a
    discriminator without computing (or leaving) any gradient on the discriminator.
    The flags are restored exactly, so parameters frozen by the user stay frozen.
    """
    params = [p for p in agent.parameters() if not p.stop_gradient]
    for p in params:
        p.stop_gradient = True
    try:
        yield
    finally:
        for p in params:
            p.stop_gradient = False


def _stat_tensors(layer: nn.Layer) -> list[Tensor]:
    out = []
    for sub in layer.sublayers(include_self=True):
        if isinstance(sub, nn.layer.norm._BatchNormBase):
            out += [sub._mean, sub._variance]
    return out


@contextmanager
def keep_running_stats(layer: nn.Layer) -> Iterator[None]:
    """Restore batch-norm running means/variances after the block (train-mode forwards)."""
    stats = _stat_tensors(layer)
    saved = [t.numpy().copy() for t in stats]
    try:
        yield
    finally:
        for t, v in zip(stats, saved):
            t.set_value(v)


# ----------------------------------------------------------------------------- agents
class Generator(Agent):
    """Draws images from latent vectors (and class labels): an :class:`~encoders.ImageDecoder`.

    Args:
        name: scope; parameters are ``<name>.<logical>.w_0`` ...
        encoder: decoder config (``_target_`` + kwargs, no scope), e.g.
            ``{"_target_": "encoders.ImageDecoder", "latent_dim": 32, "image_size": 8}``;
            give it ``num_classes`` for a conditional generator.
        **common: :class:`~agents.Agent` settings (device, seed, lr, optimizer, ...).
    """

    def __init__(self, name: str, encoder: Any, **common: Any) -> None:
        super().__init__(name, config={"encoder": encoder}, **common)
        with self.seeded():
            self.decoder = self.make_encoder(encoder)
        if "image" not in self.decoder.output_names or not hasattr(self.decoder, "latent_dim"):
            raise ValueError(
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
        encoder: an image encoder config whose ``embedding`` output (or primary output)
            gives features ``h`` [B, F], e.g. :class:`CriticCNNEncoder` or
            ``encoders.ImageCNNEncoder``.
        num_classes: set for a conditional (projection) discriminator:
            ``logit = critic(h) + <label_projection(y), h>``.
        **common: :class:`~agents.Agent` settings.
    """

    def __init__(self, name: str, encoder: Any, num_classes: int | None = None, **common: Any):
        super().__init__(name, config={"encoder": encoder, "num_classes": num_classes}, **common)
        self.num_classes = num_classes
        with self.seeded():
            self.encoder = self.make_encoder(encoder)
            dim = getattr(self.encoder, "embedding_dim", None)
            if dim is None:
                raise ValueError(
                    f"agents.{name}.encoder: {type(self.encoder).__name__} has no embedding_dim; "
                    "use an image encoder with an 'embedding' output"
                )
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
        """The encoder's embedding [B, F]."""
        outs = self.encoder.forward_all(x)
        return outs["embedding"] if "embedding" in outs else outs[self.encoder.primary_output]

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
