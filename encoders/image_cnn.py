"""ImageCNNEncoder: a small conv net (LeNet-like, small ResNet, or a DCGAN discriminator body).

Decisions:

- ``arch="dcgan"`` is the GAN discriminator's body (conv k4 s2 + LeakyReLU, Radford et
  al. 2016). With ``norm="none"`` (``conf/encoder/dcgan.yaml``) it is twice
  differentiable, as WGAN-GP's gradient penalty needs, and has no running statistics.
- ``numpy_forward()`` (what a search's leaf evaluations use, `Policy.frozen_evaluator`)
  computes the same features in NumPy: channels last inside (one copy of the windows and
  one matmul per convolution, the ``embedding`` weight's rows permuted once to match
  Paddle's channels-first flatten), batch norm folded into its convolution from the
  running statistics (the eval-mode forward, as a search's `Policy.priors_and_values`
  runs). Instance norm or any replaced or adapted layer: ``None`` (Paddle's forward then).
- The features are flattened with ``reshape``, not ``paddle.flatten``: Paddle 3.3.1 has
  no double gradient for ``flatten`` (nor for ``layer_norm``, ``group_norm`` or
  ``gelu``). Measured on Paddle 3.3.1 CPU: the double gradient of conv2d + batch/instance
  norm + (leaky) ReLU matches central finite differences in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import paddle.nn.functional as F
from numpy.lib.stride_tricks import sliding_window_view
from paddle import nn

from paddlecraft.paddle_private import batch_norm_running, conv2d_geometry

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

    def numpy_forward(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """A NumPy copy of ``forward_all(x)["pooled"]`` with the weights as they are now,
        for inference that calls the network many times on small batches while the weights
        stay fixed (a search's leaf evaluations): [B, C, H, W] float32 -> [B, embedding_dim]
        float32, the eval-mode forward's values (batch norm from its running statistics,
        whatever the mode now) to float32 rounding without Paddle's per-operation cost
        (``python bench/search_bench.py``, ``cnn_frozen_speedup``). ``None`` when a block
        has instance norm (statistics from each input) or a layer is not the one this class
        made (replaced or adapted): callers then use the Paddle forward. Later changes to
        the weights (and running statistics) do not reach the copy."""
        blocks = [_numpy_block(self.layers[f"conv_{i}"]) for i in range(1, self._n_blocks + 1)]
        emb = self.layers["embedding"]
        if any(b is None for b in blocks) or type(emb) is not nn.Linear or emb.bias is None:
            return None
        c, h, w = self.feature_shape
        # rows in Paddle's flatten order (c, h, w) -> the channels-last order (h, w, c)
        ew = np.array(emb.weight.numpy()).reshape(c, h, w, -1).transpose(1, 2, 0, 3)
        ew, eb = np.ascontiguousarray(ew.reshape(c * h * w, -1)), np.array(emb.bias.numpy())
        act = _numpy_activation(self.slope if self.arch == "dcgan" else 0.0)
        steps = [b for b in blocks if b is not None]  # all of them (checked above)

        def pooled(x: np.ndarray) -> np.ndarray:
            a = np.asarray(x, np.float32).transpose(0, 2, 3, 1)  # [B, H, W, C]
            for step in steps:
                a = step(a)  # [B, H_i, W_i, c_i]
            return act(a.reshape(len(a), -1) @ ew + eb)  # [B, embedding_dim]

        return pooled


NumpyStep = Callable[[np.ndarray], np.ndarray]  # [B, H, W, C] -> [B, H', W', C'] float32


def _numpy_activation(slope: float) -> Callable[[np.ndarray], np.ndarray]:
    """ReLU (``slope`` 0) or LeakyReLU(``slope``), elementwise in float32."""
    if slope == 0.0:
        return lambda x: np.maximum(x, np.float32(0.0))
    s = np.float32(slope)
    return lambda x: np.where(x > 0, x, x * s)


def _numpy_conv(conv: nn.Layer, norm: nn.Layer | None) -> NumpyStep | None:
    """A channels-last NumPy copy of ``conv`` followed by ``norm`` (batch norm in eval mode,
    folded into the weights), or ``None`` where this copy would not be the same function."""
    geometry = conv2d_geometry(conv) if type(conv) is nn.Conv2D else None
    if geometry is None:
        return None
    k, stride, pad = geometry
    weight = np.array(conv.weight.numpy(), np.float32)  # [O, C, k, k]
    out = weight.shape[0]
    bias = np.zeros(out, np.float32) if conv.bias is None else np.array(conv.bias.numpy())
    if norm is not None:
        running = batch_norm_running(norm) if type(norm) is nn.BatchNorm2D else None
        if running is None:
            return None  # instance norm: statistics from each input
        mean, var = (np.array(t.numpy(), np.float64) for t in running[:2])
        scale = np.array(norm.weight.numpy(), np.float64) / np.sqrt(var + running[2])
        weight = (weight * scale[:, None, None, None]).astype(np.float32)
        shift = np.array(norm.bias.numpy(), np.float64) - mean * scale
        bias = (bias * scale + shift).astype(np.float32)
    # [k * k * C, O]: rows in the windows' (kh, kw, C) order, channels innermost, so the
    # windows are copied in runs of C contiguous values (twice as fast as (C, kh, kw))
    w_mat = np.ascontiguousarray(weight.transpose(0, 2, 3, 1).reshape(out, -1).T)

    def step(a: np.ndarray) -> np.ndarray:
        a = np.pad(a, ((0, 0), (pad, pad), (pad, pad), (0, 0)))  # [B, H + 2p, W + 2p, C]
        win = sliding_window_view(a, (k, k), axis=(1, 2))[:, ::stride, ::stride]
        b, h, w = win.shape[:3]  # win: [B, H', W', C, k, k] -> [B, H', W', k, k, C]
        cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(b * h * w, -1)  # [B H' W', k k C]
        return (cols @ w_mat + bias).reshape(b, h, w, out)

    return step


def _numpy_block(block: nn.Layer) -> NumpyStep | None:
    """A NumPy copy of one of this module's blocks (channels last), or ``None``."""
    relu = _numpy_activation(0.0)
    if type(block) in (ConvBlock, DCGANBlock):
        conv = _numpy_conv(block.conv, block.bn if type(block) is ConvBlock else block.norm)
        act = relu if type(block) is ConvBlock else _numpy_activation(block.slope)
        return None if conv is None else (lambda a: act(conv(a)))
    if type(block) is ResBlock:
        first, second = _numpy_conv(block.conv1, block.bn1), _numpy_conv(block.conv2, block.bn2)
        proj = None if block.proj is None else _numpy_conv(block.proj, None)
        if first is None or second is None or (block.proj is not None and proj is None):
            return None

        def residual(a: np.ndarray) -> np.ndarray:
            h = second(relu(first(a)))
            return relu(h + (proj(a) if proj is not None else a))

        return residual
    return None
