"""ViTEncoder: the Vision Transformer (ViT/DeiT layout) that loads Hugging Face and timm weights.

Pre-norm blocks (LayerNorm -> multi-head self-attention -> residual, LayerNorm -> MLP with
exact (erf) GELU -> residual), a learned class token and position embedding, a final
LayerNorm; the pooled output is the class token after it. This is ``timm``'s
``vit_*_patch16_224`` and Hugging Face's ``ViTModel`` / ``ViTForImageClassification``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from paddlecraft.paddle_private import set_layer_norm_epsilon

from .base import Encoder, InputSpec, LayerSpec, Tensor
from .pretrained import PretrainedLoadError, rename_prefix

#: named sizes: (dim, depth, heads)
SIZES: dict[str, tuple[int, int, int]] = {"tiny": (192, 12, 3), "small": (384, 12, 6)}
#: LayerNorm epsilon each reference uses (HF ViTConfig.layer_norm_eps, timm's partial(LayerNorm, eps=1e-6))
REFERENCE_EPS = {"hf_vit": 1e-12, "timm": 1e-6}

_trunc = nn.initializer.TruncatedNormal(std=0.02)


def auto_patch_size(height: int, width: int) -> int:
    """The largest common divisor of both sides up to 16 leaving >= 4 patches per side (else 1)."""
    fits = [p for p in range(16, 0, -1) if not height % p and not width % p]
    return next((p for p in fits if min(height, width) // p >= 4), 1)


class PatchEmbed(nn.Layer):
    """Conv patchify (``proj``) + ``cls_token`` [1, 1, D] + ``pos_embed`` [1, N + 1, D]."""

    def __init__(self, in_channels: int, dim: int, patch_size: int, num_patches: int) -> None:
        super().__init__()
        self.proj = nn.Conv2D(in_channels, dim, patch_size, stride=patch_size)
        self.cls_token = self.create_parameter([1, 1, dim], default_initializer=_trunc)
        self.pos_embed = self.create_parameter(
            [1, num_patches + 1, dim], default_initializer=_trunc
        )

    def forward(self, x: Tensor) -> Tensor:
        h = self.proj(x).flatten(2).transpose([0, 2, 1])  # [B, N, D]
        # zeros_like + broadcast, not expand([h.shape[0], ...]): a traced program's batch is
        # -1, which expand reads as a size and concat then refuses
        cls = paddle.zeros_like(h[:, :1]) + self.cls_token  # [B, 1, D]
        return paddle.concat([cls, h], axis=1) + self.pos_embed  # [B, N + 1, D]


def _linear(n_in: int, n_out: int) -> nn.Linear:
    return nn.Linear(
        n_in,
        n_out,
        weight_attr=paddle.ParamAttr(initializer=_trunc),
        bias_attr=paddle.ParamAttr(initializer=nn.initializer.Constant(0.0)),
    )


class Attention(nn.Layer):
    """Multi-head self-attention with separate ``q``, ``k``, ``v`` Linears and output ``proj``."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"ViTEncoder: dim {dim} must be divisible by heads {heads}")
        self.heads, self.head_dim = heads, dim // heads
        self.q, self.k, self.v = _linear(dim, dim), _linear(dim, dim), _linear(dim, dim)
        self.proj = _linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape

        def split(h: Tensor) -> Tensor:
            return h.reshape([b, t, self.heads, self.head_dim]).transpose(
                [0, 2, 1, 3]
            )  # [B, H, T, hd]

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = F.softmax(
            q @ k.transpose([0, 1, 3, 2]) / math.sqrt(self.head_dim), axis=-1
        )  # [B, H, T, T]
        h = (att @ v).transpose([0, 2, 1, 3]).reshape([b, t, d])  # [B, T, D]
        return self.proj(h)


class Mlp(nn.Layer):
    """``fc1`` -> exact GELU -> ``fc2``."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = _linear(dim, hidden), _linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate=False))


class Block(nn.Layer):
    """Pre-norm transformer block: ``norm1``, ``attn``, ``norm2``, ``mlp`` (timm names)."""

    def __init__(self, dim: int, heads: int, mlp_hidden: int, eps: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, epsilon=eps)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, epsilon=eps)
        self.mlp = Mlp(dim, mlp_hidden)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))  # [B, T, D]
        return x + self.mlp(self.norm2(x))


class ViTEncoder(Encoder):
    """Vision Transformer: ``patch_embed`` -> ``block_0``..``block_{depth-1}`` -> ``norm`` [-> ``prediction``].

    Input ``input``: [B, in_channels, H, W] float32 (``image_size`` an int or (H, W)).
    Outputs: ``prediction`` [B, num_classes] (primary, when ``num_classes`` is set),
    ``pooled`` [B, dim] (class token after ``norm``) and ``hidden`` [B, N + 1, dim] (all
    tokens after ``norm``, class token first); ``feature_dim = dim``. ``patch_size`` None
    picks the largest common divisor of H and W up to 16 that leaves at least 4 patches
    per side (2 for 8x8 digits, 1 for a 3x3 board; 1 when nothing else divides). ``size="tiny"|"small"`` sets (dim, depth, heads) to (192, 12, 3) / (384, 12, 6);
    with ``size=None`` each of them defaults to the tiny value.

    ``eps`` is the LayerNorm epsilon; None means 1e-6 (timm), switched to the reference's
    value when a file is loaded (Hugging Face ViT: 1e-12), so outputs match the source.
    ``pretrained`` loads a Hugging Face or timm file right after ``build()``.
    """

    default_watch = ("prediction", "pooled")

    def __init__(
        self,
        scope: str,
        image_size: int | Sequence[int] = 224,
        patch_size: int | None = None,
        in_channels: int = 3,
        dim: int | None = None,
        depth: int | None = None,
        heads: int | None = None,
        mlp_ratio: float = 4.0,
        num_classes: int | None = None,
        size: str | None = None,
        eps: float | None = None,
        pretrained: str | None = None,
        pretrained_strict: bool = True,
    ) -> None:
        super().__init__(scope)
        if size is not None and size not in SIZES:
            raise ValueError(
                f"ViTEncoder({scope!r}): size must be one of {sorted(SIZES)} or None, got {size!r}"
            )
        given = {"dim": dim, "depth": depth, "heads": heads}
        for (key, value), default in zip(given.items(), SIZES[size or "tiny"]):
            if value is None:
                given[key] = default
            elif size is not None and value != default:
                raise ValueError(
                    f"ViTEncoder({scope!r}): {key}={value} contradicts size={size!r} "
                    f"({key}={default}); set size=None to choose dim/depth/heads yourself"
                )
        dim, depth, heads = given["dim"], given["depth"], given["heads"]
        hw = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        if patch_size is None:
            patch_size = auto_patch_size(*hw)
        if hw[0] % patch_size or hw[1] % patch_size:
            raise ValueError(
                f"ViTEncoder({scope!r}): patch_size={patch_size} does not divide the "
                f"{hw[0]}x{hw[1]} input; set patch_size to a common divisor of both sides "
                f"(or null: {auto_patch_size(*hw)} here)"
            )
        self.image_size = image_size if isinstance(image_size, int) else hw
        self.patch_size, self.in_channels = patch_size, in_channels
        self.dim, self.depth, self.heads, self.num_classes = dim, depth, heads, num_classes
        self.feature_dim = dim
        self.eps_setting = eps
        self.pretrained, self.pretrained_strict = pretrained, pretrained_strict
        n = (hw[0] // patch_size) * (hw[1] // patch_size)
        hidden = int(dim * mlp_ratio)
        e = 1e-6 if eps is None else eps
        self.declare(
            "patch_embed",
            LayerSpec(
                lambda: PatchEmbed(in_channels, dim, patch_size, n),
                ("vit_patch_embed", in_channels, dim, patch_size, n),
            ),
        )
        block_spec = ("vit_block", dim, heads, hidden)
        for i in range(depth):
            self.declare(f"block_{i}", LayerSpec(lambda: Block(dim, heads, hidden, e), block_spec))
        self.declare("norm", LayerSpec(lambda: nn.LayerNorm(dim, epsilon=e), ("layer_norm", dim)))
        if num_classes is not None:
            self.declare(
                "prediction",
                LayerSpec(lambda: _linear(dim, num_classes), ("linear", dim, num_classes)),
            )
        self.declare_input("input", InputSpec((in_channels, *hw)))
        names = ("pooled", "hidden")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        c, (h, w) = self.in_channels, self.input_specs["input"].shape[1:]
        return f"Give images as [B, {c}, {h}, {w}] float32 (resize them), or set image_size/in_channels."

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        h = self.layers["patch_embed"](x)  # [B, N + 1, D]
        for i in range(self.depth):
            h = self.layers[f"block_{i}"](h)
        tokens = self.layers["norm"](h)  # [B, N + 1, D]
        out = {"pooled": tokens[:, 0], "hidden": tokens}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](out["pooled"])  # [B, num_classes]
        return out

    def set_eps(self, eps: float) -> None:
        """Set the epsilon of every LayerNorm (e.g. 1e-12 to match Hugging Face ViT)."""
        for layer in self.sublayers():
            if isinstance(layer, nn.LayerNorm):
                set_layer_norm_epsilon(layer, eps)

    # ------------------------------------------------------------------ pretrained files
    @classmethod
    def detect_source(cls, keys: list[str]) -> str:
        """``hf_vit`` (transformers ViTModel / ViTForImageClassification) or ``timm``."""
        if any(k.startswith(("vit.", "embeddings.")) for k in keys):
            return "hf_vit"
        if any(k.startswith("blocks.") for k in keys) and "cls_token" in keys:
            return "timm"
        raise PretrainedLoadError(
            f"cannot tell which ViT naming these keys use ({sorted(keys)[:4]} ...): expected "
            "Hugging Face (vit.embeddings..., vit.encoder.layer.0...) or timm (patch_embed.proj, "
            "blocks.0.attn.qkv, ...); pass source="
        )

    def convert_pretrained(self, arrays: dict[str, np.ndarray], source: str) -> dict:
        """Split timm's fused ``attn.qkv`` into q/k/v; match the source's LayerNorm epsilon."""
        if self.eps_setting is None and source in REFERENCE_EPS:
            self.set_eps(REFERENCE_EPS[source])
        if source != "timm":
            return arrays
        out = {}
        for key, value in arrays.items():
            m = re.fullmatch(r"(blocks\.\d+\.attn\.)qkv\.(weight|bias)", key)
            if m is None:
                out[key] = value
                continue
            for part, chunk in zip("qkv", np.split(value, 3, axis=0)):  # torch [3D, ...]
                out[f"{m.group(1)}{part}.{m.group(2)}"] = chunk
        return out

    def pretrained_key(self, key: str, source: str) -> str | None:
        """The ``state_dict()`` key that external ``key`` fills (None: no place for it)."""
        if source == "timm":
            m = re.fullmatch(r"blocks\.(\d+)\.(.*)", key)
            if m:
                return f"layers.block_{m.group(1)}.{m.group(2)}"
            if key in ("cls_token", "pos_embed"):
                return f"layers.patch_embed.{key}"
            return rename_prefix(
                key,
                [
                    ("patch_embed.proj.", "layers.patch_embed.proj."),
                    ("norm.", "layers.norm."),
                    ("head.", "layers.prediction."),
                ],
            )
        if source == "hf_vit":
            return _hf_vit_key(key.removeprefix("vit."))
        raise PretrainedLoadError(
            f"ViTEncoder has no key map for source {source!r}; use hf_vit or timm"
        )


#: Hugging Face ViT layer names (hub files: encoder.layer.N.attention.attention.query;
#: transformers>=5 in memory: layers.N.attention.q_proj) -> ours
_HF_BLOCK = [
    ("layernorm_before.", "norm1."),
    ("layernorm_after.", "norm2."),
    ("attention.attention.query.", "attn.q."),
    ("attention.attention.key.", "attn.k."),
    ("attention.attention.value.", "attn.v."),
    ("attention.output.dense.", "attn.proj."),
    ("intermediate.dense.", "mlp.fc1."),
    ("output.dense.", "mlp.fc2."),
    ("attention.q_proj.", "attn.q."),
    ("attention.k_proj.", "attn.k."),
    ("attention.v_proj.", "attn.v."),
    ("attention.o_proj.", "attn.proj."),
    ("mlp.fc1.", "mlp.fc1."),
    ("mlp.fc2.", "mlp.fc2."),
]


def _hf_vit_key(key: str) -> str | None:
    m = re.fullmatch(r"(?:encoder\.layer|layers)\.(\d+)\.(.*)", key)
    if m:
        rest = rename_prefix(m.group(2), _HF_BLOCK)
        return None if rest is None else f"layers.block_{m.group(1)}.{rest}"
    return {
        "embeddings.cls_token": "layers.patch_embed.cls_token",
        "embeddings.position_embeddings": "layers.patch_embed.pos_embed",
    }.get(key) or rename_prefix(
        key,
        [
            ("embeddings.patch_embeddings.projection.", "layers.patch_embed.proj."),
            ("layernorm.", "layers.norm."),
            ("classifier.", "layers.prediction."),
        ],
    )
