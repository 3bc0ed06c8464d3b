"""ConditionedDecoder: what every vector-conditioned text decoder shares.

Teacher forcing (`teacher_forcing_inputs`,
`sequence_loss`, `loss`), sequence
log-probabilities, and batched greedy and beam-search decoding. A decoder family (the GRU
``TextDecoder``, the GPT-style ``TransformerTextDecoder``) only says how to start a
decoding state from the condition, how to take one step and how to reorder its states.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from .base import Encoder, InputSpec, Tensor

TOKENS_FIX = "Give token ids as [B, T] int64, right-padded with 0 (Vocab.encode_batch does this)."

PAD, BOS, EOS = 0, 1, 2


class ConditionedDecoder(Encoder):
    """Next-token logits [B, T, vocab] given a condition [B, cond_dim]; greedy / beam decoding.

    Subclasses set ``vocab_size``, ``cond_dim``, ``max_len`` (and may change ``pad_id``,
    ``bos_id``, ``eos_id``), declare inputs ``cond`` and ``tokens`` and the output
    ``prediction``, and implement `_init_state`, `_next_logits` and
    `_select_state`. Decoding never emits ``pad_id`` or ``bos_id`` before ``eos_id``.
    """

    pad_id, bos_id, eos_id = PAD, BOS, EOS
    vocab_size: int
    cond_dim: int
    max_len: int

    # ------------------------------------------------------------------ subclass hooks
    def _input_fix(self, name: str, spec: InputSpec) -> str:
        if name == "cond":
            return f"Give the condition as [B, {self.cond_dim}] float32 (cast with .astype('float32'))."
        return TOKENS_FIX

    def _init_state(self, cond: Tensor) -> Any:
        """The decoding state before the first token, for conditions [N, C]."""
        raise NotImplementedError

    def _next_logits(self, cond: Tensor, tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        """Logits [N, V] of the token after ``tokens`` [N, 1] (the latest one), and the new state."""
        raise NotImplementedError

    def _select_state(self, state: Any, index: Tensor) -> Any:
        """The state of rows ``index`` (int64 [M]) in that order (beam reordering/expansion)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ teacher forcing
    @staticmethod
    def teacher_forcing_inputs(
        targets: np.ndarray | Tensor, bos_id: int = BOS
    ) -> np.ndarray | Tensor:
        """``<bos> + targets[:, :-1]`` [B, T]: the ``tokens`` input that predicts ``targets``."""
        if isinstance(targets, np.ndarray):
            bos = np.full((targets.shape[0], 1), bos_id, dtype=targets.dtype)
            return np.concatenate([bos, targets[:, :-1]], axis=1)
        return paddle.concat([targets[:, :1] * 0 + bos_id, targets[:, :-1]], axis=1)

    @staticmethod
    def sequence_loss(logits: Tensor, targets: Tensor, pad_id: int = PAD) -> Tensor:
        """Mean cross-entropy of ``logits`` [B, T, V] against ``targets`` [B, T], pads ignored.

        Works on static Values too: ``TextDecoder.sequence_loss(dec.prediction, targets)``.
        """
        targets = paddle.cast(targets, "int64")
        ce = F.cross_entropy(logits, targets.unsqueeze(-1), reduction="none").squeeze(-1)  # [B, T]
        mask = paddle.cast(targets != pad_id, ce.dtype)  # [B, T]
        return (ce * mask).sum() / paddle.clip(mask.sum(), min=1.0)

    def loss(self, cond: np.ndarray | Tensor, targets: np.ndarray | Tensor) -> Tensor:
        """Teacher-forced masked cross-entropy of ``targets`` [B, T] (``...<eos><pad>..``) given ``cond``."""
        if isinstance(targets, np.ndarray):
            targets = paddle.to_tensor(targets)
        inputs = self.teacher_forcing_inputs(targets, self.bos_id)
        logits = self.forward_all(cond, inputs)["prediction"]
        return self.sequence_loss(logits, targets, self.pad_id)

    def log_prob(self, cond: np.ndarray | Tensor, sequences: np.ndarray | Tensor) -> np.ndarray:
        """Model log-probability [B] (float64) of decoded ``sequences`` [B, L], up to ``<eos>``."""
        seqs = sequences.numpy() if isinstance(sequences, Tensor) else np.asarray(sequences)
        seqs = seqs.astype(np.int64)
        with paddle.no_grad():
            inputs = self.teacher_forcing_inputs(seqs, self.bos_id)
            logits = self.forward_all(cond, inputs)["prediction"]
            logp = F.log_softmax(logits, axis=-1).numpy().astype(np.float64)  # [B, L, V]
        picked = np.take_along_axis(logp, seqs[..., None], axis=-1)[..., 0]  # [B, L]
        is_eos = seqs == self.eos_id
        after_eos = np.cumsum(is_eos, axis=1) - is_eos > 0  # [B, L]
        return np.where((seqs != self.pad_id) & ~after_eos, picked, 0.0).sum(axis=1)

    # ------------------------------------------------------------------ decoding
    def _start(self, cond: np.ndarray | Tensor, what: str, max_len: int | None) -> tuple:
        if not paddle.in_dynamic_mode():
            raise RuntimeError(
                f"{self._who()}.{what} decodes step by step in dynamic mode only; call "
                "paddle.disable_static() first (in a static program, fetch dec.prediction "
                "with teacher forcing instead)."
            )
        max_len = self.max_len if max_len is None else int(max_len)
        self._check_decode_length(max_len, what)
        if not self.built:
            self.build()
        c = paddle.to_tensor(cond) if isinstance(cond, np.ndarray) else cond
        bos = paddle.full([c.shape[0], 1], self.bos_id, dtype="int64")
        c, _ = self._check_inputs((c, bos))
        return c, self._init_state(c), max_len

    def _check_decode_length(self, max_len: int, what: str) -> None:
        """Raise if ``max_len`` steps cannot be decoded (subclasses with position limits)."""
        if max_len < 0:
            raise ValueError(f"{self._who()}.{what}: max_len must be >= 0, got {max_len}")

    def _step(self, cond: Tensor, tokens: np.ndarray, state: Any) -> tuple[np.ndarray, Any]:
        """One decoding step for N rows: log-probs [N, V] (float64, pad/bos banned), new state."""
        logits, state = self._next_logits(cond, paddle.to_tensor(tokens.reshape(-1, 1)), state)
        logp = F.log_softmax(logits, axis=-1).numpy().astype(np.float64)  # exact widening
        logp[:, [self.pad_id, self.bos_id]] = -np.inf
        return logp, state

    def greedy(self, cond: np.ndarray | Tensor, max_len: int | None = None) -> np.ndarray:
        """Most likely next token at each step: int64 ids [B, L] (no ``<bos>``; ``<eos>``, then pads).

        All rows step together; decoding stops once every row has emitted ``<eos>`` or after
        ``max_len`` (default: the decoder's ``max_len``) steps.
        """
        with paddle.no_grad():
            c, state, max_len = self._start(cond, "greedy", max_len)
            batch = c.shape[0]
            tokens = np.full(batch, self.bos_id, dtype=np.int64)
            finished = np.zeros(batch, dtype=bool)
            out = []
            for _ in range(max_len):
                logp, state = self._step(c, tokens, state)  # [B, V]
                best = logp.argmax(axis=-1)  # [B]
                tokens = np.where(finished, self.pad_id, best).astype(np.int64)  # [B]
                out.append(tokens)
                finished |= tokens == self.eos_id
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
        """The best of ``beam_size`` hypotheses per row: int64 ids [B, L], like `greedy`.

        All B * beam_size hypotheses step together. A finished hypothesis only extends with
        ``<pad>`` at zero cost. The final choice ranks ``log p / length ** length_penalty``
        (length counts ``<eos>``); ``length_penalty=0`` ranks by log-probability.
        ``beam_size=1`` gives exactly `greedy`'s result.
        """
        if beam_size < 1:
            raise ValueError(f"{self._who()}.beam_search: beam_size must be >= 1, got {beam_size}")
        k = beam_size
        with paddle.no_grad():
            c, state, max_len = self._start(cond, "beam_search", max_len)
            batch, vocab = c.shape[0], self.vocab_size
            expand = paddle.to_tensor(np.repeat(np.arange(batch), k))  # [B*K]
            c = paddle.gather(c, expand, axis=0)  # [B*K, C]
            state = self._select_state(state, expand)
            scores = np.full((batch, k), -np.inf)  # [B, K]; beams 1.. start empty
            scores[:, 0] = 0.0
            finished = np.zeros((batch, k), dtype=bool)
            lengths = np.zeros((batch, k))
            history = np.zeros((batch, k, 0), dtype=np.int64)  # [B, K, t]
            tokens = np.full(batch * k, self.bos_id, dtype=np.int64)
            rows = np.arange(batch)[:, None] * k  # [B, 1]
            for _ in range(max_len):
                logp, state = self._step(c, tokens, state)
                logp = logp.reshape(batch, k, vocab)  # [B, K, V]
                logp[finished] = -np.inf
                logp[finished, self.pad_id] = 0.0
                cand = (scores[..., None] + logp).reshape(batch, k * vocab)  # [B, K*V]
                top = np.argsort(-cand, axis=1, kind="stable")[:, :k]  # [B, K]; ties: lowest id
                src, word = top // vocab, top % vocab  # [B, K]
                scores = np.take_along_axis(cand, top, axis=1)
                was_done = np.take_along_axis(finished, src, axis=1)
                lengths = np.take_along_axis(lengths, src, axis=1) + ~was_done
                finished = was_done | (word == self.eos_id)
                history = np.concatenate(
                    [np.take_along_axis(history, src[..., None], axis=1), word[..., None]], axis=2
                )
                state = self._select_state(state, paddle.to_tensor((rows + src).reshape(-1)))
                tokens = word.reshape(-1).astype(np.int64)
                if (finished | np.isneginf(scores)).all():
                    break
        if length_penalty:
            scores = scores / np.maximum(lengths, 1.0) ** length_penalty
        best = scores.argmax(axis=1)  # [B]
        return history[np.arange(batch), best]
