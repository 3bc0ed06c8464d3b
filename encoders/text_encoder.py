"""Token ids -> a sentence embedding: `TextEncoder` (GRU or Transformer), and the
token layer specs the text encoders and decoders share.
"""

from __future__ import annotations

import paddle
from paddle import nn

from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, Tensor
from .decoding import TOKENS_FIX
from .image_mlp import dense
from .vocab import PAD

__all__ = ["TOKENS_FIX", "TextEncoder", "check_token_ids", "gru", "token_embedding", "transformer"]


def token_embedding(num: int, dim: int, padding_idx: int | None = PAD) -> LayerSpec:
    """An embedding table ``num x dim`` (row ``padding_idx`` stays zero)."""
    return LayerSpec(
        lambda: nn.Embedding(num, dim, padding_idx=padding_idx),
        ("embedding", num, dim, padding_idx),
    )


def gru(input_size: int, hidden_size: int, num_layers: int = 1, dropout: float = 0.0) -> LayerSpec:
    """A batch-first GRU ``input_size -> hidden_size``."""
    return LayerSpec(
        lambda: nn.GRU(input_size, hidden_size, num_layers, dropout=dropout),
        ("gru", input_size, hidden_size, num_layers),
    )


def transformer(d_model: int, heads: int, num_layers: int, ff: int, dropout: float) -> LayerSpec:
    """A stack of post-norm Transformer encoder layers of width ``d_model``."""
    return LayerSpec(
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, heads, ff, dropout=dropout), num_layers
        ),
        ("transformer", d_model, heads, num_layers, ff),
    )


def check_token_ids(who: str, tokens: Tensor, vocab_size: int) -> None:
    """Raise `EncoderInputError` naming encoder ``who`` when a token id is outside the
    vocabulary (dynamic mode only: a bad id would otherwise surface as a C++ index error)."""
    if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise EncoderInputError(
            f"{who} input 'tokens': ids must be in [0, {vocab_size}), got "
            f"[{int(tokens.min())}, {int(tokens.max())}]. Encode with the vocabulary the "
            "encoder was built for (vocab_size=len(vocab))."
        )


class TextEncoder(Encoder):
    """Token ids [B, T] -> sentence features ``pooled`` [B, hidden_size] [-> ``prediction`` logits].

    Logical layers: ``embedding`` (token table, row 0 = ``<pad>`` stays zero), then either
    ``rnn`` (GRU, ``arch="gru"``) or ``position`` (learned positions) + ``transformer``
    (``arch="transformer"``, padding keys masked out), ``projection`` (linear + tanh to
    ``hidden_size``: the sentence embedding) and, with ``num_classes``, ``prediction``.
    Features are mean-pooled over non-pad positions, so extra right padding does not change
    the result. Input ``tokens``: [B, T] int64 (T <= ``max_len`` for the transformer).
    Outputs: ``prediction`` [B, num_classes] (primary) when ``num_classes`` is set,
    ``pooled`` [B, hidden_size] and ``hidden`` [B, T, hidden_size] (``projection`` per token,
    zero at padding); ``feature_dim = hidden_size``. The transformer's feed-forward width is
    ``4 * embed_dim``.
    """

    def __init__(
        self,
        scope: str,
        vocab_size: int,
        embed_dim: int = 64,
        hidden_size: int = 128,
        arch: str = "gru",
        num_layers: int = 1,
        num_heads: int = 4,
        max_len: int = 64,
        num_classes: int | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__(scope)
        if arch not in ("gru", "transformer"):
            raise ValueError(
                f"TextEncoder({scope!r}): arch must be 'gru' or 'transformer', got {arch!r}"
            )
        if arch == "transformer" and embed_dim % num_heads:
            raise ValueError(
                f"TextEncoder({scope!r}): embed_dim={embed_dim} must be divisible by "
                f"num_heads={num_heads} for the transformer"
            )
        self.vocab_size, self.embed_dim, self.hidden_size = vocab_size, embed_dim, hidden_size
        self.arch, self.max_len, self.num_classes = arch, max_len, num_classes
        self.feature_dim = hidden_size
        self.declare("embedding", token_embedding(vocab_size, embed_dim))
        if arch == "gru":
            self.declare("rnn", gru(embed_dim, hidden_size, num_layers, dropout))
            features = hidden_size
        else:
            self.declare("position", token_embedding(max_len, embed_dim, padding_idx=None))
            self.declare(
                "transformer", transformer(embed_dim, num_heads, num_layers, 4 * embed_dim, dropout)
            )
            features = embed_dim
        self.declare("projection", dense(features, hidden_size))
        if num_classes is not None:
            self.declare("prediction", dense(hidden_size, num_classes))
        self.declare_input("tokens", InputSpec((None,), dtypes=("int64", "int32")))
        names = ("pooled", "hidden")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return TOKENS_FIX

    def _forward(self, tokens: Tensor) -> dict[str, Tensor]:
        if paddle.in_dynamic_mode():
            check_token_ids(self._who(), tokens, self.vocab_size)
            if self.arch == "transformer" and tokens.shape[1] > self.max_len:
                raise EncoderInputError(
                    f"{self._who()} input 'tokens': {tokens.shape[1]} positions but max_len="
                    f"{self.max_len}. Cut the text (encode_batch(max_len=...)) or build with a "
                    "larger max_len."
                )
        if tokens.shape[1] == 0:  # every text empty: one pad step (Paddle's GRU crashes on T=0)
            tokens = paddle.full([tokens.shape[0], 1], PAD, dtype=tokens.dtype)  # [B, 1]
        keep = tokens != PAD  # [B, T]
        x = self.layers["embedding"](tokens)  # [B, T, E]
        if self.arch == "gru":
            h, _ = self.layers["rnn"](x)  # [B, T, H]; right padding never reaches earlier steps
        else:
            pos = paddle.cumsum(tokens * 0 + 1, axis=1) - 1  # [B, T]: 0..T-1
            x = x + self.layers["position"](pos)  # [B, T, E]
            h = self.layers["transformer"](x, keep.unsqueeze([1, 2]))  # [B, T, E], pad keys off
        mask = paddle.cast(keep, h.dtype).unsqueeze(-1)  # [B, T, 1]
        pooled = (h * mask).sum(axis=1) / paddle.clip(mask.sum(axis=1), min=1.0)  # [B, F]
        emb = paddle.tanh(self.layers["projection"](pooled))  # [B, hidden_size]
        per_token = paddle.tanh(self.layers["projection"](h)) * mask  # [B, T, hidden_size]
        out = {"pooled": emb, "hidden": per_token}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](emb)  # [B, num_classes]
        return out
