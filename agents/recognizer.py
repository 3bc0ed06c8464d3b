"""Waveform -> text: the `Recognizer` agent (SpeechEncoder + CTC or seq2seq).

```python
rec.transcribe(waveforms, sample_rate)   # list of 1-D arrays -> ["a red circle ...", ...]
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from omegaconf import MISSING
from paddle import nn

from paddlecraft.compat import recognizer_ctc_0_1
from paddlecraft.encoders.vocab import EOS, PAD, Vocab

from .base import AgentConfig
from .settings import ConfigError
from .text_agent import TextAgent, batch_slices

__all__ = ["Recognizer", "RecognizerConfig", "ctc_greedy"]


def ctc_greedy(logits: np.ndarray, lengths: np.ndarray, blank: int = PAD) -> list[list[int]]:
    """Best-path CTC decoding: argmax per frame, merge repeats, drop blanks."""
    best = logits.argmax(-1)  # [B, T]
    out = []
    for row, n in zip(best, lengths):
        ids, prev = [], blank
        for t in row[: int(n)]:
            if t != prev and t != blank:
                ids.append(int(t))
            prev = t
        out.append(ids)
    return out


HEADS = ("ctc", "seq2seq")
UNITS = ("words", "chars")
SPACE = "|"  # the space between words, as a character token (units=chars)


@dataclass
class RecognizerConfig(AgentConfig):
    """paddlecraft.agents.Recognizer settings."""

    encoder: Any = MISSING
    #: ^ speech encoder config (conf/encoder/speech, whisper_tiny...); built headless
    decoder: Any = None
    #: ^ text decoder config (conf/decoder/*) for head=seq2seq (ignored by ctc)
    head: str = "ctc"  #: ctc (word-level CTC, <pad> is the blank) | seq2seq
    words: Any = "shapes"  #: vocabulary: shapes | digits | a list of words (of characters: chars)
    units: str = "words"  #: words (a token per word) | chars (a token per character; data=speech)


class Recognizer(TextAgent):
    """Waveform -> text: a speech encoder (``<name>.speech``) + a CTC or seq2seq head.

    ``head="ctc"``: a linear layer (``<name>.ctc``) over the encoder's frames, word-level
    CTC with ``<pad>`` as the blank, best-path decoding. ``head="seq2seq"``: a
    ``TextDecoder`` (``<name>.text``) conditioned on the utterance embedding, greedy.

    Args:
        name: the agent's scope.
        **settings: `RecognizerConfig` fields.
    """

    Config = RecognizerConfig

    @classmethod
    def upgrade_saved(
        cls, config: dict[str, Any], shapes: Mapping[str, tuple[int, ...]], name: str
    ) -> dict[str, str | None]:
        """CTC recognizers saved before the feature contract (PaddleCraft 0.1) load
        unchanged (`paddlecraft.compat.recognizer_ctc_0_1`)."""
        return recognizer_ctc_0_1(config, shapes, name)

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        c = self.cfg
        if c.head not in HEADS:
            raise ConfigError(f"agents.{name}.head must be one of {HEADS}, got {c.head!r}")
        if c.head == "seq2seq" and not c.decoder:
            raise ConfigError(f"agents.{name}: head=seq2seq needs a decoder config")
        if c.units not in UNITS:
            raise ConfigError(f"agents.{name}.units must be one of {UNITS}, got {c.units!r}")
        self.use_words()
        if not isinstance(self.vocab, Vocab):
            raise ConfigError(f"agents.{name}.words: a recognizer takes words or characters")
        self.chars = c.units == "chars"
        if self.chars:  # characters as tokens; the space becomes SPACE
            long = [w for w in self.cfg.words if len(w) != 1]
            if long:
                raise ConfigError(
                    f"agents.{name}.words: units=chars takes single characters, got {long[:3]}"
                )
            self.vocab = Vocab([SPACE if w == " " else w for w in self.cfg.words])
        self.head = c.head
        with self.seeded():
            self.encoder = self.make_encoder(
                c.encoder,
                "speech",
                forced={"waveform_input": True},  # the recognizer reads waveforms
                takes="speech encoder",
                headless=True,
                features=True,
            )
            size = self.encoder.feature_dim
            if self.head == "ctc":
                if "hidden" not in self.encoder.output_names:
                    raise ConfigError(
                        f"agents.{name}.encoder: {type(self.encoder).__name__} has no per-frame "
                        "'hidden' output for the CTC head; use a speech encoder, or head=seq2seq"
                    )
                n = len(self.vocab)
                self.ctc = self.make_head("ctc", lambda: nn.Linear(size, n))
            else:
                dec = {**dict(c.decoder), "vocab_size": len(self.vocab), "cond_dim": size}
                self.decoder = self.make_encoder(dec, "text", slot="decoder", takes="text decoder")
        self.sample_rate = int(self.encoder.sample_rate)
        self.finish()

    def prepare(self, waveforms: Any, sample_rate: int | None = None) -> np.ndarray:
        """float32 [B, S] at the model's rate, zero-padded at the end (int16 is scaled to [-1, 1))."""
        from paddlecraft.craftdata.speech import resample, to_float

        rate = self.sample_rate if sample_rate is None else int(sample_rate)
        if isinstance(waveforms, np.ndarray) and waveforms.ndim == 2:
            waveforms = list(waveforms)
        clips = [to_float(resample(np.asarray(w), rate, self.sample_rate)) for w in waveforms]
        width = max([getattr(self.encoder, "min_samples", 1), *(len(c) for c in clips)])
        out = np.zeros((len(clips), width), np.float32)
        for i, c in enumerate(clips):
            out[i, : len(c)] = c
        return out

    def encode_texts(self, texts: Sequence[str], add_eos: bool = True) -> np.ndarray:
        """int64 token ids [N, T] of ``texts`` (words, or characters with units=chars)."""
        if self.chars:
            texts = [
                " ".join(SPACE if ch == " " else ch for ch in " ".join(t.split())) for t in texts
            ]
        return super().encode_texts(texts, add_eos)

    def _text(self, decoded: str) -> str:
        """Decoded tokens as text (units=chars: characters joined, SPACE back to spaces)."""
        return decoded.replace(" ", "").replace(SPACE, " ") if self.chars else decoded

    def _ctc_logits(self, x: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        outs = self.encoder.forward_all(x)
        frames = outs["hidden"]  # [B, T, F]
        lengths = outs.get("lengths")  # [B]; absent: every frame counts
        if lengths is None:
            lengths = paddle.full([frames.shape[0]], frames.shape[1], dtype="int64")
        return self.ctc(frames), lengths  # [B, T, V], [B]

    def loss(self, waveforms: np.ndarray, texts: Sequence[str]) -> paddle.Tensor:
        """Training loss for a padded batch (`prepare`) and its transcripts."""
        x = self.to_tensor(waveforms)
        if self.head == "seq2seq":
            cond = self.encoder.forward_all(x)["pooled"]
            return self.decoder.loss(cond, self.to_tensor(self.encode_texts(texts)))
        logits, lengths = self._ctc_logits(x)
        labels = self.encode_texts(texts, add_eos=False)
        label_lengths = (labels != PAD).sum(1).astype(np.int64)
        return F.ctc_loss(
            logits.transpose([1, 0, 2]),  # [T, B, V]: unscaled, warp-ctc applies softmax
            self.to_tensor(labels.astype(np.int32)),
            lengths,
            self.to_tensor(label_lengths),
            blank=PAD,
            reduction="mean",
        )

    @paddle.no_grad()
    def transcribe(
        self, waveforms: Any, sample_rate: int | None = None, batch_size: int = 64
    ) -> list[str]:
        """Transcripts of mono waveforms (a list of 1-D arrays, or [B, S]) at ``sample_rate``.

        Clips are batched by length (shortest first) so little padding is computed.
        """
        clips = list(waveforms) if not isinstance(waveforms, list) else waveforms
        order = np.argsort([len(c) for c in clips], kind="stable")
        out: list[str] = [""] * len(clips)
        was = self.training
        self.eval()
        try:
            for sl in batch_slices(len(order), batch_size):
                idx = order[sl]
                x = self.to_tensor(self.prepare([clips[i] for i in idx], sample_rate))
                if self.head == "ctc":
                    logits, lengths = self._ctc_logits(x)
                    ids = ctc_greedy(logits.numpy(), lengths.numpy())
                    texts = [self.vocab.decode(r + [EOS]) for r in ids]
                else:
                    cond = self.encoder.forward_all(x)["pooled"]
                    texts = self.vocab.decode_batch(self.decoder.greedy(cond))
                for i, t in zip(idx, texts):
                    out[int(i)] = self._text(t)
        finally:
            self.train(was)
        return out
