"""ImageCNNEncoder: a small conv net (LeNet-like or small ResNet) for digits, MNIST, colour images, boards."""

from __future__ import annotations

from collections.abc import Sequence

import paddle
import paddle.nn.functional as F
from paddle import nn

from .base import Encoder, InputSpec, LayerSpec, Tensor
from .image_mlp import dense


class ConvBlock(nn.Layer):
    """conv3x3 -> BatchNorm -> ReLU, optionally stride 2 (``conv``, ``bn``)."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.Conv2D(c_in, c_out, 3, stride=stride, padding=1, bias_attr=False)
        self.bn = nn.BatchNorm2D(c_out)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)))


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


def _block(arch: str, c_in: int, c_out: int, stride: int) -> LayerSpec:
    cls = ResBlock if arch == "resnet" else ConvBlock
    return LayerSpec(lambda: cls(c_in, c_out, stride), (arch, c_in, c_out, stride))


class ImageCNNEncoder(Encoder):
    """Conv blocks -> flatten -> ``embedding`` (ReLU) [-> ``prediction`` logits].

    Logical layers: ``conv_1`` .. ``conv_n`` (one block per entry of ``channels``; a block
    halves the spatial size while it is larger than ``min_spatial``), ``embedding``
    (linear to ``embedding_dim``) and, with ``num_classes``, ``prediction``.
    Input ``input``: [B, C, H, W] float32. Outputs: ``prediction`` [B, num_classes] when
    ``num_classes`` is set (primary), and ``embedding`` [B, embedding_dim].
    Works for 1x8x8 digits, 1x28x28 MNIST, 3x64x64 colour images and 2x6x7 board planes.
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
    ) -> None:
        super().__init__(scope)
        if arch not in ("lenet", "resnet"):
            raise ValueError(
                f"ImageCNNEncoder({scope!r}): arch must be 'lenet' or 'resnet', got {arch!r}"
            )
        h, w = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        self.in_channels, self.image_size, self.arch = in_channels, (h, w), arch
        self.embedding_dim, self.num_classes = embedding_dim, num_classes
        c = in_channels
        for i, c_out in enumerate(channels, start=1):
            stride = 2 if min(h, w) > min_spatial else 1
            self.declare(f"conv_{i}", _block(arch, c, c_out, stride))
            h, w, c = (h + stride - 1) // stride, (w + stride - 1) // stride, c_out
        self.feature_shape = (c, h, w)
        self.declare("embedding", dense(c * h * w, embedding_dim))
        if num_classes is not None:
            self.declare("prediction", dense(embedding_dim, num_classes))
        self.declare_input("input", InputSpec((in_channels, *self.image_size)))
        self.declare_outputs(*(("prediction", "embedding") if num_classes else ("embedding",)))
        self._n_blocks = len(channels)

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        c, (h, w) = self.in_channels, self.image_size
        return f"Give images as [B, {c}, {h}, {w}] float32 (channels first), or set in_channels/image_size."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        h = x  # [B, C, H, W]
        for i in range(1, self._n_blocks + 1):
            h = self.layers[f"conv_{i}"](h)  # [B, c_i, H_i, W_i]
        emb = F.relu(self.layers["embedding"](paddle.flatten(h, 1)))  # [B, embedding_dim]
        out = {"embedding": emb}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](emb)  # [B, num_classes]
        return out
