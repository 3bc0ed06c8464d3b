"""The spoken channel: each symbol is a syllable voiced by eSpeak NG; messages are heard
through noise at a chosen signal-to-noise ratio.

Symbol ``k`` is the syllable ``SYLLABLES[k]`` (one voice, synthesised once and cached by
`paddlecraft.craftdata.speech.synthesize`); a message is its syllables one after the
other with a short pause. White noise is added to each message at ``snr_db`` over the
message's own samples; the zero padding that batches messages of different lengths stays
silent (speech encoders mask it). Speech is not differentiable, so the speaker learns by
REINFORCE.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SYLLABLES", "Voice", "add_noise"]

SYLLABLES: tuple[str, ...] = tuple(
    c + v for v in ("a", "i", "o", "u") for c in ("b", "d", "k", "m", "p", "s", "t", "v")
)  # 32 syllables: ba da ka ... vu
PAUSE_S = 0.04


def add_noise(wave: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """``wave`` (float [S]) plus white noise whose power is the wave's power / 10^(snr/10)."""
    power = float(np.mean(wave.astype(np.float64) ** 2))
    sigma = np.sqrt(power / 10.0 ** (snr_db / 10.0))
    return (wave + rng.normal(0.0, sigma, wave.shape)).astype(np.float32)


class Voice:
    """Turns messages (int symbols [B, L]) into noisy waveforms [B, S] at ``sample_rate``."""

    def __init__(self, vocab_size: int, sample_rate: int = 8000, rate: int = 320) -> None:
        from paddlecraft.agents.settings import ConfigError

        if vocab_size > len(SYLLABLES):
            raise ConfigError(
                f"arena.spoken: at most {len(SYLLABLES)} symbols can be voiced, "
                f"vocab_size is {vocab_size}"
            )
        self.vocab_size, self.sample_rate, self.rate = vocab_size, sample_rate, rate
        self._clips: list[np.ndarray] | None = None

    @property
    def clips(self) -> list[np.ndarray]:
        """Each symbol's waveform, float32 in [-1, 1) (synthesised on first use, cached)."""
        if self._clips is None:
            from paddlecraft.craftdata.speech import Utterance, synthesize, to_float

            utts = [Utterance(s, rate=self.rate) for s in SYLLABLES[: self.vocab_size]]
            self._clips = [to_float(w) for w in synthesize(utts, self.sample_rate, workers=1)]
        return self._clips

    def say(self, symbols: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
        """Noisy waveforms float32 [B, S] of messages ``symbols`` int [B, L], zero-padded."""
        pause = np.zeros(int(PAUSE_S * self.sample_rate), np.float32)
        waves = []
        for msg in np.asarray(symbols):
            parts = [p for s in msg for p in (self.clips[int(s)], pause)]
            waves.append(add_noise(np.concatenate(parts[:-1]), snr_db, rng))
        out = np.zeros((len(waves), max(len(w) for w in waves)), np.float32)
        for i, w in enumerate(waves):
            out[i, : len(w)] = w
        return out
