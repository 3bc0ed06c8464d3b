"""CLIPTextEncoder: CLIP's text tower, loading Hugging Face CLIPModel and open_clip files.

Token + learned position embeddings, pre-norm blocks with quick GELU under a causal mask,
``final_layer_norm``, the features at the end-of-text token and ``text_projection`` (no bias)
into the joint image-text space. The tower also holds CLIP's learned temperature
``logit_scale`` (a log scale). This is ``transformers.CLIPTextModelWithProjection`` (plus
``CLIPModel.logit_scale``) and open_clip's text side; the key maps are in
`paddlecraft.encoders.clip_keys`; `paddlecraft.encoders.clip_tokenizer` reads CLIP's BPE files.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

import numpy as np
import paddle
from paddle import nn

from .attention import MASKED, PreNormBlock
from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, Tensor
from .clip_keys import (
    HF_CLIP,
    OPEN_CLIP,
    OPEN_CLIP_EXTRA,
    block_key,
    check_projection,
    detect_clip_source,
    split_in_proj,
)
from .clip_vision import resolve_size
from .image_mlp import dense
from .pretrained import PretrainedLoadError
from .text_encoder import check_token_ids

log = logging.getLogger(__name__)

#: named sizes: (width, depth, heads, projection_dim); ``base`` is ViT-B/32's text tower
CLIP_TEXT_SIZES: dict[str, tuple[int, int, int, int]] = {
    "tiny": (64, 2, 2, 64),
    "base": (512, 12, 8, 512),
    "large": (768, 12, 12, 768),
}
#: CLIP's initial temperature: logit_scale = log(1 / 0.07)
LOGIT_SCALE_INIT = math.log(1 / 0.07)
#: where the text features are read: the highest id (CLIP's end-of-text token is the last
#: id of its vocabulary) or the first ``eos_id``
POOLS = ("argmax", "eos")


class CLIPTextEmbeddings(nn.Layer):
    """Token ids [B, T] -> ``token_embedding`` + ``position_embedding`` [B, T, D]."""

    def __init__(self, vocab_size: int, width: int, max_len: int) -> None:
        super().__init__()
        normal = nn.initializer.Normal
        self.token_embedding = nn.Embedding(
            vocab_size, width, weight_attr=paddle.ParamAttr(initializer=normal(std=0.02))
        )
        self.position_embedding = nn.Embedding(
            max_len, width, weight_attr=paddle.ParamAttr(initializer=normal(std=0.01))
        )

    def forward(self, tokens: Tensor) -> Tensor:
        positions = paddle.cumsum(paddle.ones_like(tokens), axis=1) - 1  # [B, T]: 0..T-1
        return self.token_embedding(tokens) + self.position_embedding(positions)  # [B, T, D]


class LogitScale(nn.Layer):
    """CLIP's learned temperature as one scalar parameter ``weight`` (a log scale: scores are
    multiplied by ``exp(weight)``; CLIP starts at log(1 / 0.07) and clamps exp at 100)."""

    def __init__(self, init: float = LOGIT_SCALE_INIT) -> None:
        super().__init__()
        self.weight = self.create_parameter(
            [], default_initializer=nn.initializer.Constant(float(init))
        )

    def forward(self) -> Tensor:
        return self.weight


class CLIPTextEncoder(Encoder):
    """CLIP text tower: token ids [B, T] -> ``pooled`` [B, projection_dim] (the text embedding).

    Logical layers: ``embeddings`` (token + position tables), ``layers.0`` ..
    ``layers.{depth-1}`` (causal pre-norm blocks with quick GELU: ``self_attn``,
    ``self_attn_layer_norm``, ``fc1``, ``fc2``, ``final_layer_norm``), ``final_layer_norm``,
    ``text_projection`` (no bias), ``logit_scale`` (the learned temperature, see
    `logit_scale`; ``with_logit_scale=false`` leaves it out) and, with ``num_classes``,
    ``prediction`` (logits from ``pooled``).

    Input ``tokens``: [B, T] int64, T <= ``max_len`` (77 for CLIP), right-padded; no padding
    mask is needed: under the causal mask no real token sees a later pad. Outputs:
    ``prediction`` (primary, when ``num_classes``), ``pooled`` [B, projection_dim] (the
    projected features at the end-of-text token, not normalised: the arena normalises) and
    ``hidden`` [B, T, projection_dim] (every position through the same norm and projection);
    ``feature_dim = projection_dim``.

    ``pool`` says where the end-of-text token is: ``argmax`` (the highest id in the row:
    CLIP, open_clip, and Hugging Face files whose config says ``eos_token_id: 2``) or
    ``eos`` (the first ``eos_id``: Hugging Face's newer configs; a row without it is read at
    its last token other than ``pad_id``, what a word vocabulary without end tokens needs).
    ``size``: ``tiny`` (64 wide, 2 blocks, 2 heads, 64-d space), ``base`` (512, 12, 8, 512)
    or ``large`` (768, 12, 12, 768); explicit values win. ``pretrained`` loads a Hugging
    Face CLIPModel or open_clip file right after ``build()`` (its image half is skipped).
    """

    default_watch = ("prediction", "pooled")

    def __init__(
        self,
        scope: str,
        vocab_size: int = 49408,
        width: int | None = None,
        depth: int | None = None,
        heads: int | None = None,
        mlp_dim: int | None = None,
        projection_dim: int | None = None,
        max_len: int = 77,
        size: str | None = None,
        eps: float = 1e-5,
        pool: str = "argmax",
        eos_id: int = 49407,
        pad_id: int = 0,
        with_logit_scale: bool = True,
        num_classes: int | None = None,
        pretrained: str | None = None,
        pretrained_strict: bool = True,
    ) -> None:
        super().__init__(scope)
        given = (width, depth, heads, projection_dim)
        width, depth, heads, projection_dim = resolve_size(
            self._who(), CLIP_TEXT_SIZES, size, given
        )
        if pool not in POOLS:
            raise ValueError(f"{self._who()}: pool must be one of {list(POOLS)}, got {pool!r}")
        self.vocab_size, self.width, self.depth, self.heads = vocab_size, width, depth, heads
        self.mlp_dim = 4 * width if mlp_dim is None else mlp_dim
        self.projection_dim = projection_dim
        self.feature_dim = projection_dim  # width of pooled and hidden: the joint space
        self.max_len, self.size, self.pool = max_len, size, pool
        self.eos_id, self.pad_id = eos_id, pad_id
        self.with_logit_scale, self.num_classes = with_logit_scale, num_classes
        self.pretrained, self.pretrained_strict = pretrained, pretrained_strict
        mlp = self.mlp_dim
        self.declare(
            "embeddings",
            LayerSpec(
                lambda: CLIPTextEmbeddings(vocab_size, width, max_len),
                ("clip_text_embeddings", vocab_size, width, max_len),
            ),
        )
        for i in range(depth):
            self.declare(
                f"layers.{i}",
                LayerSpec(
                    lambda: PreNormBlock(width, heads, mlp, eps=eps, activation="quick_gelu"),
                    ("clip_block", width, heads, mlp),
                ),
            )
        self.declare(
            "final_layer_norm",
            LayerSpec(lambda: nn.LayerNorm(width, epsilon=eps), ("layer_norm", width)),
        )
        self.declare(
            "text_projection",
            LayerSpec(
                lambda: nn.Linear(width, projection_dim, bias_attr=False),
                ("linear_no_bias", width, projection_dim),
            ),
        )
        if with_logit_scale:
            self.declare("logit_scale", LayerSpec(LogitScale, ("logit_scale",)))
        if num_classes is not None:
            self.declare("prediction", dense(projection_dim, num_classes))
        self.declare_input("tokens", InputSpec((None,), dtypes=("int64", "int32")))
        names = ("pooled", "hidden")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    @property
    def logit_scale(self) -> Tensor:
        """The learned temperature, a 0-d Parameter holding log(scale) (CLIP's ``logit_scale``):
        ``logits = exp(logit_scale) * cos(image, text)``. Logical layer ``logit_scale``
        (freeze it to keep the temperature fixed)."""
        if not self.with_logit_scale:
            raise AttributeError(
                f"{self._who()} was built with with_logit_scale=false: it holds no temperature"
            )
        if not self.built:
            self.build()
        return self.layers["logit_scale"].weight

    # ------------------------------------------------------------------ inputs
    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return (
            f"Give tokens as [B, T] int64 (T <= max_len={self.max_len}), right-padded; "
            "CLIPTokenizer.encode_batch makes them."
        )

    def _check_inputs(self, inputs: tuple) -> list[Tensor]:
        xs = super()._check_inputs(inputs)
        if paddle.in_dynamic_mode() and isinstance(xs[0], Tensor):
            check_token_ids(self._who(), xs[0], self.vocab_size)
            if xs[0].shape[1] > self.max_len:
                raise EncoderInputError(
                    f"{self._who()} input 'tokens': {xs[0].shape[1]} positions but max_len="
                    f"{self.max_len}. Cut the text (encode_batch(max_len=...), or CLIPTokenizer "
                    "context_length) or build "
                    "with a larger max_len."
                )
        return xs

    # ------------------------------------------------------------------ graph
    def end_positions(self, tokens: Tensor) -> Tensor:
        """int64 [B]: the position whose features are ``pooled`` (see ``pool``)."""
        if self.pool == "argmax":
            return paddle.argmax(tokens, axis=1)  # first highest id
        is_eos = paddle.cast(tokens == self.eos_id, "int64")  # [B, T]
        first_eos = paddle.argmax(is_eos, axis=1)  # [B]
        last_real = paddle.sum(paddle.cast(tokens != self.pad_id, "int64"), axis=1) - 1  # [B]
        return paddle.where(is_eos.max(axis=1) > 0, first_eos, paddle.clip(last_real, min=0))

    def _forward(self, tokens: Tensor) -> dict[str, Tensor]:
        x = self.layers["embeddings"](tokens)  # [B, T, W]
        bias = _causal_bias(x)  # [1, 1, T, T]
        for i in range(self.depth):
            x, _ = self.layers[f"layers.{i}"](x, bias)  # [B, T, W]
        tokens_out = self.layers["text_projection"](self.layers["final_layer_norm"](x))  # [B, T, P]
        where = self.end_positions(tokens).reshape([-1, 1, 1])  # [B, 1, 1]
        where = where.expand([-1, 1, tokens_out.shape[2]])  # [B, 1, P]
        pooled = paddle.take_along_axis(tokens_out, where, axis=1).squeeze(1)  # [B, P]
        out = {"pooled": pooled, "hidden": tokens_out}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](pooled)  # [B, num_classes]
        return out

    # ------------------------------------------------------------------ pretrained files
    def detect_source(self, keys: list[str]) -> str:
        """``hf_clip`` (``text_model.*``) or ``open_clip`` (``transformer.resblocks.*``)."""
        return detect_clip_source(self._who(), keys)

    def convert_pretrained(self, arrays: dict[str, Any], source: str) -> dict[str, Any]:
        """Keep the text half and ``logit_scale`` (the image half is skipped, counted in the
        log); split open_clip's fused q/k/v; check the projection's sizes (one line)."""
        if source == HF_CLIP:
            mine = {
                k: v
                for k, v in arrays.items()
                if k.startswith(("text_model.", "text_projection.")) or k == "logit_scale"
            }
            mine = {k: v for k, v in mine.items() if not k.endswith("position_ids")}
            proj = "text_projection.weight"
        else:
            mine = {
                k: v
                for k, v in arrays.items()
                if not k.startswith("visual.") and k not in OPEN_CLIP_EXTRA
            }
            if "text_projection" in mine:
                mine["text_projection"] = np.asarray(mine["text_projection"]).T  # -> [out, in]
            mine = split_in_proj(mine)
            proj = "text_projection"
        if not set(mine) - {"logit_scale"}:
            raise PretrainedLoadError(
                f"{self._who()}: the file holds no text tower (no text_model.* / "
                "transformer.resblocks.* keys): an image tower's file goes into CLIPVisionEncoder"
            )
        if not self.with_logit_scale and "logit_scale" in mine:
            del mine["logit_scale"]  # built without a temperature: nothing to fill
        if "logit_scale" in mine:
            mine["logit_scale"] = np.asarray(mine["logit_scale"]).reshape(())  # [] or [1]
        if len(mine) < len(arrays):
            log.info("%s: skipping %d image-tower keys", self._who(), len(arrays) - len(mine))
        if proj in mine:
            check_projection(self._who(), proj, mine[proj], self.width, self.projection_dim)
        return mine

    def pretrained_key(self, key: str, source: str) -> str | None:
        """The ``state_dict()`` key that external ``key`` fills (None: no place for it)."""
        if key == "logit_scale":
            return "layers.logit_scale.weight"
        if source == HF_CLIP:
            key = key.removeprefix("text_model.")
            fixed = {
                "embeddings.token_embedding.weight": "layers.embeddings.token_embedding.weight",
                "embeddings.position_embedding.weight": "layers.embeddings.position_embedding.weight",
                "text_projection.weight": "layers.text_projection.weight",
            }
            blocks = r"encoder\.layers\.(\d+)\.(.*)"
        elif source == OPEN_CLIP:
            fixed = {
                "token_embedding.weight": "layers.embeddings.token_embedding.weight",
                "positional_embedding": "layers.embeddings.position_embedding.weight",
                "text_projection": "layers.text_projection.weight",
            }
            blocks = r"transformer\.resblocks\.(\d+)\.(.*)"
        else:
            raise PretrainedLoadError(
                f"CLIPTextEncoder has no key map for source {source!r}; use hf_clip or open_clip"
            )
        m = re.fullmatch(blocks, key)
        if m:
            rest = block_key(m.group(2), source)
            return None if rest is None else f"layers.layers.{m.group(1)}.{rest}"
        if key in fixed:
            return fixed[key]
        for norm in ("final_layer_norm.", "ln_final."):
            if key.startswith(norm):
                return "layers.final_layer_norm." + key.removeprefix(norm)
        return None


def _causal_bias(x: Tensor) -> Tensor:
    """Causal bias [1, 1, T, T] from ops (T may be unknown when a program is traced)."""
    steps = paddle.cumsum(paddle.ones_like(x[0, :, 0], dtype="int64"), axis=0)  # [T]: 1..T
    later = paddle.cast(steps.unsqueeze(0) > steps.unsqueeze(1), x.dtype)  # [T, T]: key after query
    return (later * MASKED).unsqueeze([0, 1])


__all__ = ["CLIP_TEXT_SIZES", "LOGIT_SCALE_INIT", "CLIPTextEncoder", "LogitScale"]
