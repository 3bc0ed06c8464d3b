"""The adversarial losses, discriminator and generator side by side.

``lsgan`` (least squares, Mao et al. 2017; the default: on digits it left its early mode
collapse about twice as fast as the BCE loss and reached higher recall, see docs/guide/gan.md),
``vanilla`` (DCGAN: BCE with logits, non-saturating generator loss) and ``wgan_gp``
(Wasserstein loss plus a gradient penalty on random interpolates, Gulrajani et al. 2017,
via ``paddle.grad(create_graph=True)``).

Each function takes the discriminator's logits [B] and returns the loss (a 0-d tensor)
plus the tensors the arena logs; nothing here syncs with the host.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import paddle
import paddle.nn.functional as F

__all__ = ["GanLoss", "discriminator_loss", "generator_loss", "gradient_penalty"]


class GanLoss(str, enum.Enum):
    """The adversarial loss."""

    vanilla = "vanilla"
    lsgan = "lsgan"
    wgan_gp = "wgan_gp"


def discriminator_loss(
    kind: GanLoss,
    d_real: paddle.Tensor,
    d_fake: paddle.Tensor,
    real_label: float = 1.0,
) -> tuple[paddle.Tensor, dict[str, paddle.Tensor]]:
    """The discriminator's loss on logits for real [B] and fake [B] images (WGAN-GP: without
    its penalty, see `gradient_penalty`), and ``d_real`` / ``d_fake`` to log
    (D(x) and D(G(z)): probabilities for ``vanilla``, raw scores otherwise)."""
    if kind is GanLoss.vanilla:
        loss = F.binary_cross_entropy_with_logits(
            d_real, paddle.full_like(d_real, real_label)
        ) + F.binary_cross_entropy_with_logits(d_fake, paddle.zeros_like(d_fake))
        return loss, {"d_real": F.sigmoid(d_real).mean(), "d_fake": F.sigmoid(d_fake).mean()}
    real_mean, fake_mean = d_real.mean(), d_fake.mean()
    if kind is GanLoss.lsgan:
        loss = 0.5 * ((d_real - 1.0) ** 2).mean() + 0.5 * (d_fake**2).mean()
        return loss, {"d_real": real_mean, "d_fake": fake_mean}
    wdist = real_mean - fake_mean
    return -wdist, {"d_real": real_mean, "d_fake": fake_mean, "wasserstein": wdist}


def generator_loss(kind: GanLoss, d_fake: paddle.Tensor) -> paddle.Tensor:
    """The generator's loss on the discriminator's logits [B] for its fakes."""
    if kind is GanLoss.vanilla:  # non-saturating: maximise log D(G(z))
        return F.binary_cross_entropy_with_logits(d_fake, paddle.ones_like(d_fake))
    if kind is GanLoss.lsgan:
        return 0.5 * ((d_fake - 1.0) ** 2).mean()
    return -d_fake.mean()


def gradient_penalty(
    critic: Callable[[paddle.Tensor], paddle.Tensor],
    real: paddle.Tensor,
    fake: paddle.Tensor,
    eps: paddle.Tensor,
) -> paddle.Tensor:
    """``mean((|grad_x critic(x_hat)| - 1)^2)`` on interpolates ``x_hat = eps real + (1 - eps) fake``.

    ``real``, ``fake`` [B, C, H, W]; ``eps`` [B, 1, 1, 1] in [0, 1]. The result keeps its
    graph (``create_graph``), so the critic's update trains through it.
    """
    mix = eps * real + (1.0 - eps) * fake.detach()
    mix.stop_gradient = False
    out = critic(mix)  # [B]
    (grad,) = paddle.grad(out.sum(), mix, create_graph=True)
    norm = paddle.sqrt((grad.reshape([grad.shape[0], -1]) ** 2).sum(1) + 1e-12)
    return ((norm - 1.0) ** 2).mean()
