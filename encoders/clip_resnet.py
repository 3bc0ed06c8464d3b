"""CLIPResNetEncoder: CLIP's modified ResNet image tower (RN50 and kin), loading open_clip files.

A three-convolution stem with an average pool, bottleneck stages that downsample by average
pooling (anti-aliased strides), and attention pooling: the mean of the final feature map is
prepended as a query token, learned positions are added, one multi-head attention layer
reads all cells and its output projection ``c_proj`` maps into the joint space. This is
open_clip's ``ModifiedResNet`` (OpenAI's RN50/RN101/RN50x4 towers); Hugging Face has no
CLIP ResNet, so open_clip naming (``visual.conv1``, ``visual.layer1.0.conv1``,
``visual.attnpool.q_proj``...) is the file format read here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import paddle
import paddle.nn.functional as F
from paddle import nn

from .base import Encoder, InputSpec, LayerSpec, Tensor
from .clip_keys import OPEN_CLIP, check_projection, detect_clip_source
from .clip_vision import clip_normalize
from .image_mlp import dense
from .pretrained import PretrainedLoadError

#: named sizes: (blocks per stage, width, projection_dim); heads = width * 32 // 64
CLIP_RESNET_SIZES: dict[str, tuple[tuple[int, ...], int, int]] = {
    "tiny": ((1, 1, 1, 1), 16, 64),
    "rn50": ((3, 4, 6, 3), 64, 1024),
    "rn101": ((3, 4, 23, 3), 64, 512),
}


def _bn(c: int) -> nn.BatchNorm2D:
    return nn.BatchNorm2D(c, epsilon=1e-5)


def _conv(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Conv2D:
    return nn.Conv2D(c_in, c_out, k, stride=stride, padding=k // 2, bias_attr=False)


class Stem(nn.Layer):
    """``conv1`` (3x3 stride 2) ``conv2`` ``conv3`` (3x3), each with BatchNorm and ReLU, then a 2x2 average pool."""

    def __init__(self, in_channels: int, width: int) -> None:
        super().__init__()
        half = width // 2
        self.conv1, self.bn1 = _conv(in_channels, half, 3, stride=2), _bn(half)
        self.conv2, self.bn2 = _conv(half, half, 3), _bn(half)
        self.conv3, self.bn3 = _conv(half, width, 3), _bn(width)
        self.avgpool = nn.AvgPool2D(2, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.bn1(self.conv1(x)))  # [B, W/2, H/2, W/2]
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))  # [B, W, H/2, W/2]
        return self.avgpool(x)  # [B, W, H/4, W/4]


class Downsample(nn.Layer):
    """The shortcut of a block that changes size: average pool (stride), ``conv`` 1x1, ``bn``."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.pool = nn.AvgPool2D(stride, stride=stride) if stride > 1 else None
        self.conv, self.bn = _conv(c_in, c_out, 1), _bn(c_out)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.conv(x if self.pool is None else self.pool(x)))


class Bottleneck(nn.Layer):
    """1x1 -> 3x3 -> (average pool by ``stride``) -> 1x1 x4, BatchNorm and ReLU, residual."""

    def __init__(self, c_in: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv(c_in, planes, 1), _bn(planes)
        self.conv2, self.bn2 = _conv(planes, planes, 3), _bn(planes)
        self.avgpool = nn.AvgPool2D(stride, stride=stride) if stride > 1 else None
        self.conv3, self.bn3 = _conv(planes, planes * 4, 1), _bn(planes * 4)
        needs = stride > 1 or c_in != planes * 4
        self.downsample = Downsample(c_in, planes * 4, stride) if needs else None

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        if self.avgpool is not None:
            out = self.avgpool(out)
        out = self.bn3(self.conv3(out))  # [B, 4 planes, H', W']
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class AttentionPool(nn.Layer):
    """Feature map [B, C, H, W] -> attention outputs [B, H*W + 1, P], the mean token first."""

    def __init__(self, cells: int, dim: int, heads: int, out_dim: int) -> None:
        super().__init__()
        self.heads = heads
        init = nn.initializer.Normal(std=dim**-0.5)
        self.positional_embedding = self.create_parameter(
            [cells + 1, dim], default_initializer=init
        )
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(dim, dim) for _ in range(3))
        self.c_proj = nn.Linear(dim, out_dim)

    def forward(self, x: Tensor) -> Tensor:
        x = x.flatten(2).transpose([0, 2, 1])  # [B, HW, C]
        x = paddle.concat([x.mean(axis=1, keepdim=True), x], axis=1) + self.positional_embedding
        c = x.shape[2]
        d = c // self.heads

        def split(h: Tensor) -> Tensor:
            return h.reshape([0, 0, self.heads, d]).transpose([0, 2, 1, 3])  # [B, H, T, d]

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        att = F.softmax(paddle.matmul(q, k, transpose_y=True) / math.sqrt(d), axis=-1)
        out = paddle.matmul(att, v).transpose([0, 2, 1, 3]).reshape([0, 0, c])  # [B, T, C]
        return self.c_proj(out)  # [B, T, P]


class CLIPResNetEncoder(Encoder):
    """CLIP's ResNet image tower: images [B, C, H, W] -> ``pooled`` [B, projection_dim].

    Logical layers: ``stem``, ``layer1`` .. ``layer4`` (bottleneck stages, widths ``width`` x
    1, 2, 4, 8 before the x4 expansion), ``attnpool`` (positions, q/k/v, ``c_proj``) and, with
    ``num_classes``, ``prediction``. Input: [B, in_channels, H, W] float32, H and W
    divisible by 32 (``image_size``; 224 for RN50), in [0, 1] with ``normalize`` (CLIP's
    mean/std applied inside) or CLIP-normalised already. Outputs: ``prediction`` (primary, when
    ``num_classes``), ``pooled`` (the mean token's attention output, not normalised) and
    ``hidden`` [B, H*W/1024 + 1, projection_dim] (every token's); ``feature_dim =
    projection_dim``. ``size``: ``tiny`` (one block per stage, width 16, 64-d space),
    ``rn50`` or ``rn101``; ``heads`` defaults to ``width * 32 // 64`` as in CLIP.
    ``pretrained`` loads an open_clip file right after ``build()`` (its text half skipped).
    """

    default_watch = ("prediction", "pooled")

    def __init__(
        self,
        scope: str,
        image_size: int | Sequence[int] = 224,
        in_channels: int = 3,
        layers: Sequence[int] | None = None,
        width: int | None = None,
        heads: int | None = None,
        projection_dim: int | None = None,
        size: str | None = None,
        normalize: bool = False,
        num_classes: int | None = None,
        pretrained: str | None = None,
        pretrained_strict: bool = True,
    ) -> None:
        super().__init__(scope)
        self.normalize = normalize
        if size is not None and size not in CLIP_RESNET_SIZES:
            raise ValueError(
                f"{self._who()}: size must be one of {sorted(CLIP_RESNET_SIZES)}, got {size!r}"
            )
        row = CLIP_RESNET_SIZES[size] if size else (None, None, None)
        layers = tuple(layers or row[0] or ())
        width, projection_dim = width or row[1], projection_dim or row[2]
        if len(layers) != 4 or width is None or projection_dim is None:
            raise ValueError(
                f"{self._who()}: give size= (one of {sorted(CLIP_RESNET_SIZES)}) or layers (4 "
                "stages), width and projection_dim"
            )
        hw = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        if hw[0] % 32 or hw[1] % 32:
            raise ValueError(
                f"{self._who()}: image_size {hw[0]}x{hw[1]} must be divisible by 32 (the tower "
                "downsamples 32 times); resize the images or set image_size"
            )
        embed = width * 32
        self.heads = heads or embed // 64
        self.image_size = image_size if isinstance(image_size, int) else hw
        self.in_channels, self.layers_per_stage, self.width = in_channels, layers, width
        self.projection_dim = self.feature_dim = projection_dim
        self.num_classes, self.size = num_classes, size
        self.pretrained, self.pretrained_strict = pretrained, pretrained_strict
        self.declare(
            "stem",
            LayerSpec(lambda: Stem(in_channels, width), ("clip_resnet_stem", in_channels, width)),
        )
        c_in = width
        for i, (n, stride) in enumerate(zip(layers, (1, 2, 2, 2))):
            planes = width * 2**i
            self.declare(f"layer{i + 1}", _stage(c_in, planes, n, stride))
            c_in = planes * 4
        cells = (hw[0] // 32) * (hw[1] // 32)
        self.declare(
            "attnpool",
            LayerSpec(
                lambda: AttentionPool(cells, embed, self.heads, projection_dim),
                ("clip_attnpool", cells, embed, self.heads, projection_dim),
            ),
        )
        if num_classes is not None:
            self.declare("prediction", dense(projection_dim, num_classes))
        self.declare_input("input", InputSpec((in_channels, *hw)))
        names = ("pooled", "hidden")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        c, h, w = self.input_specs["input"].shape
        scale = "in [0, 1]" if self.normalize else "CLIP-normalised (or set normalize=true)"
        return f"Give images as [B, {c}, {h}, {w}] float32 {scale}; resize them."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        if self.normalize:
            x = clip_normalize(x)  # [B, C, H, W]
        h = self.layers["stem"](x)  # [B, W, H/4, W/4]
        for i in range(1, 5):
            h = self.layers[f"layer{i}"](h)  # layer4: [B, 32 W, H/32, W/32]
        tokens = self.layers["attnpool"](h)  # [B, cells + 1, P]
        out = {"pooled": tokens[:, 0], "hidden": tokens}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](out["pooled"])  # [B, num_classes]
        return out

    # ------------------------------------------------------------------ pretrained files
    def detect_source(self, keys: list[str]) -> str:
        """``open_clip`` (``visual.layer1.*``, ``visual.attnpool.*``)."""
        return detect_clip_source(self._who(), keys)

    def convert_pretrained(self, arrays: dict[str, Any], source: str) -> dict[str, Any]:
        """Keep the image half; check ``c_proj``'s sizes (one line)."""
        if source != OPEN_CLIP:
            raise PretrainedLoadError(
                f"{self._who()}: CLIP ResNet towers load open_clip files (visual.layer1.*, "
                f"visual.attnpool.*); this file is {source}, a ViT CLIP: use CLIPVisionEncoder"
            )
        mine = {k: v for k, v in arrays.items() if k.startswith("visual.")}
        if not any(k.startswith("visual.attnpool.") for k in mine):
            raise PretrainedLoadError(
                f"{self._who()}: the file holds no CLIP ResNet image tower (no visual.attnpool.*"
                " keys): a ViT file goes into CLIPVisionEncoder, a text file into CLIPTextEncoder"
            )
        if "visual.attnpool.c_proj.weight" in mine:
            check_projection(
                self._who(), "visual.attnpool.c_proj.weight",
                mine["visual.attnpool.c_proj.weight"], self.width * 32, self.projection_dim,
            )  # fmt: skip
        return mine

    def pretrained_key(self, key: str, source: str) -> str | None:
        """The ``state_dict()`` key that external ``key`` fills (None: no place for it)."""
        key = key.removeprefix("visual.")
        m = re.fullmatch(r"(conv|bn)([123])\.(.*)", key)
        if m:
            return f"layers.stem.{m.group(1)}{m.group(2)}.{m.group(3)}"
        m = re.fullmatch(r"(layer[1-4])\.(\d+)\.downsample\.([012])\.(.*)", key)
        if m:
            part = {"0": "conv", "1": "bn"}.get(m.group(3))  # open_clip: "-1" pool, "0", "1"
            return (
                None
                if part is None
                else f"layers.{m.group(1)}.{m.group(2)}.downsample.{part}.{m.group(4)}"
            )
        if re.fullmatch(r"layer[1-4]\.\d+\.(conv|bn)[123]\..*", key) or key.startswith("attnpool."):
            return f"layers.{key}"
        return None


def _stage(c_in: int, planes: int, n: int, stride: int) -> LayerSpec:
    def build() -> nn.Sequential:
        blocks = [Bottleneck(c_in, planes, stride)]
        blocks += [Bottleneck(planes * 4, planes) for _ in range(1, n)]
        return nn.Sequential(*blocks)

    return LayerSpec(build, ("clip_resnet_stage", c_in, planes, n, stride))


__all__ = ["CLIP_RESNET_SIZES", "CLIPResNetEncoder"]
