"""Real recordings: WAV files in the Free Spoken Digit Dataset layout (``<digit>_<speaker>_<n>.wav``).

Point `load_wav_folder` at a folder of such files (e.g. FSDD's ``recordings/``) to
train or test on real speech; nothing is downloaded. Files are read with the standard
library's ``wave`` module (8/16/24/32-bit PCM, any channel count: channels are averaged)
and resampled to one rate.
"""

from __future__ import annotations

import os
import re
import wave
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from paddlecraft.craftdata.speech import DIGIT_WORDS, SpokenSplit, resample

__all__ = ["FSDD_PATTERN", "load_wav_folder", "read_wav", "split_by_speaker", "write_wav"]

#: ``<digit>_<speaker>_<index>.wav``, e.g. ``7_jackson_32.wav``
FSDD_PATTERN = re.compile(r"^(?P<digit>\d)_(?P<speaker>[A-Za-z0-9-]+)_(?P<index>\d+)\.wav$")


SPEAKER_SPLIT_STREAM = 0x5B  #: random-stream id: the held-out speakers


def read_wav(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """(int16 mono samples, sample rate) of a PCM WAV file."""
    with wave.open(str(path), "rb") as w:
        width, channels, rate = w.getsampwidth(), w.getnchannels(), w.getframerate()
        raw = w.readframes(w.getnframes())
    if width == 1:  # unsigned 8-bit
        x = (np.frombuffer(raw, np.uint8).astype(np.int32) - 128) << 8
    elif width == 2:
        x = np.frombuffer(raw, "<i2").astype(np.int32)
    elif width == 3:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        x = (b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 16  # sign-extend, keep 16 bits
    elif width == 4:
        x = np.frombuffer(raw, "<i4").astype(np.int64) >> 16
    else:
        raise ValueError(f"{path}: {8 * width}-bit samples are not supported (PCM 8/16/24/32)")
    x = x.reshape(-1, channels).mean(axis=1) if channels > 1 else x
    return np.clip(np.round(x), -32768, 32767).astype(np.int16), rate


def write_wav(path: str | os.PathLike, samples: np.ndarray, sample_rate: int) -> None:
    """Write mono 16-bit PCM (float input in [-1, 1] is scaled)."""
    x = np.asarray(samples)
    if x.dtype != np.int16:
        x = np.clip(np.round(x.astype(np.float64) * 32767), -32768, 32767).astype(np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(x.astype("<i2").tobytes())


def load_wav_folder(path: str | os.PathLike, sample_rate: int = 16000) -> SpokenSplit:
    """Every ``<digit>_<speaker>_<n>.wav`` under ``path``, resampled to ``sample_rate``.

    Returns a `SpokenSplit` whose texts are the digit words
    ("seven") and whose voices are the speakers, sorted by (speaker, digit, n) so the
    order never depends on the file system. Other files are ignored; a folder with no
    matching file is an error naming the expected layout.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"load_wav_folder: {str(root)!r} is not a folder")
    found = []
    for f in root.rglob("*.wav"):
        m = FSDD_PATTERN.match(f.name)
        if m:
            found.append((m["speaker"], int(m["digit"]), int(m["index"]), f))
    if not found:
        raise FileNotFoundError(
            f"load_wav_folder: no '<digit>_<speaker>_<n>.wav' files under {str(root)!r} "
            "(the Free Spoken Digit Dataset layout, e.g. 7_jackson_32.wav)"
        )
    found.sort(key=lambda t: t[:3])
    waves, texts, voices = [], [], []
    for speaker, digit, _, f in found:
        x, rate = read_wav(f)
        waves.append(resample(x, rate, sample_rate))
        texts.append(DIGIT_WORDS[digit])
        voices.append(speaker)
    return SpokenSplit(waves, texts, voices, sample_rate)


def split_by_speaker(
    data: SpokenSplit, test_speakers: Sequence[str] | None = None, seed: int = 0
) -> tuple[SpokenSplit, SpokenSplit]:
    """(train, test) with no speaker in both; ``test_speakers`` default: a seeded fifth of them."""
    speakers = sorted(set(data.voices))
    if test_speakers is None:
        if len(speakers) < 2:
            raise ValueError("split_by_speaker: need at least two speakers")
        rng = np.random.default_rng([seed, SPEAKER_SPLIT_STREAM])
        n = max(1, len(speakers) // 5)
        test_speakers = [speakers[i] for i in sorted(rng.permutation(len(speakers))[:n])]
    held = set(test_speakers)

    def pick(keep: bool) -> SpokenSplit:
        idx = [i for i, v in enumerate(data.voices) if (v in held) == keep]
        return SpokenSplit(
            [data.waveforms[i] for i in idx],
            [data.texts[i] for i in idx],
            [data.voices[i] for i in idx],
            data.sample_rate,
        )

    return pick(False), pick(True)
