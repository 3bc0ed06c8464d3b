"""ImageDecoder: a DCGAN-style generator, latent (+ class embedding) -> image in [0, 1]."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, Tensor

NORMS = ("batch", "none")  #: ImageDecoder ``norm``: BatchNorm2D after each layer, or none


class Project(nn.Layer):
    """Linear -> reshape to [B, C, s0, s0] -> BatchNorm2D -> ReLU (``fc``, ``bn``); with
    ``norm="none"`` the linear has a bias and there is no ``bn``."""

    def __init__(self, in_features: int, channels: int, size: int, norm: str = "batch") -> None:
        super().__init__()
        self.channels, self.size = channels, size
        batch = norm == "batch"
        self.fc = nn.Linear(in_features, channels * size * size, bias_attr=False if batch else None)
        self.bn = nn.BatchNorm2D(channels) if batch else None

    def forward(self, z: Tensor) -> Tensor:
        h = self.fc(z).reshape([-1, self.channels, self.size, self.size])  # [B, C, s0, s0]
        return F.relu(h if self.bn is None else self.bn(h))


class UpBlock(nn.Layer):
    """Conv2DTranspose (kernel 4, stride 2, padding 1: doubles H and W) -> BN -> ReLU (no BN
    and a biased deconvolution with ``norm="none"``)."""

    def __init__(self, c_in: int, c_out: int, norm: str = "batch") -> None:
        super().__init__()
        batch = norm == "batch"
        self.deconv = nn.Conv2DTranspose(
            c_in, c_out, 4, stride=2, padding=1, bias_attr=False if batch else None
        )
        self.bn = nn.BatchNorm2D(c_out) if batch else None

    def forward(self, x: Tensor) -> Tensor:
        h = self.deconv(x)  # [B, c_out, 2H, 2W]
        return F.relu(h if self.bn is None else self.bn(h))


def start_size(image_size: int) -> tuple[int, int]:
    """``(s0, upsamples)`` with ``s0 * 2**upsamples == image_size``.

    Halves while the size is even and the half is at least 4, and at least twice when
    possible: 8 -> (2, 2), 16 -> (4, 2), 28 -> (7, 2), 32 -> (4, 3), 64 -> (4, 4).
    """
    size, ups = image_size, 0
    while size % 2 == 0 and (size // 2 >= 4 or (ups < 2 and size // 2 >= 2)):
        size, ups = size // 2, ups + 1
    return size, ups


class ImageDecoder(Encoder):
    """Images [B, C, H, W] in [0, 1] from latent vectors (and class labels); `sample` draws.

    Logical layers: ``label_embedding`` (only with ``num_classes``: ``nn.Embedding``
    concatenated to ``z``), ``project`` (linear to ``C0 x s0 x s0`` + BN + ReLU),
    ``upsample_1`` .. ``upsample_n`` (Conv2DTranspose k4 s2 p1 + BN + ReLU, each doubling
    H and W and halving the channels down to ``base_channels``; ``norm="none"`` leaves the
    BNs out, e.g. for data-parallel runs, where each process's BN sees only its own rows) and ``to_image``
    (conv3x3 to ``out_channels``, then a sigmoid). ``s0`` and ``n`` come from
    `start_size` (28 -> 7 x 7 and two upsamples; 64 -> 4 x 4 and four);
    ``C0 = base_channels * 2**(n - 1)``.

    Inputs: ``z`` [B, latent_dim] float and, when ``num_classes`` is set, ``labels`` [B]
    int64. Output: ``image`` [B, out_channels, image_size, image_size] (primary).
    """

    default_watch = ("image",)
    label_feed = False  # its class ids are the ``labels`` input, not a training target

    def __init__(
        self,
        scope: str,
        latent_dim: int = 64,
        out_channels: int = 1,
        image_size: int = 28,
        base_channels: int = 64,
        num_classes: int | None = None,
        embed_dim: int = 16,
        norm: str = "batch",
    ) -> None:
        super().__init__(scope)
        if norm not in NORMS:
            raise ValueError(f"ImageDecoder({scope!r}): norm must be one of {NORMS}, got {norm!r}")
        s0, ups = start_size(image_size)
        if ups < 1:
            raise ValueError(
                f"ImageDecoder({scope!r}): image_size {image_size} cannot be reached by doubling "
                "from a start size of at least 2; use an even size such as 8, 16, 28, 32 or 64"
            )
        self.latent_dim, self.out_channels, self.image_size = latent_dim, out_channels, image_size
        self.base_channels, self.num_classes, self.embed_dim = base_channels, num_classes, embed_dim
        self.start_size, self.n_upsample, self.norm = s0, ups, norm
        z_in = latent_dim
        if num_classes is not None:
            self.declare("label_embedding", _embedding(num_classes, embed_dim))
            z_in += embed_dim
        c = base_channels * 2 ** (ups - 1)
        self.declare("project", _project(z_in, c, s0, norm))
        for i in range(1, ups + 1):
            c_out = max(base_channels, c // 2)
            self.declare(f"upsample_{i}", _up(c, c_out, norm))
            c = c_out
        self.declare("to_image", _to_image(c, out_channels))
        dtype = paddle.get_default_dtype()
        self.declare_input("z", InputSpec((latent_dim,), dtypes=(dtype,)))
        if num_classes is not None:
            self.declare_input("labels", InputSpec((), dtypes=("int64", "int32")))
        self.declare_outputs("image")
        self._dtype = dtype

    @property
    def conditional(self) -> bool:
        """Whether the decoder takes class labels."""
        return self.num_classes is not None

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        if name == "labels":
            return (
                f"Give one int64 class id in [0, {self.num_classes}) per latent vector, shape [B]."
            )
        return f"Give latent vectors as [B, {self.latent_dim}] {spec.dtypes[0]}."

    def _check_inputs(self, inputs: tuple) -> list[Tensor]:
        xs = super()._check_inputs(inputs)
        if self.conditional and paddle.in_dynamic_mode() and isinstance(xs[1], Tensor):
            ids = xs[1].numpy()
            if ids.size and (ids.min() < 0 or ids.max() >= self.num_classes):
                raise EncoderInputError(
                    f"{self._who()} input 'labels': class ids must lie in "
                    f"[0, {self.num_classes}), got {ids.min()}..{ids.max()}"
                )
        return xs

    def _forward(self, z: Tensor, labels: Tensor | None = None) -> dict[str, Tensor]:
        h = z  # [B, latent_dim]
        if self.conditional:
            emb = self.layers["label_embedding"](labels.reshape([-1]))  # [B, embed_dim]
            h = paddle.concat([z, emb], axis=1)  # [B, latent_dim + embed_dim]
        h = self.layers["project"](h)  # [B, C0, s0, s0]
        for i in range(1, self.n_upsample + 1):
            h = self.layers[f"upsample_{i}"](h)  # [B, C_i, s0 * 2**i, s0 * 2**i]
        return {"image": F.sigmoid(self.layers["to_image"](h))}  # [B, C, H, W] in [0, 1]

    def sample(
        self,
        n: int,
        labels: int | Sequence[int] | np.ndarray | None = None,
        seed: int | None = None,
    ) -> np.ndarray:
        """Draw ``n`` images: float32 [n, C, H, W] in [0, 1] (eval mode, no gradient).

        ``z`` ~ N(0, 1) from ``np.random.default_rng(seed)`` (the global RNGs are left
        alone), or from Paddle's global RNG when ``seed`` is None. ``labels`` (conditional
        decoders only): one class id for all, one per image, or None for 0, 1, 2, ...
        cycling through the classes.
        """
        if not paddle.in_dynamic_mode():
            raise RuntimeError(f"{self._who()}.sample() runs in dynamic mode only")
        if not self.built:
            self.build()
        if seed is None:
            z = paddle.randn([n, self.latent_dim], dtype=self._dtype)
        else:
            rng = np.random.default_rng(seed)
            z = paddle.to_tensor(rng.standard_normal((n, self.latent_dim)).astype(self._dtype))
        inputs = [z]
        if not self.conditional:
            if labels is not None:
                raise ValueError(f"{self._who()} is unconditional: sample() takes no labels")
        else:
            ids = np.arange(n) % self.num_classes if labels is None else np.asarray(labels)
            ids = np.broadcast_to(ids, (n,)).astype("int64")
            if ids.min() < 0 or ids.max() >= self.num_classes:
                raise ValueError(
                    f"{self._who()}: labels must lie in [0, {self.num_classes}), got "
                    f"{ids.min()}..{ids.max()}"
                )
            inputs.append(paddle.to_tensor(ids))
        was_training = self.training
        self.eval()
        try:
            with paddle.no_grad():
                image = self.forward(*inputs)  # [n, C, H, W]
        finally:
            if was_training:
                self.train()
        return image.numpy().astype(np.float32)


# Spec helpers: each binds its sizes now (a lambda in a loop would see the last ones).
def _embedding(num_classes: int, embed_dim: int) -> LayerSpec:
    return LayerSpec(
        lambda: nn.Embedding(num_classes, embed_dim), ("embedding", num_classes, embed_dim)
    )


def _project(in_features: int, channels: int, size: int, norm: str) -> LayerSpec:
    extra = () if norm == "batch" else (norm,)  # the default keeps its saved signature
    return LayerSpec(
        lambda: Project(in_features, channels, size, norm),
        ("project", in_features, channels, size, *extra),
    )


def _up(c_in: int, c_out: int, norm: str) -> LayerSpec:
    extra = () if norm == "batch" else (norm,)
    return LayerSpec(lambda: UpBlock(c_in, c_out, norm), ("upsample", c_in, c_out, *extra))


def _to_image(c_in: int, c_out: int) -> LayerSpec:
    return LayerSpec(lambda: nn.Conv2D(c_in, c_out, 3, padding=1), ("conv3x3", c_in, c_out))
