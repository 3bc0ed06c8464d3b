"""SpeechEncoder: log-mel frontend -> strided conv blocks -> GRU -> pooled embedding [-> logits]."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn
from paddle.audio.functional import compute_fbank_matrix
from paddle.audio.functional.window import get_window

from paddlecraft.paddle_private import eager_guard

from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, Tensor
from .image_mlp import dense


class LogMelFrontend(nn.Layer):
    """Waveforms [B, S] -> log-mel power spectrogram in dB [B, n_mels, 1 + S // hop_length].

    Computes exactly what ``paddle.audio.features.LogMelSpectrogram`` (``power=2``, hann
    window, centred reflect padding, slaney mel filters, ``top_db=None``) computes, but
    also inside a static program: in Paddle 3.3.1 ``LogMelSpectrogram`` cannot be built
    in static mode (``register_buffer`` raises ``KeyError: attribute 'fft_window' already
    exists``) and ``paddle.signal.stft`` rejects a static window (``len()`` of a Value).
    Here the STFT is framing + window + ``rfft``, and the window and filter bank are
    constants: non-persistable buffers in dynamic mode (not parameters, not in
    ``state_dict``), constants of the program in static mode. No trainable parameters.
    """

    def __init__(
        self,
        sample_rate: int,
        n_fft: int,
        hop_length: int,
        n_mels: int,
        f_min: float = 50.0,
        amin: float = 1e-10,
    ) -> None:
        super().__init__()
        self.n_fft, self.hop_length, self.n_mels, self.amin = n_fft, hop_length, n_mels, amin
        dtype = paddle.get_default_dtype()
        if paddle.in_dynamic_mode():
            window, fbank = _mel_constants(sample_rate, n_fft, n_mels, f_min, dtype)
        else:  # the paddle.audio helpers run ops: evaluate them eagerly, keep numpy
            with eager_guard():
                window, fbank = _mel_constants(sample_rate, n_fft, n_mels, f_min, dtype)
        self._window_np, self._fbank_np = window, fbank  # [n_fft], [n_mels, n_fft // 2 + 1]
        if paddle.in_dynamic_mode():
            self.register_buffer("window", paddle.to_tensor(window), persistable=False)
            self.register_buffer("fbank", paddle.to_tensor(fbank), persistable=False)

    def _constants(self) -> tuple[Tensor, Tensor]:
        if paddle.in_dynamic_mode():
            return self.window, self.fbank
        # static: constants of whichever program is being built
        return paddle.to_tensor(self._window_np), paddle.to_tensor(self._fbank_np)

    def forward(self, x: Tensor) -> Tensor:
        window, fbank = self._constants()
        pad = self.n_fft // 2
        x = F.pad(x.unsqueeze(-1), [pad, pad], mode="reflect", data_format="NLC").squeeze(-1)
        frames = paddle.signal.frame(x, self.n_fft, self.hop_length, axis=-1)  # [B, n_fft, T]
        spec = paddle.fft.rfft(frames * window.unsqueeze(-1), axis=1)  # [B, n_fft/2+1, T]
        power = paddle.real(spec) ** 2 + paddle.imag(spec) ** 2  # [B, n_fft/2+1, T]
        mel = paddle.matmul(fbank, power)  # [B, n_mels, T]
        # power_to_db(mel, top_db=None) without its ones_like: a forward full_like op would
        # be taken for the loss seed by Encoder.get_gradient in static mode
        return 10.0 * paddle.log10(paddle.clip(mel, min=self.amin))  # [B, n_mels, T] dB


def _mel_constants(
    sample_rate: int, n_fft: int, n_mels: int, f_min: float, dtype: str
) -> tuple[np.ndarray, np.ndarray]:
    window = get_window("hann", n_fft, fftbins=True, dtype=dtype).numpy()
    fbank = compute_fbank_matrix(
        sr=sample_rate, n_fft=n_fft, n_mels=n_mels, f_min=f_min, f_max=sample_rate // 2, dtype=dtype
    ).numpy()
    return window, fbank


class ConvBlock1D(nn.Layer):
    """Conv1D (kernel 3, stride 2 in time) -> BatchNorm1D -> ReLU (``conv``, ``bn``)."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv1D(c_in, c_out, 3, stride=2, padding=1, bias_attr=False)
        self.bn = nn.BatchNorm1D(c_out)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)))  # [B, c_out, ceil(T / 2)]


class GRU(nn.GRU):
    """``paddle.nn.GRU`` that can be differentiated in eval mode too.

    Paddle 3.3.1's fused ``rnn`` op keeps no reserve space when ``is_test`` (eval mode),
    so a backward through it raises ``Tensor holds no memory``. Without dropout the op
    computes the same values in both modes, so while gradients are recorded (dynamic mode)
    it runs as in training; ``paddle.no_grad()`` inference keeps the eval path.
    """

    def forward(
        self,
        inputs: Tensor,
        initial_states: Tensor | None = None,
        sequence_length: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        as_train = (
            not self.training
            and self.dropout == 0
            and paddle.in_dynamic_mode()
            and paddle.is_grad_enabled()
        )
        if not as_train:
            return super().forward(inputs, initial_states, sequence_length)
        self.training = True
        try:
            return super().forward(inputs, initial_states, sequence_length)
        finally:
            self.training = False


def _frontend(sample_rate: int, n_fft: int, hop_length: int, n_mels: int) -> LayerSpec:
    return LayerSpec(
        lambda: LogMelFrontend(sample_rate, n_fft, hop_length, n_mels),
        ("logmel", sample_rate, n_fft, hop_length, n_mels),
    )


def _conv(c_in: int, c_out: int) -> LayerSpec:
    return LayerSpec(lambda: ConvBlock1D(c_in, c_out), ("conv1d", c_in, c_out, 2))


def _gru(input_size: int, hidden_size: int, bidirectional: bool) -> LayerSpec:
    direction = "bidirect" if bidirectional else "forward"
    return LayerSpec(
        lambda: GRU(input_size, hidden_size, direction=direction),
        ("gru", input_size, hidden_size, direction),
    )


class SpeechEncoder(Encoder):
    """Utterance embeddings (and class logits) from raw waveforms; per-frame features via `frames`.

    Logical layers: ``frontend`` (log-mel spectrogram, no parameters), ``conv_1`` ..
    ``conv_n`` (Conv1D over the mel frames + BN + ReLU, stride 2 in time, one per entry of
    ``channels``), ``rnn`` (GRU, bidirectional by default), ``embedding`` (linear + ReLU
    to ``embedding_dim`` from the masked mean over time of the GRU output, or from its
    last states with ``pool="last"``) and, with ``num_classes``, ``prediction`` (logits).

    Input ``waveform``: [B, S] float (any S, at least ``n_fft // 2 + 1`` samples and at
    most ``max_seconds * sample_rate`` when ``max_seconds`` is set). Utterances of
    different lengths are zero-padded at the end to one S; each utterance's length is
    taken as the position of its last non-zero sample, so padding is masked out of the
    GRU (``sequence_length``) and of the pooling. ``normalize`` scales each utterance to
    unit RMS over its own samples before the frontend.

    Outputs: ``prediction`` [B, num_classes] (primary, when ``num_classes``), ``pooled``
    [B, feature_dim], ``hidden`` [B, T', feature_dim] (the ``embedding`` layer applied to
    every GRU frame, for a CTC head) and ``lengths`` int64 [B] (valid frames per utterance;
    later frames are padding). ``feature_dim = embedding_dim``; with ``embedding_dim=None``
    there is no ``embedding`` layer and both are the GRU's own features
    (``feature_dim = frame_size``).
    """

    def __init__(
        self,
        scope: str,
        sample_rate: int = 16000,
        n_mels: int = 64,
        n_fft: int = 512,
        hop_length: int = 160,
        channels: Sequence[int] = (32, 64),
        hidden_size: int = 128,
        embedding_dim: int | None = 128,
        num_classes: int | None = None,
        max_seconds: float | None = None,
        bidirectional: bool = True,
        pool: str = "mean",
        normalize: bool = True,
    ) -> None:
        super().__init__(scope)
        if pool not in ("mean", "last"):
            raise ValueError(
                f"SpeechEncoder({scope!r}): pool must be 'mean' or 'last', got {pool!r}"
            )
        if hop_length <= 0 or n_fft <= 0:
            raise ValueError(f"SpeechEncoder({scope!r}): n_fft and hop_length must be positive")
        self.sample_rate, self.n_mels = sample_rate, n_mels
        self.n_fft, self.hop_length = n_fft, hop_length
        self.channels = tuple(channels)
        self.hidden_size = hidden_size
        self.num_classes = num_classes
        self.bidirectional, self.pool, self.normalize = bidirectional, pool, normalize
        self.max_samples = None if max_seconds is None else int(round(max_seconds * sample_rate))
        self.min_samples = n_fft // 2 + 1  # reflect padding needs more samples than n_fft // 2
        self.frame_size = hidden_size * (2 if bidirectional else 1)  # H of frames()
        self.feature_dim = self.frame_size if embedding_dim is None else embedding_dim

        self.declare("frontend", _frontend(sample_rate, n_fft, hop_length, n_mels))
        c = n_mels
        for i, c_out in enumerate(self.channels, start=1):
            self.declare(f"conv_{i}", _conv(c, c_out))
            c = c_out
        self.declare("rnn", _gru(c, hidden_size, bidirectional))
        if embedding_dim is not None:
            self.declare("embedding", dense(self.frame_size, embedding_dim))
        if num_classes is not None:
            self.declare("prediction", dense(self.feature_dim, num_classes))
        dtype = paddle.get_default_dtype()
        self.declare_input("waveform", InputSpec((None,), dtypes=(dtype,)))
        names = ("pooled", "hidden", "lengths")
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    # ----------------------------------------------------------------- inputs
    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return (
            f"Give mono waveforms as [B, S] {spec.dtypes[0]} at {self.sample_rate} Hz, "
            "zero-padded at the end to one length S."
        )

    def _check_inputs(self, inputs: tuple) -> list[Tensor]:
        xs = super()._check_inputs(inputs)
        if paddle.in_dynamic_mode() and isinstance(xs[0], Tensor):
            s = xs[0].shape[1]
            too_long = self.max_samples is not None and s > self.max_samples
            if s < self.min_samples or too_long:
                most = "" if self.max_samples is None else f" and at most {self.max_samples}"
                raise EncoderInputError(
                    f"{self._who()} input 'waveform': got {s} samples per utterance, expected "
                    f"at least {self.min_samples} (n_fft // 2 + 1){most}. Pad short clips with "
                    "zeros; crop or split long ones (or raise max_seconds)."
                )
        return xs

    # ----------------------------------------------------------------- per-frame features
    def _valid_samples(self, x: Tensor) -> Tensor:
        """Samples up to the last non-zero one, per utterance: int64 [B]."""
        nonzero = (paddle.abs(x) > 0).astype("int64")  # [B, S]
        total = paddle.shape(x)[1].astype("int64")
        # argmax of the flipped mask = trailing zeros (an all-zero clip counts as full length)
        return total - paddle.argmax(paddle.flip(nonzero, [1]), axis=1)  # [B]

    def _frame_lengths(self, samples: Tensor) -> Tensor:
        lengths = 1 + samples // self.hop_length  # frontend frames, [B]
        for _ in self.channels:
            lengths = (lengths - 1) // 2 + 1  # each stride-2 block: ceil(T / 2)
        return lengths  # [B]

    def _features(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """GRU frames [B, T', H], valid frame counts int64 [B], last states [B, H]."""
        samples = self._valid_samples(x)  # [B]
        if self.normalize:
            n = paddle.clip(samples, min=1).astype(x.dtype).unsqueeze(-1)  # [B, 1]
            rms = paddle.sqrt(paddle.sum(x * x, axis=1, keepdim=True) / n)  # [B, 1]
            x = x / (rms + 1e-5)  # [B, S]; zero padding stays zero
        h = self.layers["frontend"](x)  # [B, n_mels, T]
        for i in range(1, len(self.channels) + 1):
            h = self.layers[f"conv_{i}"](h)  # [B, c_i, T_i]
        lengths = self._frame_lengths(samples)  # [B]
        seq = paddle.transpose(h, [0, 2, 1])  # [B, T', c_n]
        frames, last = self.layers["rnn"](seq, sequence_length=lengths.astype("int32"))
        # frames [B, T', H]; last [dirs, B, hidden] (forward: end of utterance, backward: start)
        last = paddle.concat(paddle.unbind(last, axis=0), axis=-1)  # [B, H]
        return frames, lengths, last

    def frames(self, waveform: Any) -> Tensor:
        """Per-frame GRU features [B, T', H] (H = hidden_size x directions), e.g. for CTC.

        T' is ``1 + S // hop_length`` halved (rounded up) once per conv block; frames past
        an utterance's length (see `frame_lengths`) are zero.
        """
        if not self.built:
            self.build()
        (x,) = self._check_inputs((waveform,))
        return self._features(x)[0]

    def frame_lengths(self, waveform: Any) -> Tensor:
        """Valid frames of `frames` per utterance: int64 [B] (for CTC input lengths)."""
        if not self.built:
            self.build()
        (x,) = self._check_inputs((waveform,))
        return self._frame_lengths(self._valid_samples(x))

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        frames, lengths, last = self._features(x)  # [B, T', H], [B], [B, H]
        if self.pool == "mean":
            steps = paddle.arange(paddle.shape(frames)[1], dtype="int64")  # [T']
            mask = (steps.unsqueeze(0) < lengths.unsqueeze(1)).astype(frames.dtype)  # [B, T']
            total = paddle.sum(frames * mask.unsqueeze(-1), axis=1)  # [B, H]
            pooled = total / paddle.sum(mask, axis=1, keepdim=True)  # [B, H]
        else:
            pooled = last  # [B, H]
        if "embedding" in self.layers:
            emb = F.relu(self.layers["embedding"](pooled))  # [B, feature_dim]
            hidden = F.relu(self.layers["embedding"](frames))  # [B, T', feature_dim]
        else:  # embedding_dim None: the GRU's own features
            emb, hidden = pooled, frames  # [B, H], [B, T', H]
        out = {"pooled": emb, "hidden": hidden, "lengths": lengths}
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](emb)  # [B, num_classes]
        return out
