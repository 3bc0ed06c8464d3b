"""WhisperStyleEncoder: Whisper's audio encoder, loading Hugging Face Whisper checkpoints.

Log-mel features [B, n_mels, frames] -> ``conv1`` (k3, GELU) -> ``conv2`` (k3, stride 2,
GELU) -> + fixed sinusoidal positions -> pre-norm blocks -> ``ln_post``. The model input is
the log-mel spectrogram, so outputs can be compared with a reference on the same features;
`whisper_log_mel` (or `WhisperStyleEncoder.log_mel`) computes Whisper's
features from 16 kHz waveforms.

Pretrained files: Hugging Face ``WhisperModel`` / ``WhisperForConditionalGeneration`` /
``WhisperEncoder`` state dicts (keys with ``model.encoder.``, ``encoder.`` or no prefix).
The decoder half of a full Whisper checkpoint (``model.decoder.*``, ``proj_out``) is
skipped on purpose (an encoder has no place for it; the count is logged), so the file
a user has for ``openai/whisper-tiny`` loads with ``strict=True``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from .attention import PreNormBlock, sinusoids
from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, Tensor
from .image_mlp import dense
from .pretrained import PretrainedLoadError
from .speech import LogMelFrontend

log = logging.getLogger(__name__)

#: openai/whisper sizes: (depth, dim, heads); mlp_dim = 4 * dim
WHISPER_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (4, 384, 6),
    "base": (6, 512, 8),
    "small": (12, 768, 12),
    "medium": (24, 1024, 16),
    "large": (32, 1280, 20),
}
N_FFT, HOP_LENGTH = 400, 160  # Whisper's STFT at 16 kHz: 25 ms windows, 10 ms hop


def whisper_log_mel(
    waveforms: np.ndarray | Tensor, n_mels: int = 80, sample_rate: int = 16000
) -> Tensor:
    """Whisper's log-mel features [B, n_mels, S // 160] of waveforms [B, S] (float, 16 kHz).

    Power spectrogram (400-point periodic Hann window, hop 160, centred), slaney mel filters
    up to ``sample_rate / 2``, ``log10`` floored at 1e-10, clamped to 8 below each
    utterance's maximum, then ``(x + 4) / 4``. Whisper pads or crops audio to 30 s first
    (480000 samples -> 3000 frames); do the same for checkpoints trained that way.
    """
    x = paddle.to_tensor(waveforms) if isinstance(waveforms, np.ndarray) else waveforms
    x = x.astype(paddle.get_default_dtype())
    frontend = LogMelFrontend(sample_rate, N_FFT, HOP_LENGTH, n_mels, f_min=0.0, amin=1e-10)
    db = frontend(x)[:, :, :-1]  # [B, n_mels, S // hop]; Whisper drops the last frame
    logmel = db / 10.0  # 10 log10 -> log10
    floor = logmel.max(axis=[1, 2], keepdim=True) - 8.0  # [B, 1, 1]
    return (paddle.maximum(logmel, floor) + 4.0) / 4.0  # [B, n_mels, frames]


class SinusoidalPositions(nn.Layer):
    """A fixed position table [n_ctx, dim] (a buffer, not a parameter); ``forward(x)`` -> its first T rows."""

    def __init__(self, n_ctx: int, dim: int) -> None:
        super().__init__()
        table = paddle.to_tensor(sinusoids(n_ctx, dim).astype(paddle.get_default_dtype()))
        self.register_buffer("weight", table, persistable=True)  # loadable from a checkpoint

    def forward(self, x: Tensor) -> Tensor:
        return self.weight[: x.shape[1]]  # [T, D]


def _conv(c_in: int, c_out: int, stride: int) -> LayerSpec:
    return LayerSpec(
        lambda: nn.Conv1D(c_in, c_out, 3, stride=stride, padding=1), ("conv1d", c_in, c_out, stride)
    )


class WhisperStyleEncoder(Encoder):
    """Log-mel features [B, n_mels, frames] -> ``hidden`` [B, T, D] and ``pooled`` (time mean) [B, D].

    Logical layers: ``conv1`` (Conv1D k3, GELU), ``conv2`` (Conv1D k3 stride 2, GELU; T =
    ceil(frames / 2) <= ``n_ctx``), ``positions`` (fixed sinusoids, a buffer), ``layers.0``
    .. ``layers.{depth-1}`` (pre-norm blocks: ``self_attn`` (key projection without bias,
    as Whisper), ``self_attn_layer_norm``, ``fc1``, ``fc2``, ``final_layer_norm``),
    ``ln_post`` and, with ``num_classes``, ``prediction`` (logits from ``pooled``).

    Input ``mel``: [B, n_mels, frames] float32, e.g. from `log_mel`. No padding mask:
    like Whisper, pad audio (or features) to one length; ``pooled`` averages every frame.
    Outputs: ``prediction`` (primary, when ``num_classes``), ``pooled``, ``hidden``
    (``feature_dim = dim``). ``waveform_input=True`` takes waveforms ``waveform`` [B, S] at
    ``sample_rate`` instead and computes `log_mel` inside (what an agent reading audio,
    such as the recognizer, asks for); it then also gives ``lengths`` int64 [B] (every
    position counts: Whisper has no padding mask).
    ``size`` picks a Whisper size (`WHISPER_SIZES`); explicit ``dim``/``depth``/
    ``heads`` win. ``pretrained`` loads a Hugging Face Whisper file right after ``build()``.
    """

    default_watch = ("prediction", "pooled")

    def __init__(
        self,
        scope: str,
        n_mels: int = 80,
        dim: int | None = None,
        depth: int | None = None,
        heads: int | None = None,
        n_ctx: int = 1500,
        sample_rate: int = 16000,
        size: str | None = None,
        mlp_dim: int | None = None,
        num_classes: int | None = None,
        dropout: float = 0.0,
        pretrained: str | None = None,
        pretrained_strict: bool = True,
        waveform_input: bool = False,
    ) -> None:
        super().__init__(scope)
        self.waveform_input = waveform_input
        self.min_samples = N_FFT // 2 + 1  # waveform_input: the centred STFT's reflect padding
        if size is not None:
            if size not in WHISPER_SIZES:
                raise ValueError(
                    f"{self._who()}: size must be one of {sorted(WHISPER_SIZES)}, got {size!r}"
                )
            d, w, h = WHISPER_SIZES[size]
            depth, dim, heads = depth or d, dim or w, heads or h
        if depth is None or dim is None or heads is None:
            raise ValueError(
                f"{self._who()}: give size= (one of {sorted(WHISPER_SIZES)}) or all of depth, "
                "dim and heads"
            )
        self.n_mels, self.dim, self.depth, self.heads = n_mels, dim, depth, heads
        self.feature_dim = dim  # width of pooled and hidden
        self.mlp_dim = 4 * dim if mlp_dim is None else mlp_dim
        self.n_ctx, self.sample_rate, self.size = n_ctx, sample_rate, size
        self.num_classes, self.dropout = num_classes, dropout
        self.pretrained, self.pretrained_strict = pretrained, pretrained_strict
        mlp = self.mlp_dim
        self.declare("conv1", _conv(n_mels, dim, 1))
        self.declare("conv2", _conv(dim, dim, 2))
        self.declare(
            "positions",
            LayerSpec(lambda: SinusoidalPositions(n_ctx, dim), ("sinusoids", n_ctx, dim)),
        )
        for i in range(depth):
            self.declare(
                f"layers.{i}",
                LayerSpec(
                    lambda: PreNormBlock(dim, heads, mlp, dropout, key_bias=False),
                    ("pre_norm_block", dim, heads, mlp),
                ),
            )
        self.declare("ln_post", LayerSpec(lambda: nn.LayerNorm(dim), ("layer_norm", dim)))
        if num_classes is not None:
            self.declare("prediction", dense(dim, num_classes))
        if waveform_input:
            self.declare_input("waveform", InputSpec((None,)))
        else:
            self.declare_input("mel", InputSpec((n_mels, None)))
        names = ("pooled", "hidden", *(("lengths",) if waveform_input else ()))
        self.declare_outputs(*(("prediction", *names) if num_classes is not None else names))

    # ------------------------------------------------------------------ inputs
    def log_mel(self, waveform: np.ndarray | Tensor) -> Tensor:
        """This encoder's input from waveforms [B, S] at ``sample_rate``: [B, n_mels, S // 160]."""
        return whisper_log_mel(waveform, self.n_mels, self.sample_rate)

    def forward_waveform(self, waveform: np.ndarray | Tensor) -> dict[str, Tensor]:
        """Every named output for waveforms [B, S] (``forward_all(log_mel(waveform))``)."""
        return self.forward_all(self.log_mel(waveform))

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return (
            f"Give log-mel features as [B, {self.n_mels}, frames] float32 (frames <= "
            f"{2 * self.n_ctx}); encoder.log_mel(waveforms) computes them."
        )

    def _check_inputs(self, inputs: tuple) -> list[Tensor]:
        xs = super()._check_inputs(inputs)
        if self.waveform_input:
            if paddle.in_dynamic_mode() and xs[0].shape[1] < self.min_samples:
                raise EncoderInputError(
                    f"{self._who()} input 'waveform': {xs[0].shape[1]} samples, expected at "
                    f"least {self.min_samples}. Pad short clips with zeros."
                )
            return xs
        if paddle.in_dynamic_mode() and (xs[0].shape[2] + 1) // 2 > self.n_ctx:
            raise EncoderInputError(
                f"{self._who()} input 'mel': {xs[0].shape[2]} frames give "
                f"{(xs[0].shape[2] + 1) // 2} positions after conv2 but n_ctx={self.n_ctx}. "
                f"Crop to {2 * self.n_ctx} frames or build with a larger n_ctx."
            )
        return xs

    # ------------------------------------------------------------------ graph
    def _forward(self, mel: Tensor) -> dict[str, Tensor]:
        if self.waveform_input:
            mel = self.log_mel(mel)  # [B, S] -> [B, n_mels, frames]
        h = F.gelu(self.layers["conv1"](mel), approximate=False)  # [B, D, frames]
        h = F.gelu(self.layers["conv2"](h), approximate=False)  # [B, D, T]
        x = h.transpose([0, 2, 1])  # [B, T, D]
        x = x + self.layers["positions"](x)  # [B, T, D]
        for i in range(self.depth):
            x, _ = self.layers[f"layers.{i}"](x)  # [B, T, D]
        x = self.layers["ln_post"](x)  # [B, T, D]
        pooled = x.mean(axis=1)  # [B, D]
        out = {"pooled": pooled, "hidden": x}
        if self.waveform_input:  # [B]: every position is valid
            out["lengths"] = paddle.full([x.shape[0]], x.shape[1], dtype="int64")
        if self.num_classes is not None:
            out["prediction"] = self.layers["prediction"](pooled)  # [B, num_classes]
        return out

    # ------------------------------------------------------------------ pretrained files
    @classmethod
    def detect_source(cls, keys: list[str]) -> str:
        """``hf_whisper``: ``conv1``, ``embed_positions``, ``layers.N.self_attn.q_proj`` keys."""
        if any(k.endswith("embed_positions.weight") for k in keys) and any(
            ".self_attn.q_proj." in k for k in keys
        ):
            return "hf_whisper"
        raise PretrainedLoadError(
            f"cannot tell which Whisper naming these keys use ({sorted(keys)[:4]} ...): expected "
            "Hugging Face (model.encoder.conv1.weight, model.encoder.layers.0.self_attn.q_proj."
            "weight, ...); pass source="
        )

    def convert_pretrained(self, arrays: dict[str, Any], source: str) -> dict[str, Any]:
        """Drop the decoder half of a full Whisper checkpoint (``decoder.*``, ``proj_out``)."""
        decoder = [k for k in arrays if _is_whisper_decoder(k)]
        if decoder:
            log.info("%s: skipping %d Whisper decoder keys", self._who(), len(decoder))
        return {k: v for k, v in arrays.items() if k not in decoder}

    def pretrained_key(self, key: str, source: str) -> str | None:
        """The ``state_dict()`` key that external ``key`` fills (None: no place for it)."""
        if source != "hf_whisper":
            raise PretrainedLoadError(
                f"WhisperStyleEncoder has no key map for source {source!r}; use hf_whisper"
            )
        key = key.removeprefix("model.").removeprefix("encoder.")
        for pattern, repl in _HF_RULES:
            new, n = pattern.subn(repl, key)
            if n:
                return new
        return None


_HF_RULES = [
    (re.compile(r"^conv([12])\."), r"layers.conv\1."),
    (re.compile(r"^embed_positions\.weight$"), "layers.positions.weight"),
    (re.compile(r"^layers\.(\d+)\."), r"layers.layers.\1."),
    (re.compile(r"^layer_norm\."), "layers.ln_post."),
]


def _is_whisper_decoder(key: str) -> bool:
    return key.startswith(("model.decoder.", "decoder.")) or key.startswith("proj_out.")
