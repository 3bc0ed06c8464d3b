"""Agents that pass a message across image, text and speech: Captioner, Speaker, Recognizer, Listener.

Each is built from ``encoders/``, owns its optimizer, saves with :meth:`Agent.save` and
loads with ``Agent.load(dir)`` (e.g. ``<run>/checkpoints/step_N/agents/captioner``), so it
works outside any arena:

```python
cap = Agent.load("runs/caption/<time>/checkpoints/step_00001000/agents/captioner")
cap.caption(images)                       # uint8 [N, 64, 64, 3] RGB -> ["a red circle ...", ...]
rec.transcribe(waveforms, sample_rate)    # list of 1-D arrays -> ["a red circle ...", ...]
lis.choose(captions, candidates)          # [N] texts, [N, K, 64, 64, 3] -> int64 [N]
spk.speak(["a red circle above a blue square"])  # -> [int16 waveform at spk.sample_rate]
```

Words: each text agent holds a word :class:`~encoders.Vocab`; ``words`` is a list, or
``"shapes"`` (the caption grammar) or ``"digits"`` ("zero".."nine"). The resolved list is
saved with the agent, so a loaded agent never depends on a preset changing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from encoders.text import EOS, PAD, Vocab

from .base import Agent

__all__ = [
    "Captioner",
    "Listener",
    "Recognizer",
    "Speaker",
    "ctc_greedy",
    "images_to_array",
    "resolve_words",
]


def resolve_words(words: str | Sequence[str]) -> list[str]:
    """A word list: ``"shapes"``, ``"digits"`` or the list itself."""
    if isinstance(words, str):
        if words == "shapes":
            from craftdata.shapes import shapes_vocabulary

            return shapes_vocabulary()
        if words == "digits":
            from craftdata.speech import DIGIT_WORDS

            return list(DIGIT_WORDS)
        raise ValueError(f"words={words!r}: give a list of words, 'shapes' or 'digits'")
    return [str(w) for w in words]


def images_to_array(images: Any, channels: int) -> np.ndarray:
    """Images as float32 [N, C, H, W] in [0, 1].

    Accepts uint8 [N, H, W, C] (RGB, as :func:`craftdata.shapes.load_shapes` gives) or
    uint8 [N, H, W] (grey), or float [N, C, H, W] already scaled.
    """
    x = np.asarray(images)
    if x.dtype == np.uint8:
        if x.ndim == 3:
            x = x[..., None]
        if x.ndim != 4 or x.shape[-1] != channels:
            raise ValueError(
                f"expected uint8 images [N, H, W, {channels}] (or [N, H, W] when grey), got "
                f"{list(x.shape)}"
            )
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2), dtype=np.float32) / np.float32(255)
    if x.ndim != 4 or x.shape[1] != channels:
        raise ValueError(
            f"expected float images [N, {channels}, H, W] in [0, 1] or uint8 [N, H, W, "
            f"{channels}], got {list(x.shape)} {x.dtype}"
        )
    return np.ascontiguousarray(x, dtype=np.float32)


def _batches(n: int, size: int):
    for i in range(0, n, size):
        yield slice(i, min(n, i + size))


class _TextAgent(Agent):
    vocab: Vocab

    def _encode_texts(self, texts: Sequence[str], add_eos: bool = True) -> np.ndarray:
        return self.vocab.encode_batch(list(texts), add_eos=add_eos)


# ----------------------------------------------------------------------------- captioner
class Captioner(_TextAgent):
    """Image -> caption: ``ImageCNNEncoder`` (``<name>.image``) + ``TextDecoder`` (``<name>.text``).

    Teacher-forced training (:meth:`loss`); batched greedy or beam decoding (:meth:`caption`).
    The decoder is conditioned on the image embedding; its ``vocab_size`` and
    ``cond_dim`` are filled in from ``words`` and the image encoder.

    Args:
        encoder: ImageCNNEncoder config (``num_classes`` is forced to None).
        decoder: TextDecoder config (``vocab_size``/``cond_dim`` are filled in).
        words: vocabulary (list, ``"shapes"`` or ``"digits"``).
        beam_size: default decoding: 1 = greedy, > 1 = beam search.
    """

    def __init__(
        self,
        name: str,
        encoder: Any,
        decoder: Any,
        words: Any = "shapes",
        beam_size: int = 1,
        **common: Any,
    ) -> None:
        words = resolve_words(words)
        cfg = {"encoder": encoder, "decoder": decoder, "words": words, "beam_size": beam_size}
        super().__init__(name, config=cfg, **common)
        self.vocab = Vocab(words)
        self.beam_size = int(beam_size)
        with self.seeded():
            self.encoder = self.make_encoder({**dict(encoder), "num_classes": None}, "image")
            dec = {
                **dict(decoder),
                "vocab_size": len(self.vocab),
                "cond_dim": self.encoder.embedding_dim,
            }
            self.decoder = self.make_encoder(dec, "text")
        self.channels = self.encoder.in_channels
        self.finish()

    def embed(self, images: Any) -> paddle.Tensor:
        """Image embeddings [N, D] (the decoder's condition)."""
        x = images if isinstance(images, paddle.Tensor) else images_to_array(images, self.channels)
        return self.encoder.forward_all(self.to_tensor(x))["embedding"]

    def loss(self, images: Any, captions: Sequence[str]) -> paddle.Tensor:
        """Teacher-forced cross-entropy of ``captions`` given ``images``."""
        targets = self.to_tensor(self._encode_texts(captions))
        return self.decoder.loss(self.embed(images), targets)

    @paddle.no_grad()
    def caption(
        self, images: Any, beam_size: int | None = None, batch_size: int = 256
    ) -> list[str]:
        """Captions of uint8 [N, H, W, 3] RGB images (greedy when ``beam_size`` is 1)."""
        beam = self.beam_size if beam_size is None else int(beam_size)
        x = images_to_array(images, self.channels)
        was = self.training
        self.eval()
        out: list[str] = []
        try:
            for sl in _batches(len(x), batch_size):
                cond = self.embed(x[sl])
                ids = (
                    self.decoder.greedy(cond)
                    if beam == 1
                    else self.decoder.beam_search(cond, beam_size=beam)
                )
                out += self.vocab.decode_batch(ids)
        finally:
            self.train(was)
        return out


# ----------------------------------------------------------------------------- listener
class Listener(_TextAgent):
    """Text + K candidate images -> the index of the described image (a referential game).

    ``TextEncoder`` (``<name>.text``) and ``ImageCNNEncoder`` (``<name>.image``) embed both
    sides; linear heads (``<name>.text_proj``, ``<name>.image_proj``) map them to ``dim``;
    the score is cosine similarity / ``temperature``. Trained with cross-entropy over
    in-batch candidates (other images with the same text are masked out, both directions).

    Args:
        encoder: the image side, an ImageCNNEncoder config (``num_classes`` forced to None).
        text_encoder: TextEncoder config (``vocab_size`` is filled in, no ``num_classes``).
        words: vocabulary (list, ``"shapes"`` or ``"digits"``).
        dim: joint embedding size.
        temperature: softmax temperature of the cosine scores.
    """

    def __init__(
        self,
        name: str,
        encoder: Any,
        text_encoder: Any,
        words: Any = "shapes",
        dim: int = 64,
        temperature: float = 0.1,
        **common: Any,
    ) -> None:
        words = resolve_words(words)
        cfg = {
            "encoder": encoder,
            "text_encoder": text_encoder,
            "words": words,
            "dim": dim,
            "temperature": temperature,
        }
        super().__init__(name, config=cfg, **common)
        self.vocab = Vocab(words)
        self.temperature = float(temperature)
        with self.seeded():
            tcfg = {**dict(text_encoder), "vocab_size": len(self.vocab), "num_classes": None}
            self.text_encoder = self.make_encoder(tcfg, "text")
            self.image_encoder = self.make_encoder({**dict(encoder), "num_classes": None}, "image")
            t_dim, i_dim = self.text_encoder.hidden_size, self.image_encoder.embedding_dim
            self.text_proj = self.make_head("text_proj", lambda: nn.Linear(t_dim, dim))
            self.image_proj = self.make_head("image_proj", lambda: nn.Linear(i_dim, dim))
        self.channels = self.image_encoder.in_channels
        self.finish()

    def embed_texts(self, texts: Sequence[str]) -> paddle.Tensor:
        """Unit-norm text embeddings [N, dim]."""
        tokens = self.to_tensor(self._encode_texts(texts, add_eos=False))
        return F.normalize(
            self.text_proj(self.text_encoder.forward_all(tokens)["embedding"]), axis=-1
        )

    def embed_images(self, images: Any) -> paddle.Tensor:
        """Unit-norm image embeddings [N, dim] from uint8 [N, H, W, C] (or float [N, C, H, W])."""
        x = images if isinstance(images, paddle.Tensor) else images_to_array(images, self.channels)
        emb = self.image_encoder.forward_all(self.to_tensor(x))["embedding"]
        return F.normalize(self.image_proj(emb), axis=-1)

    def loss(self, texts: Sequence[str], images: Any) -> paddle.Tensor:
        """Symmetric in-batch cross-entropy: text i should pick image i and vice versa."""
        t, v = self.embed_texts(texts), self.embed_images(images)
        logits = paddle.matmul(t, v, transpose_y=True) / self.temperature  # [B, B]
        keys = np.array([" ".join(Vocab.tokenize(s)) for s in texts])
        same = (keys[:, None] == keys[None, :]) & ~np.eye(len(keys), dtype=bool)
        logits = logits - self.to_tensor(same.astype(np.float32) * 1e4)  # same text: not a negative
        target = self.to_tensor(np.arange(len(keys), dtype=np.int64))
        return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))

    @paddle.no_grad()
    def scores(self, texts: Sequence[str], candidates: Any, batch_size: int = 256) -> np.ndarray:
        """Scores [N, K] of ``candidates`` [N, K, H, W, C] for each text."""
        cand = np.asarray(candidates)
        n, k = cand.shape[:2]
        if len(texts) != n:
            raise ValueError(f"Listener.scores: {len(texts)} texts but {n} candidate sets")
        was = self.training
        self.eval()
        try:
            out = []
            for sl in _batches(n, max(1, batch_size // k)):
                t = self.embed_texts(texts[sl])  # [b, d]
                flat = cand[sl].reshape(-1, *cand.shape[2:])
                v = self.embed_images(flat).reshape([t.shape[0], k, -1])  # [b, K, d]
                out.append((v * t.unsqueeze(1)).sum(-1).numpy())
        finally:
            self.train(was)
        return np.concatenate(out) if out else np.zeros((0, k), np.float32)

    def choose(self, texts: Sequence[str], candidates: Any) -> np.ndarray:
        """The index (int64 [N]) of the candidate each text describes best."""
        return self.scores(list(texts), candidates).argmax(axis=1).astype(np.int64)


# ----------------------------------------------------------------------------- recognizer
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


class Recognizer(_TextAgent):
    """Waveform -> text: ``SpeechEncoder`` (``<name>.speech``) + a CTC or seq2seq head.

    ``head="ctc"``: a linear layer (``<name>.ctc``) over the encoder's frames, word-level
    CTC with ``<pad>`` as the blank, best-path decoding. ``head="seq2seq"``: a
    ``TextDecoder`` (``<name>.text``) conditioned on the utterance embedding, greedy.

    Args:
        encoder: SpeechEncoder config (``num_classes`` forced to None).
        decoder: TextDecoder config for ``head="seq2seq"`` (ignored for CTC).
        head: ``ctc`` or ``seq2seq``.
        words: vocabulary (list, ``"shapes"`` or ``"digits"``).
    """

    def __init__(
        self,
        name: str,
        encoder: Any,
        decoder: Any = None,
        head: str = "ctc",
        words: Any = "shapes",
        **common: Any,
    ) -> None:
        if head not in ("ctc", "seq2seq"):
            raise ValueError(f"agents.{name}.head must be 'ctc' or 'seq2seq', got {head!r}")
        if head == "seq2seq" and not decoder:
            raise ValueError(f"agents.{name}: head=seq2seq needs a decoder config")
        words = resolve_words(words)
        cfg = {"encoder": encoder, "decoder": decoder, "head": head, "words": words}
        super().__init__(name, config=cfg, **common)
        self.vocab = Vocab(words)
        self.head = head
        with self.seeded():
            self.encoder = self.make_encoder({**dict(encoder), "num_classes": None}, "speech")
            if head == "ctc":
                size, n = self.encoder.frame_size, len(self.vocab)
                self.ctc = self.make_head("ctc", lambda: nn.Linear(size, n))
            else:
                dec = {
                    **dict(decoder),
                    "vocab_size": len(self.vocab),
                    "cond_dim": self.encoder.embedding_dim,
                }
                self.decoder = self.make_encoder(dec, "text")
        self.sample_rate = int(self.encoder.sample_rate)
        self.finish()

    def prepare(self, waveforms: Any, sample_rate: int | None = None) -> np.ndarray:
        """float32 [B, S] at the model's rate, zero-padded at the end (int16 is scaled to [-1, 1))."""
        from craftdata.speech import resample, to_float

        rate = self.sample_rate if sample_rate is None else int(sample_rate)
        if isinstance(waveforms, np.ndarray) and waveforms.ndim == 2:
            waveforms = list(waveforms)
        clips = [to_float(resample(np.asarray(w), rate, self.sample_rate)) for w in waveforms]
        width = max([self.encoder.min_samples, *(len(c) for c in clips)])
        out = np.zeros((len(clips), width), np.float32)
        for i, c in enumerate(clips):
            out[i, : len(c)] = c
        return out

    def _ctc_logits(self, x: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        frames = self.encoder.frames(x)  # [B, T, H]
        return self.ctc(frames), self.encoder.frame_lengths(x)  # [B, T, V], [B]

    def loss(self, waveforms: np.ndarray, texts: Sequence[str]) -> paddle.Tensor:
        """Training loss for a padded batch (:meth:`prepare`) and its transcripts."""
        x = self.to_tensor(waveforms)
        if self.head == "seq2seq":
            cond = self.encoder.forward_all(x)["embedding"]
            return self.decoder.loss(cond, self.to_tensor(self._encode_texts(texts)))
        logits, lengths = self._ctc_logits(x)
        labels = self._encode_texts(texts, add_eos=False)
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
            for sl in _batches(len(order), batch_size):
                idx = order[sl]
                x = self.to_tensor(self.prepare([clips[i] for i in idx], sample_rate))
                if self.head == "ctc":
                    logits, lengths = self._ctc_logits(x)
                    ids = ctc_greedy(logits.numpy(), lengths.numpy())
                    texts = [self.vocab.decode(r + [EOS]) for r in ids]
                else:
                    cond = self.encoder.forward_all(x)["embedding"]
                    texts = self.vocab.decode_batch(self.decoder.greedy(cond))
                for i, t in zip(idx, texts):
                    out[int(i)] = t
        finally:
            self.train(was)
        return out


# ----------------------------------------------------------------------------- speaker
class Speaker(Agent):
    """Text -> speech with eSpeak NG: a fixed (non-learned) agent with no parameters.

    Each text is spoken with a voice drawn from ``voices`` (``"train"``/``"test"``: the
    seeded split of :func:`craftdata.speech.split_voices`, ``"all"``, or a list of
    variant names), plus a random accent, rate, pitch and range; the draw depends only
    on ``seed`` and the call's ``seed``, and synthesis is bit-identical per list.

    Args:
        voices: which voices to speak with.
        encoder: unused (eSpeak NG does the work); accepted so every agent config has an
            ``encoder`` slot.
        sample_rate: output rate (resampled from eSpeak's 22050 Hz).
        voice_seed: seed of the train/test voice split.
        test_fraction: share of voices in the test split.
    """

    def __init__(
        self,
        name: str,
        voices: Any = "test",
        sample_rate: int = 16000,
        voice_seed: int = 0,
        test_fraction: float = 0.2,
        encoder: Any = None,
        **common: Any,
    ) -> None:
        cfg = {
            "voices": voices,
            "sample_rate": sample_rate,
            "voice_seed": voice_seed,
            "test_fraction": test_fraction,
        }
        super().__init__(name, config=cfg, **common)
        self.sample_rate = int(sample_rate)
        self._voices_cfg, self.voice_seed, self.test_fraction = voices, voice_seed, test_fraction
        self.finish()

    @property
    def voices(self) -> list[str]:
        """The voice variants this speaker draws from."""
        return self.resolve_voices(self._voices_cfg)

    def resolve_voices(self, v: Any) -> list[str]:
        """``"train"``/``"test"`` (this speaker's split), ``"all"`` or a list -> variant names."""
        from craftdata.speech import espeak_voices, split_voices

        if isinstance(v, str):
            if v == "all":
                return espeak_voices()
            train, test = split_voices(self.voice_seed, self.test_fraction)
            if v in ("train", "test"):
                return train if v == "train" else test
            raise ValueError(
                f"agents.{self.name}.voices: 'train', 'test', 'all' or a list, got {v!r}"
            )
        return [str(x) for x in v]

    def speak(self, texts: Sequence[str], seed: int = 0, cache: bool = False) -> list[np.ndarray]:
        """int16 waveforms at :attr:`sample_rate`, one per text."""
        return self.speak_split(texts, seed, cache).waveforms

    def speak_split(
        self, texts: Sequence[str], seed: int = 0, cache: bool = False, voices: Any = None
    ) -> Any:
        """Like :meth:`speak`, as a :class:`craftdata.speech.SpokenSplit` (with each voice).

        ``voices`` overrides the configured ones for this call (e.g. ``"train"``).
        """
        from craftdata.speech import spoken_split

        base = 0 if self.seed is None else int(self.seed)
        pool = self.voices if voices is None else self.resolve_voices(voices)
        return spoken_split(
            list(texts), pool, [base, int(seed), 0x5E], self.sample_rate, cache=cache
        )
