"""Synthetic speech (eSpeak NG via espeakng-loader), its cache, voice splits, and the WAV-folder loader."""

from __future__ import annotations

import wave

import numpy as np
import pytest

from paddlecraft.craftdata import speech
from paddlecraft.craftdata.speech import (
    ESPEAK_RATE,
    Utterance,
    espeak_voices,
    make_utterances,
    split_voices,
    synthesize,
)
from paddlecraft.craftdata.wav import load_wav_folder, read_wav, split_by_speaker, write_wav

pytest.importorskip("espeakng_loader")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLECRAFT_CACHE", str(tmp_path / "cache"))


def test_synthesis_gives_non_silent_22050_hz_int16_audio():
    assert ESPEAK_RATE == 22050
    (clip,) = synthesize([Utterance("seven", voice="m3")], cache=False)
    assert clip.dtype == np.int16 and clip.ndim == 1
    assert 0.2 < len(clip) / ESPEAK_RATE < 2.0
    rms = np.sqrt(np.mean(clip.astype(np.float64) ** 2))
    assert rms > 500 and np.abs(clip).max() > 3000
    (resampled,) = synthesize([Utterance("seven", voice="m3")], 16000, cache=False)
    assert resampled.dtype == np.int16
    assert abs(len(resampled) - len(clip) * 16000 / 22050) < 2


def test_same_list_is_bit_identical_across_runs_and_voices_differ():
    utts = make_utterances(
        ["zero", "one", "a red circle above a blue square"],
        espeak_voices()[:30],
        np.random.default_rng(1),
    )
    a = synthesize(utts, cache=False)
    b = synthesize(utts, cache=False)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    f3, m1 = synthesize([Utterance("nine", voice="f3"), Utterance("nine", voice="m1")], cache=False)
    assert not (len(f3) == len(m1) and np.array_equal(f3, m1))


def test_cache_is_written_once_and_read_back(tmp_path, monkeypatch):
    utts = [Utterance("two", voice="f2", seed=5), Utterance("three", voice="m2", seed=6)]
    first = synthesize(utts, 16000)
    entries = list((tmp_path / "cache" / "speech").iterdir())
    assert len(entries) == 1 and (entries[0] / "clips.npz").is_file()

    def boom(*a, **k):
        raise AssertionError("synthesised again instead of reading the cache")

    monkeypatch.setattr(speech, "_run_chunks", boom)
    again = synthesize(utts, 16000)
    assert all(np.array_equal(x, y) for x, y in zip(first, again))


def test_voice_split_is_disjoint_and_seeded():
    train, test = split_voices(0, 0.2)
    assert not set(train) & set(test)
    assert sorted(train + test) == espeak_voices() and len(espeak_voices()) > 50
    assert split_voices(0, 0.2) == (train, test) and split_voices(1, 0.2) != (train, test)


def _write_fsdd(root, rate=8000):
    rng = np.random.default_rng(0)
    for speaker in ("jackson", "nicolas", "theo"):
        for digit in (0, 3, 7):
            for n in range(2):
                t = np.arange(int(rate * 0.25)) / rate
                x = 0.3 * np.sin(2 * np.pi * (200 + 50 * digit) * t) + 0.01 * rng.standard_normal(
                    len(t)
                )
                write_wav(root / f"{digit}_{speaker}_{n}.wav", x, rate)
    (root / "README.txt").write_text("not audio")
    write_wav(root / "noise.wav", np.zeros(100), rate)  # not in the FSDD layout: ignored


def test_wav_folder_loader_reads_test_written_files(tmp_path):
    _write_fsdd(tmp_path)
    data = load_wav_folder(tmp_path, sample_rate=16000)
    assert len(data) == 18 and data.sample_rate == 16000
    assert data.voices[:6] == ["jackson"] * 6 and data.texts[:2] == ["zero", "zero"]
    assert set(data.texts) == {"zero", "three", "seven"}
    assert all(w.dtype == np.int16 and len(w) == 4000 for w in data.waveforms)  # 0.25 s, 8k -> 16k
    train, test = split_by_speaker(data, test_speakers=["theo"])
    assert set(test.voices) == {"theo"} and "theo" not in train.voices and len(train) == 12


def test_read_wav_handles_stereo_and_24_bit(tmp_path):
    x = (np.arange(-50, 50) * 300).astype(np.int32)
    with wave.open(str(tmp_path / "s.wav"), "wb") as w:
        w.setnchannels(2), w.setsampwidth(3), w.setframerate(8000)
        frames = np.stack([x, x], 1).reshape(-1) << 8  # 24-bit values
        raw = np.stack([(frames >> s) & 0xFF for s in (0, 8, 16)], 1).astype(np.uint8).tobytes()
        w.writeframes(raw)
    y, rate = read_wav(tmp_path / "s.wav")
    assert rate == 8000 and y.dtype == np.int16 and np.array_equal(y, x)


def test_wav_loader_errors_name_the_layout(tmp_path):
    with pytest.raises(FileNotFoundError, match="<digit>_<speaker>_<n>.wav"):
        load_wav_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_wav_folder(tmp_path / "missing")
