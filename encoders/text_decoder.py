"""A vector-conditioned `TextDecoder` (GRU): teacher forcing, greedy and beam search."""

from __future__ import annotations

import paddle

from .base import InputSpec, Tensor
from .decoding import ConditionedDecoder
from .image_mlp import dense
from .text_encoder import check_token_ids, gru, token_embedding

__all__ = ["TextDecoder"]


class TextDecoder(ConditionedDecoder):
    """Next-token logits [B, T, vocab] for a sentence conditioned on a vector (e.g. an image).

    Logical layers: ``init`` (linear + tanh: condition -> initial GRU state), ``embedding``
    (token table), ``rnn`` (GRU over [token embedding, condition] at every step) and
    ``prediction`` (hidden -> vocabulary logits). Inputs: ``cond`` [B, cond_dim] float32 and
    ``tokens`` [B, T] int64, the teacher-forcing input ``<bos> + target[:-1]``
    (`teacher_forcing_inputs`). Output ``prediction``: [B, T, vocab_size] logits.
    Train with `loss`; decode with `greedy` or `beam_search` (dynamic mode,
    see `ConditionedDecoder`). Decoding never emits ``<pad>`` or
    ``<bos>`` before ``<eos>``.
    """

    def __init__(
        self,
        scope: str,
        vocab_size: int,
        cond_dim: int,
        embed_dim: int = 64,
        hidden_size: int = 128,
        max_len: int = 20,
    ) -> None:
        super().__init__(scope)
        self.vocab_size, self.cond_dim, self.embed_dim = vocab_size, cond_dim, embed_dim
        self.hidden_size, self.max_len = hidden_size, max_len
        self.declare("init", dense(cond_dim, hidden_size))
        self.declare("embedding", token_embedding(vocab_size, embed_dim))
        self.declare("rnn", gru(embed_dim + cond_dim, hidden_size))
        self.declare("prediction", dense(hidden_size, vocab_size))
        self.declare_input("cond", InputSpec((cond_dim,)))
        self.declare_input("tokens", InputSpec((None,), dtypes=("int64", "int32")))
        self.declare_outputs("prediction")

    # ------------------------------------------------------------------ graph
    def _initial_state(self, cond: Tensor) -> Tensor:
        return paddle.tanh(self.layers["init"](cond)).unsqueeze(0)  # [1, B, H]

    def _run(self, cond: Tensor, tokens: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        e = self.layers["embedding"](tokens)  # [B, T, E]
        steps = paddle.cast(tokens * 0 + 1, e.dtype).unsqueeze(-1)  # [B, T, 1] ones
        x = paddle.concat([e, cond.unsqueeze(1) * steps], axis=-1)  # [B, T, E + C]
        return self.layers["rnn"](x, state)  # [B, T, H], [1, B, H]

    def _forward(self, cond: Tensor, tokens: Tensor) -> dict[str, Tensor]:
        if paddle.in_dynamic_mode():
            check_token_ids(self._who(), tokens, self.vocab_size)
        h, _ = self._run(cond, tokens, self._initial_state(cond))  # [B, T, H]
        return {"prediction": self.layers["prediction"](h)}  # [B, T, V]

    # ------------------------------------------------------------------ decoding hooks
    def _init_state(self, cond: Tensor) -> Tensor:
        return self._initial_state(cond)  # [1, N, H]

    def _next_logits(self, cond: Tensor, tokens: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        out, state = self._run(cond, tokens, state)  # [N, 1, H], [1, N, H]
        return self.layers["prediction"](out[:, 0]), state  # [N, V]

    def _select_state(self, state: Tensor, index: Tensor) -> Tensor:
        return paddle.gather(state, index, axis=1)  # [1, M, H]
