"""TransformerTextDecoder: a GPT-style causal Transformer that writes text about a vector.

The condition (an image or utterance embedding [B, cond_dim]) is projected to one prefix
token in front of the text; pre-norm causal blocks (GPT-2 layout) predict each next token.
Decoding keeps a key/value cache, so each step costs one position, not the whole prefix.
Same public API as the GRU `TextDecoder`: ``loss``, ``log_prob``,
``greedy``, ``beam_search``, ``teacher_forcing_inputs``, ``sequence_loss``.
"""

from __future__ import annotations

from typing import Any

import paddle
from paddle import nn

from .attention import MASKED, KVCache, PreNormBlock, causal_bias
from .base import EncoderInputError, InputSpec, LayerSpec, Tensor
from .decoding import BOS, EOS, PAD, ConditionedDecoder
from .image_mlp import dense
from .text_encoder import check_token_ids

#: decoding state: (next position, one (keys, values) cache per block)
DecodeState = tuple[int, list[KVCache]]


class TokenPositionEmbedding(nn.Layer):
    """Token ids [B, T] at positions ``start..start+T-1`` -> token + position vectors [B, T, D]."""

    def __init__(self, vocab_size: int, positions: int, dim: int) -> None:
        super().__init__()
        self.token_embeddings = nn.Embedding(vocab_size, dim)
        self.position_embeddings = nn.Embedding(positions, dim)

    def forward(self, tokens: Tensor, start: int = 0) -> Tensor:
        positions = paddle.cumsum(tokens * 0 + 1, axis=1) - 1 + start  # [B, T]
        return self.token_embeddings(tokens) + self.position_embeddings(positions)  # [B, T, D]

    def position(self, index: int) -> Tensor:
        """The position vector of ``index`` (e.g. 0 for the prefix): [D]."""
        return self.position_embeddings.weight[index]


class TransformerTextDecoder(ConditionedDecoder):
    """Next-token logits [B, T, vocab] for a text conditioned on a vector, GPT style.

    Logical layers: ``cond_proj`` (linear: condition -> the prefix token), ``embeddings``
    (token table + learned positions: prefix at 0, tokens at 1..), ``layers.0`` ..
    ``layers.{depth-1}`` (pre-norm causal blocks: ``self_attn``, ``self_attn_layer_norm``,
    ``fc1``, ``fc2``, ``final_layer_norm``), ``ln_f`` and ``prediction`` (vocabulary
    logits). Inputs: ``cond`` [B, cond_dim] float32 and ``tokens`` [B, T] int64
    (T <= ``max_len``), the teacher-forcing input ``<bos> + target[:-1]``. Output
    ``prediction`` [B, T, vocab_size]. ``pad_id`` / ``bos_id`` / ``eos_id`` default to
    `Vocab`'s 0 / 1 / 2; set them for a subword tokenizer's ids.
    """

    def __init__(
        self,
        scope: str,
        vocab_size: int,
        cond_dim: int,
        dim: int = 128,
        depth: int = 2,
        heads: int = 4,
        mlp_dim: int | None = None,
        max_len: int = 20,
        dropout: float = 0.0,
        pad_id: int = PAD,
        bos_id: int = BOS,
        eos_id: int = EOS,
    ) -> None:
        super().__init__(scope)
        if dim % heads:
            raise ValueError(f"{self._who()}: dim={dim} must be divisible by heads={heads}")
        for setting, value in (("pad_id", pad_id), ("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= value < vocab_size:
                raise ValueError(
                    f"{self._who()}: {setting}={value} is outside the vocabulary [0, {vocab_size})"
                )
        self.vocab_size, self.cond_dim, self.dim = vocab_size, cond_dim, dim
        self.depth, self.heads, self.mlp_dim = depth, heads, 4 * dim if mlp_dim is None else mlp_dim
        self.max_len, self.dropout = max_len, dropout
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        mlp = self.mlp_dim
        self.declare("cond_proj", dense(cond_dim, dim))
        self.declare(
            "embeddings",
            LayerSpec(
                lambda: TokenPositionEmbedding(vocab_size, max_len + 1, dim),
                ("token_position_embedding", vocab_size, max_len + 1, dim),
            ),
        )
        for i in range(depth):
            self.declare(
                f"layers.{i}",
                LayerSpec(
                    lambda: PreNormBlock(dim, heads, mlp, dropout),
                    ("pre_norm_block", dim, heads, mlp),
                ),
            )
        self.declare("ln_f", LayerSpec(lambda: nn.LayerNorm(dim), ("layer_norm", dim)))
        self.declare("prediction", dense(dim, vocab_size))
        self.declare_input("cond", InputSpec((cond_dim,)))
        self.declare_input("tokens", InputSpec((None,), dtypes=("int64", "int32")))
        self.declare_outputs("prediction")

    # ------------------------------------------------------------------ graph
    def _prefix(self, cond: Tensor) -> Tensor:
        """The condition as the first sequence element: [B, 1, D]."""
        start = self.layers["cond_proj"](cond) + self.layers["embeddings"].position(0)  # [B, D]
        return start.unsqueeze(1)

    def _blocks(
        self, x: Tensor, bias: Tensor | None, caches: list[KVCache] | None
    ) -> tuple[Tensor, list[KVCache]]:
        new = []
        for i in range(self.depth):
            x, kv = self.layers[f"layers.{i}"](x, bias, None if caches is None else caches[i])
            new.append(kv)
        return self.layers["ln_f"](x), new  # [B, T, D]

    def _forward(self, cond: Tensor, tokens: Tensor) -> dict[str, Tensor]:
        if paddle.in_dynamic_mode():
            check_token_ids(self._who(), tokens, self.vocab_size)
            if tokens.shape[1] > self.max_len:
                raise EncoderInputError(
                    f"{self._who()} input 'tokens': {tokens.shape[1]} positions but max_len="
                    f"{self.max_len}. Cut the targets or build with a larger max_len."
                )
        x = self.layers["embeddings"](tokens, start=1)  # [B, T, D]
        x = paddle.concat([self._prefix(cond), x], axis=1)  # [B, 1 + T, D]
        bias = causal_bias(x.shape[1], x.dtype) if paddle.in_dynamic_mode() else None
        if bias is None:  # static: T unknown when the program is built
            bias = _static_causal_bias(x)
        h, _ = self._blocks(x, bias, None)  # [B, 1 + T, D]
        return {"prediction": self.layers["prediction"](h[:, 1:])}  # [B, T, V]

    # ------------------------------------------------------------------ decoding hooks
    def _check_decode_length(self, max_len: int, what: str) -> None:
        super()._check_decode_length(max_len, what)
        if max_len > self.max_len:
            raise ValueError(
                f"{self._who()}.{what}: max_len={max_len} but the decoder has positions for "
                f"{self.max_len} tokens; decode at most that many or build with a larger max_len"
            )

    def _init_state(self, cond: Tensor) -> DecodeState:
        _, caches = self._blocks(self._prefix(cond), None, None)  # the prefix, cached
        return 1, caches

    def _next_logits(
        self, cond: Tensor, tokens: Tensor, state: DecodeState
    ) -> tuple[Tensor, DecodeState]:
        pos, caches = state
        x = self.layers["embeddings"](tokens, start=pos)  # [N, 1, D]
        h, caches = self._blocks(x, None, caches)  # one query sees every cached position
        return self.layers["prediction"](h[:, 0]), (pos + 1, caches)  # [N, V]

    def _select_state(self, state: DecodeState, index: Tensor) -> DecodeState:
        pos, caches = state
        picked = [
            (paddle.gather(k, index, axis=0), paddle.gather(v, index, axis=0)) for k, v in caches
        ]
        return pos, picked


def _static_causal_bias(x: Tensor) -> Any:
    """Causal bias [1, 1, T, T] built from ops, for programs whose T is unknown."""
    steps = paddle.cumsum(paddle.cast(x[0, :, 0] * 0 + 1, "int64"), axis=0)  # [T]: 1..T
    later = paddle.cast(steps.unsqueeze(0) > steps.unsqueeze(1), x.dtype)  # [T, T]: key after query
    return (later * MASKED).unsqueeze([0, 1])
