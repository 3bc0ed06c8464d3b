"""CLIPVisionEncoder: CLIP's ViT image tower, loading Hugging Face CLIPModel and open_clip files.

Conv patchify without bias, a class token, learned positions, ``pre_layernorm``, pre-norm
blocks with quick GELU, ``post_layernorm`` on the class token and ``visual_projection``
(no bias) into the joint image-text space. This is ``transformers.CLIPVisionModelWithProjection``
and open_clip's ``VisionTransformer``; the key maps are in `paddlecraft.encoders.clip_keys`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import paddle
from paddle import nn

from .attention import PreNormBlock
from .base import Encoder, InputSpec, LayerSpec, Tensor
from .clip_keys import (
    HF_CLIP,
    OPEN_CLIP,
    OPEN_CLIP_EXTRA,
    block_key,
    check_projection,
    detect_clip_source,
    split_in_proj,
)
from .image_mlp import dense
from .pretrained import PretrainedLoadError, rename_prefix
from .vit import auto_patch_size

log = logging.getLogger(__name__)

#: named sizes: (width, depth, heads, projection_dim); ``base`` is ViT-B/32 and B/16
CLIP_VISION_SIZES: dict[str, tuple[int, int, int, int]] = {
    "tiny": (64, 2, 2, 64),
    "base": (768, 12, 12, 512),
    "large": (1024, 24, 16, 768),
}
#: the per-channel pixel mean and std CLIP was trained with (RGB, images in [0, 1])
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def resolve_size(
    who: str, table: dict[str, tuple[int, ...]], size: str | None, given: Sequence[int | None]
) -> tuple[int, ...]:
    """(width, depth, heads, projection_dim): the ``size`` row with explicit values winning."""
    if size is not None and size not in table:
        raise ValueError(f"{who}: size must be one of {sorted(table)} or None, got {size!r}")
    row = table[size] if size is not None else (None,) * len(given)
    out = tuple(g if g is not None else r for g, r in zip(given, row))
    if any(v is None for v in out):
        raise ValueError(
            f"{who}: give size= (one of {sorted(table)}) or all of width, depth, heads and "
            "projection_dim"
        )
    if out[0] % out[2]:
        raise ValueError(f"{who}: width={out[0]} must be divisible by heads={out[2]}")
    return out


class CLIPVisionEmbeddings(nn.Layer):
    """``patch_embedding`` (conv, no bias) + ``class_embedding`` [D] + ``position_embedding`` [N + 1, D]."""

    def __init__(self, in_channels: int, width: int, patch_size: int, num_patches: int) -> None:
        super().__init__()
        self.patch_embedding = nn.Conv2D(
            in_channels, width, patch_size, stride=patch_size, bias_attr=False
        )
        std = nn.initializer.Normal(std=width**-0.5)
        self.class_embedding = self.create_parameter([width], default_initializer=std)
        self.position_embedding = nn.Embedding(
            num_patches + 1, width, weight_attr=paddle.ParamAttr(initializer=std)
        )

    def forward(self, x: Tensor) -> Tensor:
        h = self.patch_embedding(x).flatten(2).transpose([0, 2, 1])  # [B, N, D]
        # broadcast onto zeros: the batch size may be unknown (-1) in a traced program
        cls = paddle.zeros_like(h[:, :1]) + self.class_embedding  # [B, 1, D]
        return paddle.concat([cls, h], axis=1) + self.position_embedding.weight  # [B, N + 1, D]


class CLIPVisionEncoder(Encoder):
    """CLIP image tower: images [B, C, H, W] -> ``pooled`` [B, projection_dim] (the image embedding).

    Logical layers: ``embeddings`` (patches, class token, positions), ``pre_layernorm``,
    ``layers.0`` .. ``layers.{depth-1}`` (pre-norm blocks with quick GELU: ``self_attn``,
    ``self_attn_layer_norm``, ``fc1``, ``fc2``, ``final_layer_norm``), ``post_layernorm``,
    ``visual_projection`` (no bias) and, with ``num_classes``, ``prediction`` (logits from
    ``pooled``, a linear probe).

    Input ``input``: [B, in_channels, H, W] float32 (``image_size`` an int or (H, W)); with
    ``normalize`` the images are in [0, 1] and CLIP's mean/std are applied inside (what
    ``CLIPImageProcessor`` does after resizing; images of other than 3 planes use the
    averages of the three), else they come normalised already.
    Outputs: ``prediction`` (primary, when ``num_classes``), ``pooled`` [B, projection_dim]
    (``visual_projection(post_layernorm(class token))``, not normalised: the arena
    normalises) and ``hidden`` [B, N + 1, projection_dim] (every token through the same
    norm and projection, class token first); ``feature_dim = projection_dim``.

    ``size``: ``tiny`` (64 wide, 2 blocks, 2 heads, 64-d space), ``base`` (ViT-B: 768, 12,
    12, 512) or ``large`` (ViT-L: 1024, 24, 16, 768); explicit ``width``/``depth``/``heads``/
    ``projection_dim`` win. ``patch_size`` None picks one dividing the image
    (`paddlecraft.encoders.vit.auto_patch_size`); a loaded file needs its own (32 for
    ViT-B/32) and its ``image_size`` (224): the position table has a row per patch.
    ``pretrained`` loads a Hugging Face CLIPModel or open_clip file right after ``build()``
    (its text half and ``logit_scale`` are skipped).
    """

    default_watch = ("prediction", "pooled")

    def __init__(
        self,
        scope: str,
        image_size: int | Sequence[int] = 224,
        patch_size: int | None = None,
        in_channels: int = 3,
        width: int | None = None,
        depth: int | None = None,
        heads: int | None = None,
        mlp_dim: int | None = None,
        projection_dim: int | None = None,
        size: str | None = None,
        eps: float = 1e-5,
        normalize: bool = False,
        num_classes: int | None = None,
        pretrained: str | None = None,
        pretrained_strict: bool = True,
    ) -> None:
        super().__init__(scope)
        given = (width, depth, heads, projection_dim)
        width, depth, heads, projection_dim = resolve_size(
            self._who(), CLIP_VISION_SIZES, size, given
        )
        hw = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        patch_size = auto_patch_size(*hw) if patch_size is None else patch_size
        if hw[0] % patch_size or hw[1] % patch_size:
            raise ValueError(
                f"{self._who()}: patch_size={patch_size} does not divide the {hw[0]}x{hw[1]} "
                f"input; set patch_size to a common divisor of both sides (or null)"
            )
        self.image_size = image_size if isinstance(image_size, int) else hw
        self.patch_size, self.in_channels, self.size = patch_size, in_channels, size
        self.width, self.depth, self.heads = width, depth, heads
        self.mlp_dim = 4 * width if mlp_dim is None else mlp_dim
        self.projection_dim = projection_dim
        self.feature_dim = projection_dim  # width of pooled and hidden: the joint space
        self.normalize, self.num_classes = normalize, num_classes
        self.pretrained, self.pretrained_strict = pretrained, pretrained_strict
        n = (hw[0] // patch_size) * (hw[1] // patch_size)
        mlp = self.mlp_dim
        self.declare(
            "embeddings",
            LayerSpec(
                lambda: CLIPVisionEmbeddings(in_channels, width, patch_size, n),
                ("clip_vision_embeddings", in_channels, width, patch_size, n),
            ),
        )
        norm = LayerSpec(lambda: nn.LayerNorm(width, epsilon=eps), ("layer_norm", width))
        self.declare("pre_layernorm", norm)
        for i in range(depth):
            self.declare(
                f"layers.{i}",
                LayerSpec(
                    lambda: PreNormBlock(width, heads, mlp, eps=eps, activation="quick_gelu"),
                    ("clip_block", width, heads, mlp),
                ),
            )
        self.declare(
            "post_layernorm",
            LayerSpec(lambda: nn.LayerNorm(width, epsilon=eps), ("layer_norm", width)),
        )
        self.declare(
            "visual_projection",
            LayerSpec(
                lambda: nn.Linear(width, projection_dim, bias_attr=False),
                ("linear_no_bias", width, projection_dim),
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
        return f"Give images as [B, {c}, {h}, {w}] float32 {scale}; resize them or set image_size."

    # ------------------------------------------------------------------ graph
    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        if self.normalize:
            x = clip_normalize(x)  # [B, C, H, W]
        h = self.layers["embeddings"](x)  # [B, N + 1, W]
        h = self.layers["pre_layernorm"](h)
        for i in range(self.depth):
            h, _ = self.layers[f"layers.{i}"](h)  # [B, N + 1, W]
        tokens = self.layers["visual_projection"](self.layers["post_layernorm"](h))  # [B, N + 1, P]
        out = {"pooled": tokens[:, 0], "hidden": tokens}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](out["pooled"])  # [B, num_classes]
        return out

    # ------------------------------------------------------------------ pretrained files
    def detect_source(self, keys: list[str]) -> str:
        """``hf_clip`` (``vision_model.*``) or ``open_clip`` (``visual.*``)."""
        return detect_clip_source(self._who(), keys)

    def convert_pretrained(self, arrays: dict[str, Any], source: str) -> dict[str, Any]:
        """Keep the image half (the text half and ``logit_scale`` are skipped, counted in the
        log); split open_clip's fused q/k/v; check the projection's sizes (one line)."""
        if source == HF_CLIP:
            mine = {
                k: v
                for k, v in arrays.items()
                if k.startswith(("vision_model.", "visual_projection."))
                and not k.endswith("position_ids")
            }
            proj = "visual_projection.weight"
        else:
            if any(k.startswith(("visual.attnpool.", "visual.layer1.")) for k in arrays):
                raise PretrainedLoadError(
                    f"{self._who()}: the file's image tower is CLIP's ResNet (visual.layer1.*, "
                    "visual.attnpool.*), not a ViT; load a ViT CLIP file (RN50 and kin need a "
                    "ResNet tower)"
                )
            mine = {k: v for k, v in arrays.items() if k.startswith("visual.")}
            mine = {
                k: v for k, v in mine.items() if k.removeprefix("visual.") not in OPEN_CLIP_EXTRA
            }
            if "visual.proj" in mine:
                mine["visual.proj"] = np.asarray(mine["visual.proj"]).T  # [in, out] -> torch's
            mine = split_in_proj(mine)
            proj = "visual.proj"
        if not mine:
            raise PretrainedLoadError(
                f"{self._who()}: the file holds no image tower (no vision_model.* / visual.* "
                "keys): a text tower's file goes into CLIPTextEncoder"
            )
        if len(mine) < len(arrays):
            log.info("%s: skipping %d text-tower keys", self._who(), len(arrays) - len(mine))
        if proj in mine:
            check_projection(self._who(), proj, mine[proj], self.width, self.projection_dim)
        return mine

    def pretrained_key(self, key: str, source: str) -> str | None:
        """The ``state_dict()`` key that external ``key`` fills (None: no place for it)."""
        if source == HF_CLIP:
            m = _match(r"vision_model\.encoder\.layers\.(\d+)\.(.*)", key)
            if m:
                rest = block_key(m[1], source)
                return None if rest is None else f"layers.layers.{m[0]}.{rest}"
            return {
                "vision_model.embeddings.class_embedding": "layers.embeddings.class_embedding",
                "visual_projection.weight": "layers.visual_projection.weight",
            }.get(key) or rename_prefix(
                key,
                [
                    ("vision_model.embeddings.", "layers.embeddings."),
                    ("vision_model.pre_layrnorm.", "layers.pre_layernorm."),
                    ("vision_model.post_layernorm.", "layers.post_layernorm."),
                ],
            )
        if source == OPEN_CLIP:
            m = _match(r"visual\.transformer\.resblocks\.(\d+)\.(.*)", key)
            if m:
                rest = block_key(m[1], source)
                return None if rest is None else f"layers.layers.{m[0]}.{rest}"
            return {
                "visual.conv1.weight": "layers.embeddings.patch_embedding.weight",
                "visual.class_embedding": "layers.embeddings.class_embedding",
                "visual.positional_embedding": "layers.embeddings.position_embedding.weight",
                "visual.proj": "layers.visual_projection.weight",
            }.get(key) or rename_prefix(
                key,
                [
                    ("visual.ln_pre.", "layers.pre_layernorm."),
                    ("visual.ln_post.", "layers.post_layernorm."),
                ],
            )
        raise PretrainedLoadError(
            f"CLIPVisionEncoder has no key map for source {source!r}; use hf_clip or open_clip"
        )


def pixel_stats(channels: int) -> tuple[np.ndarray, np.ndarray]:
    """CLIP's per-channel pixel mean and std for RGB images; their averages on every plane otherwise."""
    mean, std = np.asarray(CLIP_MEAN, "float32"), np.asarray(CLIP_STD, "float32")
    if channels == 3:
        return mean, std
    return np.full(channels, mean.mean(), "float32"), np.full(channels, std.mean(), "float32")


def clip_normalize(x: Tensor) -> Tensor:
    """Images in [0, 1] ``[B, C, H, W]`` to CLIP's normalised pixels (`pixel_stats` of C)."""
    stats = pixel_stats(x.shape[1])  # mean, std: [C] each
    mean, std = (paddle.to_tensor(a.reshape(1, -1, 1, 1)).astype(x.dtype) for a in stats)
    return (x - mean) / std


def _match(pattern: str, key: str) -> tuple[str, str] | None:
    m = re.fullmatch(pattern, key)
    return None if m is None else (m.group(1), m.group(2))
