"""TransformerTextEncoder: a BERT-style post-norm Transformer that loads BERT checkpoints.

The architecture is Hugging Face's ``BertModel`` (and PaddleNLP's): word + position +
token-type embeddings and LayerNorm, post-norm blocks with exact (erf) GELU, LayerNorm
epsilon 1e-12, a ``tanh`` pooler on the first ([CLS]) position. Files in Hugging Face
naming (``bert.encoder.layer.N.attention.self.query.weight``, with or without ``bert.``)
and PaddleNLP naming (``bert.encoder.layers.N.self_attn.q_proj.weight``) load through
`Encoder.load_pretrained` (see `paddlecraft.encoders.pretrained`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import paddle
from paddle import nn

from .attention import PostNormBlock, padding_bias
from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, Tensor
from .image_mlp import dense
from .pretrained import PretrainedLoadError
from .text_encoder import check_token_ids

log = logging.getLogger(__name__)

#: google-research/bert sizes (``bert_uncased_L-{depth}_H-{dim}_A-{heads}``); mlp_dim = 4 * dim
BERT_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


class BertEmbeddings(nn.Layer):
    """Token ids and token types [B, T] -> LayerNorm(word + position + type) [B, T, D]."""

    def __init__(
        self, vocab_size: int, dim: int, max_len: int, type_vocab_size: int, dropout: float
    ) -> None:
        super().__init__()
        # no padding_idx: Paddle would force row 0 to zero, BERT's [PAD] row is a real vector
        self.word_embeddings = nn.Embedding(vocab_size, dim)
        self.position_embeddings = nn.Embedding(max_len, dim)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, dim)
        self.layer_norm = nn.LayerNorm(dim, epsilon=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: Tensor, token_types: Tensor) -> Tensor:
        positions = paddle.cumsum(tokens * 0 + 1, axis=1) - 1  # [B, T]: 0..T-1
        x = self.word_embeddings(tokens) + self.position_embeddings(positions)  # [B, T, D]
        x = x + self.token_type_embeddings(token_types)  # [B, T, D]
        return self.dropout(self.layer_norm(x))


class TransformerTextEncoder(Encoder):
    """Token ids [B, T] -> ``pooled`` [B, D] ([CLS] + dense + tanh) and ``hidden`` [B, T, D].

    Logical layers: ``embeddings`` (word + position + token type + LayerNorm),
    ``layers.0`` .. ``layers.{depth-1}`` (one post-norm block each: ``attention``
    (q/k/v/out projections), ``attention_norm``, ``intermediate``, ``output``,
    ``output_norm``), ``pooler`` and, with ``num_classes``, ``prediction`` (logits from
    ``pooled``, like ``BertForSequenceClassification``'s ``classifier``).

    Inputs: ``tokens`` [B, T] int64 (T <= ``max_len``), then optionally
    ``attention_mask`` [B, T] (1 = token, 0 = padding; default: ``tokens != pad_id``) and
    ``token_type_ids`` [B, T] (default zeros). Outputs: ``prediction`` (primary, when
    ``num_classes``), ``pooled``, ``hidden``.

    ``size`` picks a BERT size (``tiny``, ``mini``, ``small``, ``medium``, ``base``,
    ``large``; see `BERT_SIZES`); ``dim``/``depth``/``heads`` given explicitly win.
    ``pretrained`` loads a BERT file right after ``build()``.
    """

    default_watch = ("prediction", "pooled")
    #: sources whose Linear weights are stored [in, out] already (Paddle)
    paddle_layout_sources = ("paddle", "paddlenlp_bert")

    def __init__(
        self,
        scope: str,
        vocab_size: int = 30522,
        dim: int | None = None,
        depth: int | None = None,
        heads: int | None = None,
        mlp_dim: int | None = None,
        max_len: int = 512,
        type_vocab_size: int = 2,
        num_classes: int | None = None,
        size: str | None = None,
        dropout: float = 0.1,
        pad_id: int = 0,
        pretrained: str | None = None,
        pretrained_strict: bool = True,
    ) -> None:
        super().__init__(scope)
        depth, dim, heads = _resolve_size(self._who(), size, depth, dim, heads)
        self.vocab_size, self.dim, self.depth, self.heads = vocab_size, dim, depth, heads
        self.feature_dim = dim  # width of pooled and hidden
        self.mlp_dim = 4 * dim if mlp_dim is None else mlp_dim
        self.max_len, self.type_vocab_size, self.num_classes = max_len, type_vocab_size, num_classes
        self.size, self.dropout, self.pad_id = size, dropout, pad_id
        self.pretrained, self.pretrained_strict = pretrained, pretrained_strict
        self.declare(
            "embeddings",
            LayerSpec(
                lambda: BertEmbeddings(vocab_size, dim, max_len, type_vocab_size, dropout),
                ("bert_embeddings", vocab_size, dim, max_len, type_vocab_size),
            ),
        )
        for i in range(depth):
            self.declare(
                f"layers.{i}",
                LayerSpec(
                    lambda: PostNormBlock(dim, heads, self.mlp_dim, dropout),
                    ("post_norm_block", dim, heads, self.mlp_dim),
                ),
            )
        self.declare("pooler", dense(dim, dim))
        if num_classes is not None:
            self.declare("prediction", dense(dim, num_classes))
        ids = ("int64", "int32")
        self.declare_input("tokens", InputSpec((None,), dtypes=ids))
        self.declare_input("attention_mask", InputSpec((None,), dtypes=(*ids, "bool", "float32")))
        self.declare_input("token_type_ids", InputSpec((None,), dtypes=ids))
        names = ("pooled", "hidden")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    # ------------------------------------------------------------------ inputs
    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return (
            f"Give {name} as [B, T] int64 (T <= max_len={self.max_len}), right-padded with "
            f"pad_id={self.pad_id}; SubwordTokenizer.encode_batch returns ids and mask."
        )

    def _check_inputs(self, inputs: tuple) -> list[Tensor]:
        if 1 <= len(inputs) < 3 and paddle.in_dynamic_mode():
            tokens = inputs[0]
            if isinstance(tokens, np.ndarray):
                tokens = paddle.to_tensor(tokens)
            filled = list(inputs)
            if isinstance(tokens, Tensor):
                filled[0] = tokens
                if len(filled) == 1:
                    filled.append(tokens != self.pad_id)  # [B, T] bool
                filled.append(paddle.zeros_like(tokens))  # [B, T] segment A
            inputs = tuple(filled)
        xs = super()._check_inputs(inputs)
        if paddle.in_dynamic_mode():
            shapes = {tuple(x.shape) for x in xs}
            if len(shapes) != 1:
                raise EncoderInputError(
                    f"{self._who()}: tokens, attention_mask and token_type_ids must have one "
                    f"shape [B, T], got {[list(x.shape) for x in xs]}"
                )
            tokens = xs[0]
            check_token_ids(self._who(), tokens, self.vocab_size)
            if tokens.shape[1] > self.max_len:
                raise EncoderInputError(
                    f"{self._who()} input 'tokens': {tokens.shape[1]} positions but max_len="
                    f"{self.max_len}. Cut the text (encode_batch(max_len=...)) or build with a "
                    "larger max_len."
                )
        return xs

    # ------------------------------------------------------------------ graph
    def _forward(self, tokens: Tensor, mask: Tensor, token_types: Tensor) -> dict[str, Tensor]:
        x = self.layers["embeddings"](tokens, token_types)  # [B, T, D]
        bias = padding_bias(mask, x.dtype)  # [B, 1, 1, T]
        for i in range(self.depth):
            x = self.layers[f"layers.{i}"](x, bias)  # [B, T, D]
        pooled = paddle.tanh(self.layers["pooler"](x[:, 0]))  # [B, D]
        out = {"pooled": pooled, "hidden": x}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](pooled)  # [B, num_classes]
        return out

    # ------------------------------------------------------------------ pretrained files
    @classmethod
    def detect_source(cls, keys: list[str]) -> str:
        """``hf_bert`` (``encoder.layer.N.attention.self.query``) or ``paddlenlp_bert``
        (``encoder.layers.N.self_attn.q_proj``)."""
        if any(".attention.self.query." in k for k in keys):
            return "hf_bert"
        if any(re.search(r"encoder\.layers\.\d+\.self_attn\.q_proj\.", k) for k in keys):
            return "paddlenlp_bert"
        raise PretrainedLoadError(
            f"cannot tell which BERT naming these keys use ({sorted(keys)[:4]} ...): expected "
            "Hugging Face (bert.encoder.layer.0.attention.self.query.weight) or PaddleNLP "
            "(bert.encoder.layers.0.self_attn.q_proj.weight); pass source="
        )

    def convert_pretrained(self, arrays: dict[str, Any], source: str) -> dict[str, Any]:
        """Drop what a BERT file holds beyond the encoder: pre-training heads, position-id buffers."""
        extra = [k for k in arrays if _is_bert_extra(k)]
        if extra:
            log.info("%s: not loading %d pre-training head/buffer keys", self._who(), len(extra))
        return {k: v for k, v in arrays.items() if k not in extra}

    def pretrained_key(self, key: str, source: str) -> str | None:
        """The ``state_dict()`` key that external ``key`` fills (None: no place for it)."""
        if source not in _KEY_RULES:
            raise PretrainedLoadError(
                f"TransformerTextEncoder has no key map for source {source!r}; use "
                f"{sorted(_KEY_RULES)}"
            )
        key = key.removeprefix("bert.")
        if key.startswith("classifier."):
            return "layers.prediction." + key.removeprefix("classifier.")
        for pattern, repl in _KEY_RULES[source]:
            new, n = pattern.subn(repl, key)
            if n:
                return new.replace(".gamma", ".weight").replace(".beta", ".bias")
        return None


def _rules(pairs: list[tuple[str, str]]) -> list[tuple[re.Pattern, str]]:
    return [(re.compile(f"^{p}"), r) for p, r in pairs]


_BLOCK = r"encoder\.layers?\.(\d+)\."
_KEY_RULES = {
    "hf_bert": _rules(
        [
            (r"embeddings\.LayerNorm\.", "layers.embeddings.layer_norm."),
            (r"embeddings\.", "layers.embeddings."),
            (_BLOCK + r"attention\.self\.query\.", r"layers.layers.\1.attention.q_proj."),
            (_BLOCK + r"attention\.self\.key\.", r"layers.layers.\1.attention.k_proj."),
            (_BLOCK + r"attention\.self\.value\.", r"layers.layers.\1.attention.v_proj."),
            (_BLOCK + r"attention\.output\.dense\.", r"layers.layers.\1.attention.out_proj."),
            (_BLOCK + r"attention\.output\.LayerNorm\.", r"layers.layers.\1.attention_norm."),
            (_BLOCK + r"intermediate\.dense\.", r"layers.layers.\1.intermediate."),
            (_BLOCK + r"output\.dense\.", r"layers.layers.\1.output."),
            (_BLOCK + r"output\.LayerNorm\.", r"layers.layers.\1.output_norm."),
            (r"pooler\.dense\.", "layers.pooler."),
        ]
    ),
    "paddlenlp_bert": _rules(
        [
            (r"embeddings\.", "layers.embeddings."),
            (_BLOCK + r"self_attn\.", r"layers.layers.\1.attention."),
            (_BLOCK + r"norm1\.", r"layers.layers.\1.attention_norm."),
            (_BLOCK + r"linear1\.", r"layers.layers.\1.intermediate."),
            (_BLOCK + r"linear2\.", r"layers.layers.\1.output."),
            (_BLOCK + r"norm2\.", r"layers.layers.\1.output_norm."),
            (r"pooler\.dense\.", "layers.pooler."),
        ]
    ),
}


def _is_bert_extra(key: str) -> bool:
    # BertForPreTraining / BertForMaskedLM heads (HF: cls.*, PaddleNLP: cls.* too) and the
    # position_ids buffer older HF files carry
    return key.startswith(("cls.", "bert.cls.")) or key.endswith("position_ids")


def _resolve_size(
    who: str, size: str | None, depth: int | None, dim: int | None, heads: int | None
) -> tuple[int, int, int]:
    if size is not None:
        if size not in BERT_SIZES:
            raise ValueError(f"{who}: size must be one of {sorted(BERT_SIZES)}, got {size!r}")
        d, w, h = BERT_SIZES[size]
        depth, dim, heads = depth or d, dim or w, heads or h
    if depth is None or dim is None or heads is None:
        raise ValueError(
            f"{who}: give size= (one of {sorted(BERT_SIZES)}) or all of depth, dim and heads"
        )
    if dim % heads:
        raise ValueError(f"{who}: dim={dim} must be divisible by heads={heads}")
    return depth, dim, heads
