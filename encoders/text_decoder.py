"""A vector-conditioned :class:`TextDecoder` (GRU): teacher forcing, greedy and beam search."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F

from .base import Encoder, InputSpec, Tensor
from .image_mlp import dense
from .text_encoder import TOKENS_FIX, check_token_ids, gru, token_embedding
from .vocab import BOS, EOS, PAD

__all__ = ["TextDecoder"]


class TextDecoder(Encoder):
    """Next-token logits [B, T, vocab] for a sentence conditioned on a vector (e.g. an image).

    Logical layers: ``init`` (linear + tanh: condition -> initial GRU state), ``embedding``
    (token table), ``rnn`` (GRU over [token embedding, condition] at every step) and
    ``prediction`` (hidden -> vocabulary logits). Inputs: ``cond`` [B, cond_dim] float32 and
    ``tokens`` [B, T] int64, the teacher-forcing input ``<bos> + target[:-1]``
    (:meth:`teacher_forcing_inputs`). Output ``prediction``: [B, T, vocab_size] logits.
    Train with :meth:`loss`; decode with :meth:`greedy` or :meth:`beam_search` (dynamic mode).
    Decoding never emits ``<pad>`` or ``<bos>`` before ``<eos>``.
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

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        if name == "cond":
            return f"Give the condition as [B, {self.cond_dim}] float32 (cast with .astype('float32'))."
        return TOKENS_FIX

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
            check_token_ids(self, tokens, self.vocab_size)
        h, _ = self._run(cond, tokens, self._initial_state(cond))  # [B, T, H]
        return {"prediction": self.layers["prediction"](h)}  # [B, T, V]

    @staticmethod
    def teacher_forcing_inputs(targets: np.ndarray | Tensor) -> np.ndarray | Tensor:
        """``<bos> + targets[:, :-1]`` [B, T]: the ``tokens`` input that predicts ``targets``."""
        if isinstance(targets, np.ndarray):
            bos = np.full((targets.shape[0], 1), BOS, dtype=targets.dtype)
            return np.concatenate([bos, targets[:, :-1]], axis=1)
        return paddle.concat([targets[:, :1] * 0 + BOS, targets[:, :-1]], axis=1)

    @staticmethod
    def sequence_loss(logits: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of ``logits`` [B, T, V] against ``targets`` [B, T], pads ignored.

        Works on static Values too: ``TextDecoder.sequence_loss(dec.prediction, targets)``.
        """
        targets = paddle.cast(targets, "int64")
        ce = F.cross_entropy(logits, targets.unsqueeze(-1), reduction="none").squeeze(-1)  # [B, T]
        mask = paddle.cast(targets != PAD, ce.dtype)  # [B, T]
        return (ce * mask).sum() / paddle.clip(mask.sum(), min=1.0)

    def loss(self, cond: np.ndarray | Tensor, targets: np.ndarray | Tensor) -> Tensor:
        """Teacher-forced masked cross-entropy of ``targets`` [B, T] (``...<eos><pad>..``) given ``cond``."""
        if isinstance(targets, np.ndarray):
            targets = paddle.to_tensor(targets)
        logits = self.forward_all(cond, self.teacher_forcing_inputs(targets))["prediction"]
        return self.sequence_loss(logits, targets)

    def log_prob(self, cond: np.ndarray | Tensor, sequences: np.ndarray | Tensor) -> np.ndarray:
        """Model log-probability [B] (float64) of decoded ``sequences`` [B, L], up to ``<eos>``."""
        seqs = sequences.numpy() if isinstance(sequences, Tensor) else np.asarray(sequences)
        seqs = seqs.astype(np.int64)
        with paddle.no_grad():
            logits = self.forward_all(cond, self.teacher_forcing_inputs(seqs))["prediction"]
            logp = F.log_softmax(logits, axis=-1).numpy().astype(np.float64)  # [B, L, V]
        picked = np.take_along_axis(logp, seqs[..., None], axis=-1)[..., 0]  # [B, L]
        is_eos = seqs == EOS
        after_eos = np.cumsum(is_eos, axis=1) - is_eos > 0  # [B, L]
        return np.where((seqs != PAD) & ~after_eos, picked, 0.0).sum(axis=1)

    # ------------------------------------------------------------------ decoding
    def _start(self, cond: np.ndarray | Tensor, what: str) -> tuple[Tensor, Tensor]:
        if not paddle.in_dynamic_mode():
            raise RuntimeError(
                f"{self._who()}.{what} decodes step by step in dynamic mode only; call "
                "paddle.disable_static() first (in a static program, fetch dec.prediction "
                "with teacher forcing instead)."
            )
        if not self.built:
            self.build()
        c = paddle.to_tensor(cond) if isinstance(cond, np.ndarray) else cond
        bos = paddle.full([c.shape[0], 1], BOS, dtype="int64")
        c, _ = self._check_inputs((c, bos))
        return c, self._initial_state(c)

    def _step(self, cond: Tensor, tokens: np.ndarray, state: Tensor) -> tuple[np.ndarray, Tensor]:
        """One decoding step for N rows: log-probs [N, V] (float64, pad/bos banned), new state."""
        out, state = self._run(cond, paddle.to_tensor(tokens.reshape(-1, 1)), state)  # [N, 1, H]
        logits = self.layers["prediction"](out[:, 0])  # [N, V]
        logp = F.log_softmax(logits, axis=-1).numpy().astype(np.float64)  # exact widening
        logp[:, [PAD, BOS]] = -np.inf
        return logp, state

    def greedy(self, cond: np.ndarray | Tensor, max_len: int | None = None) -> np.ndarray:
        """Most likely next token at each step: int64 ids [B, L] (no ``<bos>``; ``<eos>``, then pads).

        All rows step together; decoding stops once every row has emitted ``<eos>`` or after
        ``max_len`` (default: the decoder's ``max_len``) steps.
        """
        max_len = self.max_len if max_len is None else max_len
        with paddle.no_grad():
            c, state = self._start(cond, "greedy")
            batch = c.shape[0]
            tokens = np.full(batch, BOS, dtype=np.int64)
            finished = np.zeros(batch, dtype=bool)
            out = []
            for _ in range(max_len):
                logp, state = self._step(c, tokens, state)  # [B, V]
                tokens = np.where(finished, PAD, logp.argmax(axis=-1)).astype(np.int64)  # [B]
                out.append(tokens)
                finished |= tokens == EOS
                if finished.all():
                    break
        return np.stack(out, axis=1) if out else np.zeros((batch, 0), dtype=np.int64)

    def beam_search(
        self,
        cond: np.ndarray | Tensor,
        beam_size: int = 4,
        max_len: int | None = None,
        length_penalty: float = 0.0,
    ) -> np.ndarray:
        """The best of ``beam_size`` hypotheses per row: int64 ids [B, L], like :meth:`greedy`.

        All B * beam_size hypotheses step together. A finished hypothesis only extends with
        ``<pad>`` at zero cost. The final choice ranks ``log p / length ** length_penalty``
        (length counts ``<eos>``); ``length_penalty=0`` ranks by log-probability.
        ``beam_size=1`` gives exactly :meth:`greedy`'s result.
        """
        if beam_size < 1:
            raise ValueError(f"{self._who()}.beam_search: beam_size must be >= 1, got {beam_size}")
        max_len = self.max_len if max_len is None else max_len
        k = beam_size
        with paddle.no_grad():
            c, state = self._start(cond, "beam_search")
            batch, vocab = c.shape[0], self.vocab_size
            c = paddle.repeat_interleave(c, k, axis=0)  # [B*K, C]
            state = paddle.repeat_interleave(state, k, axis=1)  # [1, B*K, H]
            scores = np.full((batch, k), -np.inf)  # [B, K]; beams 1.. start empty
            scores[:, 0] = 0.0
            finished = np.zeros((batch, k), dtype=bool)
            lengths = np.zeros((batch, k))
            history = np.zeros((batch, k, 0), dtype=np.int64)  # [B, K, t]
            tokens = np.full(batch * k, BOS, dtype=np.int64)
            rows = np.arange(batch)[:, None] * k  # [B, 1]
            for _ in range(max_len):
                logp, state = self._step(c, tokens, state)
                logp = logp.reshape(batch, k, vocab)  # [B, K, V]
                logp[finished] = -np.inf
                logp[finished, PAD] = 0.0
                cand = (scores[..., None] + logp).reshape(batch, k * vocab)  # [B, K*V]
                top = np.argsort(-cand, axis=1, kind="stable")[:, :k]  # [B, K]; ties: lowest id
                src, word = top // vocab, top % vocab  # [B, K]
                scores = np.take_along_axis(cand, top, axis=1)
                was_done = np.take_along_axis(finished, src, axis=1)
                lengths = np.take_along_axis(lengths, src, axis=1) + ~was_done
                finished = was_done | (word == EOS)
                history = np.concatenate(
                    [np.take_along_axis(history, src[..., None], axis=1), word[..., None]], axis=2
                )
                state = paddle.gather(state, paddle.to_tensor((rows + src).reshape(-1)), axis=1)
                tokens = word.reshape(-1).astype(np.int64)
                if (finished | np.isneginf(scores)).all():
                    break
        if length_penalty:
            scores = scores / np.maximum(lengths, 1.0) ** length_penalty
        best = scores.argmax(axis=1)  # [B]
        return history[np.arange(batch), best]
