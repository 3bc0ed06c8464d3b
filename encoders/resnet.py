"""ResNetEncoder: ResNet-18/34/50 as torchvision / paddle.vision build it, loadable from their files.

The architecture is torchvision's ``resnet18/34/50`` (= ``paddle.vision.models.resnet*``):
BasicBlock (18/34) or Bottleneck with the stride on the 3x3 conv (ResNet v1.5, 50), a 1x1
conv + BN ``downsample`` shortcut when the shape changes. Inside each logical layer the
sublayers keep torchvision's names (``0.conv1``, ``0.bn1``, ``0.downsample.0``), so loading a
torchvision, paddle.vision or Hugging Face ``ResNetModel`` file is mostly a prefix rename.
"""

from __future__ import annotations

import paddle
import paddle.nn.functional as F
from paddle import nn

from .base import Encoder, InputSpec, LayerSpec, Tensor
from .pretrained import PretrainedLoadError, rename_prefix

#: depth -> (block kind, blocks per stage)
ARCHS: dict[int, tuple[str, tuple[int, int, int, int]]] = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
}
EXPANSION = {"basic": 1, "bottleneck": 4}


def _conv(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Conv2D:
    return nn.Conv2D(c_in, c_out, k, stride=stride, padding=k // 2, bias_attr=False)


class BasicBlock(nn.Layer):
    """conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU (torchvision names)."""

    def __init__(self, c_in: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = _conv(c_in, planes, 3, stride)
        self.bn1 = nn.BatchNorm2D(planes)
        self.conv2 = _conv(planes, planes, 3)
        self.bn2 = nn.BatchNorm2D(planes)
        self.downsample = _downsample(c_in, planes, stride)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Layer):
    """1x1 reduce, 3x3 (carries the stride: v1.5), 1x1 expand x4, + shortcut, ReLU.

    ``stride_in_1x1`` moves the stride to the first 1x1 conv (ResNet v1, Caffe; Hugging Face
    ``downsample_in_bottleneck=True``).
    """

    def __init__(
        self, c_in: int, planes: int, stride: int = 1, stride_in_1x1: bool = False
    ) -> None:
        super().__init__()
        out = planes * EXPANSION["bottleneck"]
        self.conv1 = _conv(c_in, planes, 1, stride if stride_in_1x1 else 1)
        self.bn1 = nn.BatchNorm2D(planes)
        self.conv2 = _conv(planes, planes, 3, 1 if stride_in_1x1 else stride)
        self.bn2 = nn.BatchNorm2D(planes)
        self.conv3 = _conv(planes, out, 1)
        self.bn3 = nn.BatchNorm2D(out)
        self.downsample = _downsample(c_in, out, stride)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + (x if self.downsample is None else self.downsample(x)))


def _downsample(c_in: int, c_out: int, stride: int) -> nn.Sequential | None:
    if stride == 1 and c_in == c_out:
        return None
    return nn.Sequential(_conv(c_in, c_out, 1, stride), nn.BatchNorm2D(c_out))


class Stem(nn.Layer):
    """conv1-bn1-ReLU-maxpool (7x7 stride 2 + 3x3/2 pool), or 3x3 stride 1 and no pool."""

    def __init__(self, c_in: int, width: int, small_input: bool) -> None:
        super().__init__()
        self.conv1 = _conv(c_in, width, 3) if small_input else _conv(c_in, width, 7, 2)
        self.bn1 = nn.BatchNorm2D(width)
        self.maxpool = None if small_input else nn.MaxPool2D(3, stride=2, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        return h if self.maxpool is None else self.maxpool(h)


def _stage(
    block: str, c_in: int, planes: int, n: int, stride: int, stride_in_1x1: bool
) -> nn.Sequential:
    out = planes * EXPANSION[block]
    if block == "basic":
        return nn.Sequential(
            BasicBlock(c_in, planes, stride), *[BasicBlock(out, planes) for _ in range(n - 1)]
        )
    first = Bottleneck(c_in, planes, stride, stride_in_1x1)
    return nn.Sequential(first, *[Bottleneck(out, planes) for _ in range(n - 1)])


class ResNetEncoder(Encoder):
    """ResNet-18/34/50: ``stem`` -> ``layer1``..``layer4`` -> ``pool`` [-> ``prediction``].

    Input ``input``: [B, in_channels, H, W] float32, any H, W. Outputs: ``prediction``
    [B, num_classes] (primary, when ``num_classes`` is set), ``pooled`` [B, C] (global
    average of the last stage, C = ``feature_dim`` = 8 * width * expansion: 512 for 18/34,
    2048 for 50), ``hidden`` [B, h * w, C] (the last stage's cells, row-major) and
    ``features`` [B, C, h, w], the same map (h, w = H/32, W/32; with ``small_input``: /8).

    ``small_input`` swaps the 7x7/2 conv + max-pool stem for a 3x3/1 conv (for 8x8 to 32x32
    images). ``width`` is the stem's channel count (64 in the standard nets; stages use
    width x 1, 2, 4, 8). ``stride_in_1x1`` (ResNet-50 only) puts a Bottleneck's stride on its
    first 1x1 conv, as ResNet v1 and Hugging Face configs with ``downsample_in_bottleneck``
    do: their files load either way (same shapes), so set it from the model's config.
    ``pretrained`` loads a torchvision / paddle.vision / Hugging Face file right after
    ``build()`` (see `paddlecraft.encoders.pretrained`), with ``pretrained_strict``.
    """

    default_watch = ("prediction", "pooled")
    #: file naming whose Linear weights are already [in, out]
    paddle_layout_sources = ("paddle",)

    def __init__(
        self,
        scope: str,
        depth: int = 18,
        num_classes: int | None = 1000,
        in_channels: int = 3,
        small_input: bool = False,
        width: int = 64,
        stride_in_1x1: bool = False,
        pretrained: str | None = None,
        pretrained_strict: bool = True,
    ) -> None:
        super().__init__(scope)
        if depth not in ARCHS:
            raise ValueError(
                f"ResNetEncoder({scope!r}): depth must be one of {sorted(ARCHS)}, got {depth!r}"
            )
        block, counts = ARCHS[depth]
        self.depth, self.block, self.num_classes = depth, block, num_classes
        self.in_channels, self.small_input, self.width = in_channels, small_input, width
        self.pretrained, self.pretrained_strict = pretrained, pretrained_strict
        self.declare(
            "stem",
            LayerSpec(
                lambda: Stem(in_channels, width, small_input),
                ("resnet_stem", in_channels, width, small_input),
            ),
        )
        c = width
        for i, n in enumerate(counts, start=1):
            planes, stride = width * 2 ** (i - 1), 1 if i == 1 else 2
            self.declare(
                f"layer{i}",
                LayerSpec(
                    lambda c=c, p=planes, n=n, s=stride: _stage(block, c, p, n, s, stride_in_1x1),
                    ("resnet_stage", block, c, planes, n, stride, stride_in_1x1),
                ),
            )
            c = planes * EXPANSION[block]
        self.feature_dim = c
        self.declare("pool", LayerSpec(lambda: nn.AdaptiveAvgPool2D(1), ("avgpool",)))
        if num_classes is not None:
            self.declare(
                "prediction",
                LayerSpec(lambda: nn.Linear(c, num_classes), ("linear", c, num_classes)),
            )
        self.declare_input("input", InputSpec((in_channels, None, None)))
        names = ("pooled", "hidden", "features")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return f"Give images as [B, {self.in_channels}, H, W] float32 (channels first), or set in_channels."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        h = self.layers["stem"](x)  # [B, width, H/4, W/4] ([B, width, H, W] small_input)
        for i in range(1, 5):
            h = self.layers[f"layer{i}"](h)  # [B, C_i, ., .]
        pooled = paddle.flatten(self.layers["pool"](h), 1)  # [B, C]
        hidden = paddle.flatten(h, 2).transpose([0, 2, 1])  # [B, h*w, C]
        out = {"pooled": pooled, "hidden": hidden, "features": h}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](pooled)  # [B, num_classes]
        return out

    # ------------------------------------------------------------------ pretrained files
    @classmethod
    def detect_source(cls, keys: list[str]) -> str:
        """``hf_resnet`` (transformers ResNetModel / ResNetForImageClassification), ``paddle``
        (paddle.vision: BN ``_mean``) or ``torchvision`` (BN ``running_mean``)."""
        if any("embedder.embedder." in k or ".stages." in k for k in keys):
            return "hf_resnet"
        if any(k.endswith("._mean") or k.endswith("._variance") for k in keys):
            return "paddle"
        if any(k.endswith(".running_mean") for k in keys):
            return "torchvision"
        raise PretrainedLoadError(
            f"cannot tell which ResNet naming these keys use ({sorted(keys)[:4]} ...): expected "
            "torchvision/paddle.vision (conv1, layer1.0.conv1, fc) or Hugging Face "
            "(embedder.embedder.convolution, encoder.stages.0.layers.0...); pass source="
        )

    def pretrained_key(self, key: str, source: str) -> str | None:
        """The ``state_dict()`` key that external ``key`` fills (None: no place for it)."""
        if source in ("torchvision", "paddle"):
            return rename_prefix(
                key,
                [
                    ("conv1.", "layers.stem.conv1."),
                    ("bn1.", "layers.stem.bn1."),
                    *((f"layer{i}.", f"layers.layer{i}.") for i in range(1, 5)),
                    ("fc.", "layers.prediction."),
                ],
            )
        if source == "hf_resnet":
            return _hf_resnet_key(key.removeprefix("resnet."))
        raise PretrainedLoadError(
            f"ResNetEncoder has no key map for source {source!r}; use torchvision, paddle or hf_resnet"
        )


def _hf_resnet_key(key: str) -> str | None:
    """Hugging Face ResNet names -> ours; its conv layers are numbered, ours are conv1..3."""
    if key.startswith("embedder.embedder."):
        rest = key.removeprefix("embedder.embedder.")
        return "layers.stem." + rest.replace("convolution.", "conv1.").replace(
            "normalization.", "bn1."
        )
    if key.startswith("classifier.1."):
        return "layers.prediction." + key.removeprefix("classifier.1.")
    parts = key.split(".")
    # encoder.stages.S.layers.M.(shortcut.(convolution|normalization) | layer.J.(convolution|normalization)).P
    if len(parts) < 7 or parts[:2] != ["encoder", "stages"] or parts[3] != "layers":
        return None
    stage, block, rest = int(parts[2]) + 1, parts[4], parts[5:]
    kind = {"convolution": "conv", "normalization": "bn"}
    if rest[0] == "shortcut" and rest[1] in kind:
        idx = "0" if rest[1] == "convolution" else "1"
        return f"layers.layer{stage}.{block}.downsample.{idx}.{'.'.join(rest[2:])}"
    if rest[0] == "layer" and len(rest) >= 4 and rest[2] in kind:
        name = f"{kind[rest[2]]}{int(rest[1]) + 1}"
        return f"layers.layer{stage}.{block}.{name}.{'.'.join(rest[3:])}"
    return None
