"""ImageCNNEncoder: a small conv net (LeNet-like, small ResNet, or a DCGAN discriminator body).

Decisions:

- ``arch="dcgan"`` is the GAN discriminator's body (conv k4 s2 + LeakyReLU, Radford et
  al. 2016). With ``norm="none"`` (``conf/encoder/dcgan.yaml``) it is twice
  differentiable, as WGAN-GP's gradient penalty needs, and has no running statistics.
- The features are flattened with ``reshape``, not ``paddle.flatten``: Paddle 3.3.1 has
  no double gradient for ``flatten`` (nor for ``layer_norm``, ``group_norm`` or
  ``gelu``). Measured on Paddle 3.3.1 CPU: the double gradient of conv2d + batch/instance
  norm + (leaky) ReLU matches central finite differences in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

import paddle.nn.functional as F
from paddle import nn

from .base import Encoder, InputSpec, LayerSpec, Tensor
from .image_mlp import dense

ARCHS = ("lenet", "resnet", "dcgan")
NORMS = ("batch", "instance", "none")


def _norm(kind: str, channels: int) -> nn.Layer | None:
    if kind == "batch":
        return nn.BatchNorm2D(channels)
    if kind == "instance":
        return nn.InstanceNorm2D(channels)
    return None


class ConvBlock(nn.Layer):
    """conv3x3 [-> norm] -> ReLU, optionally stride 2 (``conv``, ``bn``)."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str = "batch") -> None:
        super().__init__()
        self.conv = nn.Conv2D(
            c_in, c_out, 3, stride=stride, padding=1, bias_attr=None if norm == "none" else False
        )
        self.bn = _norm(norm, c_out)

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv(x)
        return F.relu(self.bn(h) if self.bn is not None else h)


class ResBlock(nn.Layer):
    """Basic residual block: two conv3x3+BN, identity (or 1x1 projection) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2D(c_in, c_out, 3, stride=stride, padding=1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(c_out)
        self.conv2 = nn.Conv2D(c_out, c_out, 3, padding=1, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(c_out)
        self.proj = (
            nn.Conv2D(c_in, c_out, 1, stride=stride, bias_attr=False)
            if stride != 1 or c_in != c_out
            else None
        )

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (self.proj(x) if self.proj is not None else x))


class DCGANBlock(nn.Layer):
    """Conv (k4 s2 p1, or k3 s1 p1) [-> norm] -> LeakyReLU (``conv``, ``norm``)."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str, slope: float) -> None:
        super().__init__()
        k = 4 if stride == 2 else 3
        self.conv = nn.Conv2D(
            c_in, c_out, k, stride=stride, padding=1, bias_attr=None if norm == "none" else False
        )
        self.norm = _norm(norm, c_out)
        self.slope = slope

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv(x)
        if self.norm is not None:
            h = self.norm(h)
        return F.leaky_relu(h, self.slope)


def _block(arch: str, c_in: int, c_out: int, stride: int, norm: str, slope: float) -> LayerSpec:
    if arch == "dcgan":
        return LayerSpec(
            lambda: DCGANBlock(c_in, c_out, stride, norm, slope),
            ("dcgan", c_in, c_out, stride, norm),
        )
    if arch == "resnet":
        return LayerSpec(lambda: ResBlock(c_in, c_out, stride), (arch, c_in, c_out, stride))
    signature = (arch, c_in, c_out, stride) + (() if norm == "batch" else (norm,))
    return LayerSpec(lambda: ConvBlock(c_in, c_out, stride, norm), signature)


class ImageCNNEncoder(Encoder):
    """Conv blocks -> flatten -> ``embedding`` layer -> ``pooled`` [-> ``prediction`` logits].

    Logical layers: ``conv_1`` .. ``conv_n`` (one block per entry of ``channels``; a block
    halves the spatial size while it is larger than ``min_spatial``), ``embedding``
    (linear to ``embedding_dim``) and, with ``num_classes``, ``prediction``.
    Input ``input``: [B, C, H, W] float32 (``image_size`` an int or (H, W)). Outputs:
    ``prediction`` [B, num_classes] when ``num_classes`` is set (primary), and ``pooled``
    [B, embedding_dim] (``feature_dim = embedding_dim``). No per-position output: the
    ``embedding`` layer mixes every cell of the last feature map.
    Works for 1x8x8 digits, 1x28x28 MNIST, 3x64x64 colour images and 2x6x7 board planes.

    ``arch``:

    - ``lenet``: conv3x3 -> ``norm`` -> ReLU blocks (stride 2 while halving); ReLU embedding.
    - ``resnet``: basic residual blocks (batch norm only).
    - ``dcgan``: the DCGAN discriminator body: conv k4 s2 (k3 s1 once at ``min_spatial``)
      -> ``norm`` (every block but the first) -> LeakyReLU(``slope``); LeakyReLU embedding.
      ``norm="none"`` makes it twice differentiable with no running statistics (WGAN-GP).

    ``norm``: ``batch`` | ``instance`` | ``none`` (lenet and dcgan).
    """

    def __init__(
        self,
        scope: str,
        in_channels: int = 1,
        image_size: int | Sequence[int] = 8,
        channels: Sequence[int] = (32, 64),
        embedding_dim: int = 128,
        num_classes: int | None = 10,
        arch: str = "lenet",
        min_spatial: int = 4,
        norm: str = "batch",
        slope: float = 0.2,
    ) -> None:
        super().__init__(scope)
        if arch not in ARCHS:
            raise ValueError(
                f"ImageCNNEncoder({scope!r}): arch must be one of {ARCHS}, got {arch!r}"
            )
        if norm not in NORMS or (arch == "resnet" and norm != "batch"):
            allowed = ("batch",) if arch == "resnet" else NORMS
            raise ValueError(
                f"ImageCNNEncoder({scope!r}): norm for arch={arch!r} must be one of {allowed}, "
                f"got {norm!r}"
            )
        h, w = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        self.in_channels, self.image_size, self.arch = in_channels, (h, w), arch
        self.feature_dim, self.num_classes = embedding_dim, num_classes
        self.norm, self.slope = norm, float(slope)
        c = in_channels
        for i, c_out in enumerate(channels, start=1):
            stride = 2 if min(h, w) > min_spatial else 1
            # DCGAN: no normalisation on the first block (it sees the raw image)
            block_norm = "none" if arch == "dcgan" and i == 1 else norm
            self.declare(f"conv_{i}", _block(arch, c, c_out, stride, block_norm, self.slope))
            if arch == "dcgan" and stride == 2:  # k4 s2 p1: floor(h / 2)
                h, w, c = h // 2, w // 2, c_out
            else:  # k3 (s1 or s2) p1: ceil(h / stride)
                h, w, c = (h + stride - 1) // stride, (w + stride - 1) // stride, c_out
        self.feature_shape = (c, h, w)
        self._flat = c * h * w
        self.declare("embedding", dense(c * h * w, embedding_dim))
        if num_classes is not None:
            self.declare("prediction", dense(embedding_dim, num_classes))
        self.declare_input("input", InputSpec((in_channels, *self.image_size)))
        self.declare_outputs(*(("prediction", "pooled") if num_classes else ("pooled",)))
        self._n_blocks = len(channels)

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        c, (h, w) = self.in_channels, self.image_size
        return f"Give images as [B, {c}, {h}, {w}] float32 (channels first), or set in_channels/image_size."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        h = x  # [B, C, H, W]
        for i in range(1, self._n_blocks + 1):
            h = self.layers[f"conv_{i}"](h)  # [B, c_i, H_i, W_i]
        h = h.reshape([-1, self._flat])  # [B, c*H*W]; not paddle.flatten (no double grad)
        emb = self.layers["embedding"](h)
        if self.arch == "dcgan":
            emb = F.leaky_relu(emb, self.slope)  # [B, embedding_dim]
        else:
            emb = F.relu(emb)  # [B, embedding_dim]
        out = {"pooled": emb}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](emb)  # [B, num_classes]
        return out
